"""A child process that imports torch once and checks many problems (trainer/synthesis/checks.py), so
that a crash or a hang in one costs that problem and a restart, never the caller.

Protocol: one JSON object a line. Once it has imported torch the child says {"ready": true}; then the
parent writes {"source": ...} to the child's stdin and the child answers one Outcome on the file
descriptor it was given (the real stdout; `print`s and compiler chatter inside it go to its log file
instead). `python -m trainer.synthesis.worker SETTINGS_JSON` is the child.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from trainer.synthesis.checks import CheckSettings, Outcome

ROOT = Path(__file__).resolve().parents[2]
# A fresh worker imports torch before it says it is ready (seconds; minutes on a loaded box).
STARTUP_SECONDS = 180.0


class WorkerError(RuntimeError):
    """The worker could not start (our bug or a broken environment, not a problem's fault)."""


class CheckWorker:
    """Checks sources one at a time in a reused child; `close()` (or `with`) ends it."""

    def __init__(self, settings: CheckSettings, timeout: float, threads: int | None = None) -> None:
        self.settings = settings
        self.timeout = timeout
        self.threads = threads
        self.restarts = 0  # children started after the first (each one a crash or a timeout)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._buffer = b""

    def __enter__(self) -> CheckWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self, source: str) -> Outcome:
        if self._proc is None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        wait = self.timeout
        try:
            self._proc.stdin.write(json.dumps({"source": source}).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            return self._lost("crashed", "the worker had exited before the problem was sent")
        try:
            line = self._read_line(wait)
        except EOFError:
            try:
                status = self._proc.wait(timeout=30)  # its output closed as it exited: reap it for the status
            except subprocess.TimeoutExpired:
                status = None
            return self._lost("crashed", f"the worker died with exit status {status}")
        if line is None:
            return self._lost("timeout", f"no answer within {wait:.0f} s (a hang, or far too slow); the worker was killed")
        return Outcome(**json.loads(line))

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()  # the child's loop ends at EOF
                except BrokenPipeError:
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _start(self) -> None:
        self._log = tempfile.TemporaryFile()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        if self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "trainer.synthesis.worker", json.dumps(asdict(self.settings))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, cwd=ROOT, env=env)
        self._buffer = b""
        try:
            line = self._read_line(STARTUP_SECONDS)
        except EOFError:
            line = None
        if line is None or not json.loads(line).get("ready"):
            log = self._log_tail()
            hung = self._proc.poll() is None
            if hung:
                self._proc.kill()
            status = self._proc.wait()
            self.close()
            why = f"was not ready within {STARTUP_SECONDS:.0f} s" if hung else f"exited with status {status} before it was ready"
            raise WorkerError(f"the synthesis check worker did not start: it {why} ({sys.executable} -m "
                              f"trainer.synthesis.worker); its log:\n{log}")

    def _read_line(self, seconds: float) -> bytes | None:
        """The child's next line; None when `seconds` pass first; EOFError when the child closed its end (died)."""
        assert self._proc is not None and self._proc.stdout is not None
        stream = self._proc.stdout
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    return None
                chunk = os.read(stream.fileno(), 1 << 16)
                if not chunk:
                    raise EOFError
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _lost(self, reason: str, detail: str) -> Outcome:
        """The child is gone or stuck: kill it (the next check starts a fresh one) and blame this problem."""
        assert self._proc is not None
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        log = self._log_tail()
        self.close()
        self.restarts += 1
        return Outcome(ok=False, reason=reason, detail=f"{detail}\n{log}".strip())

    def _log_tail(self, chars: int = 1500) -> str:
        if self._log is None:
            return ""
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - chars))
        return self._log.read().decode("utf-8", "replace")


def serve(settings: CheckSettings, answers: IO[str]) -> None:
    from trainer.synthesis.checks import check_source

    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in sys.stdin:
        request: dict[str, Any] = json.loads(line)
        outcome = check_source(request["source"], settings)
        answers.write(json.dumps(outcome.to_dict()) + "\n")
        answers.flush()


def main() -> None:
    settings = CheckSettings(**json.loads(sys.argv[1]))
    # Keep the protocol's descriptor for answers; anything printed (by a problem, by inductor) goes to the log.
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(settings, answers)


if __name__ == "__main__":
    main()
