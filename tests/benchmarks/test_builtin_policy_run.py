"""The built-in policy run over a KernelBench-shaped folder (benchmarks/builtin_policy.py --run): each problem in its own
optimize process, one state line per finished problem, a rerun that goes on where the last stopped, and the report
per level over the planned problems. A small fixture of our own (public problems are never vendored), on the CPU."""
from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.builtin_policy import read_state, run_kernelbench, run_markdown
from tests.benchmarks.test_builtin_policy_count import HEADER, TAIL

pytestmark = pytest.mark.slow  # real optimize processes, real g++ builds

PROBLEMS = {"1_Sum_over_rows.py": "    def forward(self, x):\n        return x.sum(dim=-1)\n",  # one CPU variant
            "2_Sort.py": "    def forward(self, x):\n        return torch.sort(x, dim=-1).values\n"}


def test_it_runs_each_problem_once_resumes_from_its_state_and_reports_over_the_planned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "KernelBench" / "level1"
    folder.mkdir(parents=True)
    for name, body in PROBLEMS.items():
        (folder / name).write_text(HEADER + body + TAIL)
    state = tmp_path / "state.jsonl"
    # A budget of no seconds still runs the first problem (nothing is started past it), then stops.
    # With a prebuild of the problems without a line first: the policy's own variants, built before any run.
    first = run_kernelbench(tmp_path, [1], device="cpu", max_turns=2, timeout=600, state=state, seconds=0,
                            prebuild_jobs=2)
    log = capsys.readouterr().err
    assert "prebuild 1_Sum_over_rows_0: built" in log and "prebuild 2_Sort: not planned" in log, log
    assert "prebuilt the variants of the next 2 problems" in log, log
    assert [line["problem"] for line in first] == ["1_Sum_over_rows"]
    summed = first[0]
    assert summed["planned"] and summed["accepted"] and summed["verdict"] == "accepted", summed
    assert summed["speedup_vs_eager"] is not None and summed["speedup_vs_eager"] > 0
    assert summed["variant"] == "rows across threads, one row buffer per task", summed  # a row plan's one CPU variant
    # Every evaluation of the run, in order (here the one variant): what a losing variant's status and time were.
    (only,) = summed["tried"]
    assert only["status"] == "accepted" and only["candidate_ms"] > 0 and only["turn"] == 0, summed["tried"]
    assert only["speedup_vs_eager"] == pytest.approx(summed["speedup_vs_eager"]), summed
    # Which engine measured it: the tree's commit (a checkout here; KS_ENGINE on a box whose copy has no .git).
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                          text=True).stdout.strip()
    assert summed["engine"] is not None and summed["engine"].split("+")[0] == head, summed["engine"]
    lines = run_kernelbench(tmp_path, [1], device="cpu", max_turns=2, timeout=600, state=state)
    assert [line["problem"] for line in lines] == ["1_Sum_over_rows", "2_Sort"] == [r["problem"] for r in read_state(state)]
    sort = lines[1]
    assert not sort["planned"] and not sort["accepted"] and "sort" in sort["stop_reason"], sort
    report = run_markdown(lines, "test machine")
    assert "| 1 | 2 | 1 | 1 (100%) |" in report, report
    assert "| 1 | 2_Sort | not planned: " in report
    assert f"| {summed['engine']} |" in report.split("| 1 | 1_Sum_over_rows |")[1].splitlines()[0], report


def test_no_problem_starts_that_the_longest_so_far_would_carry_past_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device call has a hard limit: a problem started just before it is killed and loses its line. Here each problem
    takes 100 s of a clock of our own (the optimize run itself is not what this checks): with 250 s, the second starts
    (100 + 100 <= 250) and the third does not (200 + 100 > 250), where "no problem after 250 s" would have started it."""
    import benchmarks.builtin_policy as builtin_policy

    folder = tmp_path / "level1"
    folder.mkdir()
    for n in range(1, 5):
        (folder / f"{n}_Sum.py").write_text(HEADER + "    def forward(self, x):\n        return x.sum(dim=-1)\n" + TAIL)
    clock = [0.0]

    def run_example(path: Path, **_: object) -> dict[str, object]:
        clock[0] += 100.0
        return {"status": "stopped", "stop_reason": "max turns", "process_seconds": 100.0}

    monkeypatch.setattr(builtin_policy, "run_example", run_example)
    monkeypatch.setattr(builtin_policy, "time", SimpleNamespace(monotonic=lambda: clock[0]))  # this module's clock only
    lines = run_kernelbench(tmp_path, [1], device="cpu", max_turns=1, timeout=600, state=tmp_path / "s.jsonl", seconds=250)
    assert [line["problem"] for line in lines] == ["1_Sum", "2_Sum"]


def test_with_several_gpus_problems_run_at_once_each_alone_on_one_gpu_and_each_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A box of four GPUs measures four problems at a time: the first two calls here meet at a barrier, which one
    worker alone would never reach (it would time out), and each call names exactly one GPU of its own."""
    import threading

    import benchmarks.builtin_policy as builtin_policy

    folder = tmp_path / "level1"
    folder.mkdir()
    for n in range(1, 6):
        (folder / f"{n}_Sum.py").write_text(HEADER + "    def forward(self, x):\n        return x.sum(dim=-1)\n" + TAIL)
    both_running = threading.Barrier(2, timeout=20)
    calls: list[tuple[str, int | None]] = []
    running: set[int | None] = set()
    lock = threading.Lock()

    def run_example(path: Path, *, gpu: int | None = None, **_: object) -> dict[str, object]:
        with lock:
            assert gpu not in running, f"GPU {gpu} was given a second problem while it ran one"
            running.add(gpu)
            calls.append((path.stem, gpu))
            first_two = len(calls) <= 2
        if first_two:
            both_running.wait()
        with lock:
            running.discard(gpu)
        return {"status": "stopped", "stop_reason": "max turns", "process_seconds": 1.0}

    monkeypatch.setattr(builtin_policy, "run_example", run_example)
    lines = run_kernelbench(tmp_path, [1], device="cuda", max_turns=1, timeout=600, state=tmp_path / "s.jsonl", gpus=2)
    assert sorted(line["problem"] for line in lines) == [f"{n}_Sum" for n in range(1, 6)]
    assert sorted(stem for stem, _ in calls) == [f"{n}_Sum" for n in range(1, 6)]
    assert {gpu for _, gpu in calls} == {0, 1}
    assert len(read_state(tmp_path / "s.jsonl")) == 5


def test_an_optimize_run_on_one_gpu_sees_only_that_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import benchmarks.builtin_policy as builtin_policy

    seen: dict[str, object] = {}

    def run_command(example: str, command: list[str], timeout: float, env: dict[str, str] | None = None) -> dict:
        seen.update(example=example, env=env)
        return {}

    monkeypatch.setattr(builtin_policy, "run_command", run_command)
    builtin_policy.run_example(tmp_path / "3_Relu.py", device="cuda", max_turns=1, timeout=1, gpu=3)
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "3" and seen["example"] == "3_Relu"
    builtin_policy.run_example(tmp_path / "3_Relu.py", device="cuda", max_turns=1, timeout=1)
    assert seen["env"] is None  # inherited as it is
