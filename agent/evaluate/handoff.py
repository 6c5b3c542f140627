"""How the candidate's job and the reference's job run at the same time without timing each other.

A turn used to run them one after the other: the candidate's job (set-up, checked calls, timing), then the
reference's (set-up again, comparison, eager timing). On the H100 each job's CUDA start and set-up cost
~0.35 s, and the comparison read back every output after the candidate was gone (docs/benchmarks.md §3). Now
the reference's job starts with the candidate's and compares each checked output as soon as it is written;
three pipes, made by the trusted parent, keep the two jobs' device work apart where it matters:

  progress  candidate -> reference  JSON lines: {"entries": [layout entries]} after each checked call's
                                    outputs are in the memfd; {"timing": true} when it wants to time
  gate      reference -> candidate  one byte: the reference has compared everything announced and stays
                                    off the device until the candidate's job is over
  control   parent -> reference     one JSON line once the candidate's job has ended and its processes are
                                    gone: {"layout": [...] or null}; only then does the reference time eager
                                    and torch.compile, so nothing of the candidate's can run beside them

What the candidate's process writes on `progress` is untrusted like everything else it produces: a line that
is too long or not the expected JSON ends the reading of progress (the gate opens; the comparison waits for
the final layout), and every layout entry is checked against the memfd before a byte is read. The candidate
only holds the write end of `progress` and the read end of `gate`, so the worst it can do is time itself
while the reference works, which only slows its own timings. The parent opens the gate too when the
reference's job ends early, so a dead reference never keeps the candidate waiting.
"""
from __future__ import annotations

import json
import os
import select
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

_MAX_LINE = 1 << 20
_GATE = b"g"


@dataclass
class Pipes:
    """The parent's ends of the three pipes and the ends it hands to each job."""

    progress: tuple[int, int] = field(default_factory=os.pipe)
    gate: tuple[int, int] = field(default_factory=os.pipe)
    control: tuple[int, int] = field(default_factory=os.pipe)

    def candidate_fds(self) -> tuple[int, int]:
        return self.progress[1], self.gate[0]

    def reference_fds(self) -> tuple[int, int, int]:
        return self.progress[0], self.gate[1], self.control[0]

    def open_gate(self) -> None:
        """The parent's own opening of the gate (the reference's job ended without opening it)."""
        _write(self.gate[1], _GATE)

    def send_control(self, layout: list[dict[str, Any]] | None) -> None:
        _write(self.control[1], json.dumps({"layout": layout}).encode() + b"\n")

    def close(self) -> None:
        for r, w in (self.progress, self.gate, self.control):
            for fd in (r, w):
                try:
                    os.close(fd)
                except OSError:
                    pass


def _write(fd: int, data: bytes) -> None:
    try:
        os.write(fd, data)
    except OSError:  # BrokenPipeError among them
        pass  # the reader is gone: nothing is waiting for this any more


class CandidateSide:
    """The candidate's job's ends: announce written outputs, wait for the gate before timing. Without fds (the
    sequential mode) both are no-ops."""

    def __init__(self, progress_fd: int | None = None, gate_fd: int | None = None) -> None:
        self.progress_fd = progress_fd
        self.gate_fd = gate_fd
        self._requested = False

    def announce(self, entries: list[dict[str, Any]]) -> None:
        if self.progress_fd is not None and entries:
            _write(self.progress_fd, json.dumps({"entries": entries}).encode() + b"\n")

    def request_gate(self) -> None:
        """Ask for the device: the reference finishes what it was given, then leaves it."""
        if self.progress_fd is not None and self.gate_fd is not None and not self._requested:
            self._requested = True
            _write(self.progress_fd, b'{"timing": true}\n')

    def wait_for_gate(self, seconds: float) -> dict[str, Any]:
        """Wait until the reference has left the device (or its job ended, or `seconds` passed), asking for it
        first unless request_gate() did. Returns what happened, for the job's header."""
        if self.progress_fd is None or self.gate_fd is None:
            return {}
        if not self._requested:
            self.request_gate()
        started = time.monotonic()
        ready, _, _ = select.select([self.gate_fd], [], [], seconds)
        waited = time.monotonic() - started
        if not ready:
            return {"waited_seconds": waited, "timed_out": True}
        os.read(self.gate_fd, 1)  # a byte, or EOF when every writer is gone: either way the reference is off
        return {"waited_seconds": waited}


class ReferenceSide:
    """The reference's job's ends: read what the candidate announces, open the gate, read the parent's word."""

    def __init__(self, progress_fd: int, gate_fd: int, control_fd: int) -> None:
        self.progress_fd: int | None = progress_fd
        self.gate_fd = gate_fd
        self.control_fd = control_fd
        self.gate_opened = False
        self.problems: list[str] = []
        self._buffers = {progress_fd: b"", control_fd: b""}

    def open_gate(self) -> None:
        if not self.gate_opened:
            self.gate_opened = True
            _write(self.gate_fd, _GATE)

    def events(self) -> Iterator[tuple[str, Any]]:
        """("entries", list), ("timing", None) from the candidate, until the parent's ("control", layout),
        which is always the last event (None for the layout when the parent's word is missing or malformed)."""
        while True:
            for event in self.poll(None):
                yield event
                if event[0] == "control":
                    return

    def poll(self, timeout: float | None) -> list[tuple[str, Any]]:
        """The events that can be read within `timeout` seconds (None: wait for at least one); a control event
        comes last and alone ends the exchange."""
        watched = [fd for fd in (self.progress_fd, self.control_fd) if fd is not None]
        ready, _, _ = select.select(watched, [], [], timeout)
        if self.control_fd in ready:
            line = self._line(self.control_fd)
            if line is not None:
                return [("control", _layout(line))]
        events: list[tuple[str, Any]] = []
        if self.progress_fd is not None and self.progress_fd in ready:
            for line in self._lines(self.progress_fd):
                event = self._progress_event(line)
                if event is None:
                    self._stop_progress()
                    break
                events.append(event)
        return events

    def _progress_event(self, line: bytes) -> tuple[str, Any] | None:
        try:
            message = json.loads(line)
        except ValueError:
            self.problems.append("the candidate's progress stream held a line that is not JSON")
            return None
        if isinstance(message, dict) and message.get("timing") is True:
            return "timing", None
        if isinstance(message, dict) and isinstance(message.get("entries"), list):
            return "entries", message["entries"]
        self.problems.append("the candidate's progress stream held an unexpected message")
        return None

    def _stop_progress(self) -> None:
        """Nothing more is read from the candidate; a candidate still waiting to time may go ahead."""
        self.progress_fd = None
        self.open_gate()

    def _lines(self, fd: int) -> list[bytes]:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            self._stop_progress()  # the candidate's job is over (or closed its end)
            return []
        data = self._buffers[fd] + chunk
        *lines, rest = data.split(b"\n")
        if len(rest) > _MAX_LINE:
            self.problems.append("the candidate's progress stream held a line over 1 MiB")
            self._stop_progress()
            return []
        self._buffers[fd] = rest
        return [line for line in lines if line]

    def _line(self, fd: int) -> bytes | None:
        """The parent's one line; None until it is complete. EOF without it means the parent gave no layout."""
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"{}"
        self._buffers[fd] += chunk
        if b"\n" not in self._buffers[fd]:
            return None
        return self._buffers[fd].split(b"\n", 1)[0]


def _layout(line: bytes) -> list[Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    layout = message.get("layout") if isinstance(message, dict) else None
    return layout if isinstance(layout, list) else None
