"""The trainer as a child process of the train worker: started in a session of its own (so one signal reaches
`accelerate launch` and every process it started), and its files read as they grow. No Django here."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def start(argv: list[str], log_path: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the trainer with stdout and stderr into `log_path`. start_new_session makes its pid its process
    group id: kill_group() then stops the launcher and the training processes together."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen, grace_seconds: float = 10.0) -> int:
    """SIGTERM to the whole group (accelerate forwards it and the trainers can exit cleanly), SIGKILL to what
    is left after the grace period. Returns the exit status."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        pass
    finally:
        # The launcher may have exited on SIGTERM while a child of its group lingers: no survivor either way.
        _signal_group(proc.pid, signal.SIGKILL)
    return proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group is already gone
        pass


class LineTail:
    """The complete lines appended to a file since the last read. A last line without its newline is still
    being written: it is kept back until the newline arrives (the trainer flushes line by line, but a reader
    can land between a line's bytes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:  # the trainer has not written it yet
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        return chunk[:end].decode("utf-8", errors="replace").split("\n")


def parse_metric(line: str) -> dict[str, Any] | None:
    """One metrics.jsonl line as {"stage", "step", "loss", "reward", "time", "values"}, or None for a line
    that is not a metrics record (blank, not JSON, no stage or step): skipped, never fatal to the run."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("stage"), str) or not isinstance(record.get("step"), int):
        return None
    return {"stage": record["stage"], "step": record["step"], "loss": _number(record.get("loss")),
            "reward": _number(record.get("reward")), "time": _number(record.get("time")) or time.time(),
            "values": {k: v for k, v in record.items() if k not in ("stage", "step", "loss", "reward", "time")}}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def clean_log(text: str) -> str:
    """Progress bars redraw a line with carriage returns; keep what each line finally showed."""
    return "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))


def tail_text(previous: str, new_lines: list[str], limit: int) -> str:
    """The log tail with `new_lines` appended, cut at a line boundary to at most `limit` characters."""
    text = previous + "".join(clean_log(line) + "\n" for line in new_lines)
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    newline = cut.find("\n")
    return cut[newline + 1:] if 0 <= newline < len(cut) - 1 else cut
