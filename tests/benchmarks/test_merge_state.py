"""Merging one device call's KernelBench sweep into the repository's state (benchmarks/merge_state.py): only the lines
the call measured, so that a call which started from an older copy of the state reverts nothing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.merge_state import main


def _line(problem: str, speedup: float, level: int = 1) -> dict[str, object]:
    return {"level": level, "problem": problem, "speedup_vs_best": speedup}


def _write(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_only_the_calls_own_lines_replace_their_problems_in_place(tmp_path: Path) -> None:
    into = tmp_path / "state.jsonl"
    # The repository's state: B was re-measured (0.9x) after the call below had taken its copy (B at 0.5x).
    _write(into, [_line("A", 0.6), _line("B", 0.9), _line("C", 0.7)])
    call = tmp_path / "call"
    call.mkdir()
    _write(call / "state.jsonl", [_line("B", 0.5), _line("C", 0.7), _line("A", 1.2), _line("D", 1.1, level=2)])
    (call / "state.base").write_text("2\n")  # the call dropped A's line to measure it again, and kept B's and C's
    assert main([str(call), "--into", str(into)]) == 0
    merged = [json.loads(text) for text in into.read_text().splitlines()]
    assert merged == [_line("A", 1.2), _line("B", 0.9), _line("C", 0.7), _line("D", 1.1, level=2)]


def test_a_call_that_does_not_say_where_its_lines_start_is_refused_with_what_to_do(tmp_path: Path) -> None:
    into = tmp_path / "state.jsonl"
    _write(into, [_line("A", 0.6)])
    call = tmp_path / "call"
    call.mkdir()
    _write(call / "state.jsonl", [_line("A", 1.2)])
    with pytest.raises(SystemExit, match="state.base is missing"):
        main([str(call), "--into", str(into)])
    assert json.loads(into.read_text()) == _line("A", 0.6)
    with pytest.raises(SystemExit, match="holds no state.jsonl"):
        main([str(tmp_path / "elsewhere"), "--into", str(into)])
