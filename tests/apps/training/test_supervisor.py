"""The trainer's process group and the files it grows: real processes and real files."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from apps.training import supervisor


def test_it_returns_only_complete_lines_and_keeps_a_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail = supervisor.LineTail(path)
    assert tail.read() == []  # not written yet
    path.write_text('{"stage": "rft", "step": 1}\n{"stage": "rft", "st')
    assert tail.read() == ['{"stage": "rft", "step": 1}']
    assert tail.read() == []
    with path.open("a") as f:
        f.write('ep": 2}\n')
    assert [json.loads(line)["step"] for line in tail.read()] == [2]


def test_it_parses_a_metrics_line_and_keeps_the_other_values() -> None:
    row = supervisor.parse_metric(json.dumps({"stage": "grpo_single", "step": 3, "loss": 0.5, "reward": -1,
                                              "time": 1700000000.5, "grad_norm": 0.1}))
    assert row == {"stage": "grpo_single", "step": 3, "loss": 0.5, "reward": -1.0, "time": 1700000000.5,
                   "values": {"grad_norm": 0.1}}
    assert supervisor.parse_metric(json.dumps({"stage": "rft", "step": 1, "loss": None}))["loss"] is None


def test_it_skips_lines_that_are_not_metrics_records() -> None:
    for line in ("", "not json", "[1, 2]", json.dumps({"step": 1}), json.dumps({"stage": "rft", "step": "one"})):
        assert supervisor.parse_metric(line) is None, line


def test_it_keeps_the_end_of_the_log_within_the_limit_and_what_progress_bars_finally_showed() -> None:
    text = supervisor.tail_text("", ["Loading:   0%|  | 0/26\rLoading: 100%|##| 26/26", "line two"], 1000)
    assert text == "Loading: 100%|##| 26/26\nline two\n"
    long = supervisor.tail_text("", [f"line {i}" for i in range(1000)], 200)
    assert len(long) <= 200 and long.endswith("line 999\n") and long.startswith("line ")


def test_it_kills_the_trainers_whole_process_group(tmp_path: Path) -> None:
    # A stand-in for `accelerate launch`: a parent that starts a child in its group and waits, as the launcher does.
    pid_file = tmp_path / "child.pid"
    script = (f"import subprocess, sys, pathlib\n"
              f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
              f"pathlib.Path({str(pid_file)!r}).write_text(str(child.pid))\n"
              f"child.wait()\n")
    proc = supervisor.start([sys.executable, "-c", script], tmp_path / "train.log", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the stand-in never started its child"
        time.sleep(0.1)
    child = int(pid_file.read_text())
    assert os.getpgid(child) == proc.pid  # the child is in the trainer's own group, not the worker's
    code = supervisor.kill_group(proc, grace_seconds=10)
    assert code != 0
    deadline = time.monotonic() + 30
    while _alive(child):
        assert time.monotonic() < deadline, f"the child {child} outlived its group's kill"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of an exited parent is reaped by init; until then it is a zombie, which counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:  # reaped between the two looks
        return False
