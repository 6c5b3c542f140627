"""The built-in policy run over a KernelBench-shaped folder (benchmarks/builtin_policy.py --run): each problem in its own
optimize process, one state line per finished problem, a rerun that goes on where the last stopped, and the report
per level over the planned problems. A small fixture of our own (public problems are never vendored), on the CPU."""
from __future__ import annotations

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
    lines = run_kernelbench(tmp_path, [1], device="cpu", max_turns=2, timeout=600, state=state)
    assert [line["problem"] for line in lines] == ["1_Sum_over_rows", "2_Sort"] == [r["problem"] for r in read_state(state)]
    sort = lines[1]
    assert not sort["planned"] and not sort["accepted"] and "sort" in sort["stop_reason"], sort
    report = run_markdown(lines, "test machine")
    assert "| 1 | 2 | 1 | 1 (100%) |" in report, report
    assert "| 1 | 2_Sort | not planned: " in report


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
