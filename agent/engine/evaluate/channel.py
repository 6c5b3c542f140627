"""The trusted parent's line to each sandboxed job: it sends commands and reads replies, one JSON line each.

The parent drives both jobs of an evaluation through these (session.py): nothing is decided by a job on its
own. A reply from the candidate's job was written by a process that ran candidate code, so the parent
trusts nothing in it: a line that is too long, not JSON, late or missing ends the exchange as the
candidate's failure (ChannelError), and every field is checked where it is used.
"""
from __future__ import annotations

import json
import os
import select
import time
from typing import Any, Callable, Iterator

MAX_LINE = 4 << 20
# How long a command may wait for the job to read it (send): far longer than reading a line takes any job that runs.
SEND_SECONDS = 60.0


class ChannelError(RuntimeError):
    """The job did not answer as the protocol says: it died, hung, or wrote something else."""


class ParentEnd:
    """The parent's ends: `send` a command, `receive` its reply. `job_fds()` are the ends the job gets."""

    def __init__(self, alive: Callable[[], bool] | None = None) -> None:
        self._commands = os.pipe()
        os.set_blocking(self._commands[1], False)  # send's write never waits on the job beyond its deadline
        self._replies = os.pipe()
        self._buffer = b""
        # Until the job's own copies are the only ones (close_job_ends), EOF cannot tell that it died: ask this.
        self.alive = alive or (lambda: True)
        # Seconds from each command's send to its reply, summed per command name: where an evaluation's time goes
        # (the verdict's `seconds`), never evidence of speed.
        self.ledger: dict[str, float] = {}
        self._pending: tuple[str, float] | None = None
        self.last_command: str | None = None  # the name of the command sent last: the one the next reply answers

    def job_fds(self) -> tuple[int, int]:
        return self._commands[0], self._replies[1]

    def close_job_ends(self) -> None:
        """Once the job has its copies: EOF on the reply pipe then means the job is gone."""
        for fd in self.job_fds():
            _close(fd)

    def send(self, command: dict[str, Any], seconds: float = SEND_SECONDS) -> float:
        """Write one command; returns the parent's clock read just before its first byte went (a batch's start).

        Read before, not after: a command longer than the pipe holds waits on the job to read it, and a job that shrank
        its pipe to one page (F_SETPIPE_SZ) ran the calls of the keys it had read before the rest were written, and so
        before a clock read after the write had started (the fourth red team's x5: 31.8x on a kernel worth 0.63x).
        What the job does with any part of the command is now inside its time. The write does not block: a job that
        reads none of it within `seconds` fails to answer, as one that never replies does."""
        data = memoryview(json.dumps(command).encode() + b"\n")
        sent = time.perf_counter()
        deadline = time.monotonic() + seconds
        while data:
            try:
                data = data[os.write(self._commands[1], data):]
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelError(f"the job did not read its command within {seconds:.0f} s") from None
                if not self.alive():
                    raise ChannelError("the job ended without reading its command") from None
                select.select([], [self._commands[1]], [], min(left, 0.2))
            except OSError as exc:
                raise ChannelError("the job is gone: its command pipe is closed") from exc
        self.last_command = str(command.get("cmd"))
        self._pending = (self.last_command, sent)
        return sent

    def receive(self, seconds: float) -> tuple[dict[str, Any], float]:
        """The next reply and the parent's clock at the moment its line was complete."""
        deadline = time.monotonic() + seconds
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelError(f"the job did not answer within {seconds:.0f} s")
            ready, _, _ = select.select([self._replies[0]], [], [], min(left, 0.2))
            if not ready:
                if not self.alive():
                    raise ChannelError("the job ended without answering")
                continue
            chunk = os.read(self._replies[0], 1 << 16)
            if not chunk:
                raise ChannelError("the job ended without answering")
            self._buffer += chunk
            if len(self._buffer) > MAX_LINE and b"\n" not in self._buffer:
                raise ChannelError(f"the job wrote a line over {MAX_LINE >> 20} MiB")
        at = time.perf_counter()
        if self._pending is not None:
            name, sent = self._pending
            self.ledger[name] = self.ledger.get(name, 0.0) + at - sent
            self._pending = None
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            # A job's reply is its word, and may be the candidate's: an integer too long for a float (10**400 as a
            # projection raised OverflowError in the figures' arithmetic) and nesting deep enough to exhaust the
            # recursion limit (RecursionError, no ValueError) each ended the evaluation as the engine's exception, with
            # no verdict (the seventh red team). Both are now a reply that cannot be read: the job's failure.
            reply = json.loads(line, parse_int=_bounded_int)
        except (ValueError, RecursionError) as exc:
            raise ChannelError(f"the job wrote a reply that is not JSON the parent reads: {str(exc)[:200]}") from exc
        if not isinstance(reply, dict):
            raise ChannelError("the job wrote a reply that is not a JSON object")
        if "error" in reply and reply.get("fatal"):
            raise JobFailed(str(reply["error"])[:6000], reply)
        return reply, at

    def ask(self, command: dict[str, Any], seconds: float) -> dict[str, Any]:
        self.send(command)
        return self.receive(seconds)[0]

    def close(self) -> None:
        for fd in (*self._commands, *self._replies):
            _close(fd)


# The most digits an integer in a reply may have: every figure a job reports fits a float many times over.
_INT_DIGITS = 30


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


class JobFailed(ChannelError):
    """The job answered that it cannot go on (the candidate raised, the problem failed...)."""

    def __init__(self, message: str, reply: dict[str, Any]) -> None:
        super().__init__(message)
        self.reply = reply


class JobEnd:
    """The job's ends: `commands()` yields each command, `reply` answers it."""

    def __init__(self, command_fd: int, reply_fd: int) -> None:
        self._in = os.fdopen(command_fd, "rb", buffering=0)
        self._out = reply_fd

    def commands(self) -> Iterator[dict[str, Any]]:
        buffer = b""
        while True:
            while b"\n" not in buffer:
                chunk = self._in.read(1 << 16)
                if not chunk:
                    return
                buffer += chunk
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line)

    def reply(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(self._out, view):]


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
