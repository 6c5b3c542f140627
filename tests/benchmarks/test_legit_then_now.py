"""Legitimate candidates under this engine and an earlier tree's, alternated (benchmarks/legit_then_now.py): each
engine really is its own tree's code, a verdict that was not accepted never enters a median, and the ratio is this
engine's median over the old one's."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.legit_then_now import ROOT, main, run_engine, table

TRUSTED_PROTOCOL_PARENT = "8cb4dcb"  # the main issue 19 was filed against: its engine timed inside the candidate


def _row(engine: str, speedup: float | None, status: str = "accepted") -> dict[str, object]:
    return {"engine": engine, "candidate": "legit_x", "status": status, "speedup_vs_eager": speedup}


def test_the_ratio_is_of_the_medians_and_a_verdict_not_accepted_is_shown_but_not_counted() -> None:
    rows = [_row("old", 2.0), _row("old", 2.2), _row("old", 9.0, "incorrect"),
            _row("new", 1.9), _row("new", 2.1), _row("new", 2.0)]
    line = table(rows, ["legit_x:problem"])[2]
    assert line == "| legit_x | 2.00, 2.20, incorrect | 1.90, 2.10, 2.00 | 2.10x | 2.00x | 0.952 |"


def test_an_engine_with_no_accepted_verdict_has_no_ratio() -> None:
    line = table([_row("old", None, "runtime_error"), _row("new", 1.5)], ["legit_x:problem"])[2]
    assert line.endswith("| n/a | 1.50x | n/a |")


def test_a_tree_without_the_old_engine_is_refused_with_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="holds no agent/evaluate/evaluator.py"):
        main(["--old-tree", str(tmp_path), "legit_cpp_silu_bias:elementwise_silu_bias"])


@pytest.mark.slow
def test_each_engine_is_its_own_trees_code_even_beside_an_editable_install(tmp_path: Path) -> None:
    # This checkout is installed in editable mode, whose finder answered `agent.engine` from here even with the old
    # tree first on the path: the old engine's process must import the old package and say so.
    archive = subprocess.run(["git", "archive", TRUSTED_PROTOCOL_PARENT, "agent"], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"{TRUSTED_PROTOCOL_PARENT} is not in this clone's history")
    tree = tmp_path / "old"
    tree.mkdir()
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    pair = ["legit_cpp_silu_bias:elementwise_silu_bias"]
    old, new = run_engine(tree, "cpu", pair, 240), run_engine(ROOT, "cpu", pair, 240)
    assert [r["engine"] for r in old] == ["old"] and [r["engine"] for r in new] == ["new"]
    assert Path(old[0]["engine_file"]).is_relative_to(tree) and Path(new[0]["engine_file"]).is_relative_to(ROOT / "agent")
    assert old[0]["status"] == new[0]["status"] == "accepted"
    assert old[0]["speedup_vs_eager"] > 0 and new[0]["speedup_vs_eager"] > 0
