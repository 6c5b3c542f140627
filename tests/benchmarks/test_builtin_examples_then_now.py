"""The examples against an earlier tree's policy (benchmarks/builtin_examples_then_now.py): the earlier policy's variants
come from that tree's own code, "then" is the best of them that was accepted, and an example counts as slower only
where the two speedups' intervals do not overlap."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.builtin_examples_then_now import _slower, emit_old, main, markdown, now_line

ROOT = Path(__file__).resolve().parents[2]
SINGLE_KERNEL_MAIN = "8cb4dcb"  # the main issue 23 was filed against


def _old(label: str, status: str, speedup: float | None, interval: list[float] | None = None) -> dict[str, object]:
    return {"label": label, "status": status, "flags": [], "candidate_ms": 1.0, "speedup_vs_eager": speedup,
            "interval": interval}


def _run(speedup: float, interval: list[float]) -> dict[str, object]:
    return {"verdict": {"status": "accepted", "timing": {"speedup_vs_eager": speedup, "interval_vs_eager": interval}},
            "best_source": "# built-in policy (256 threads)\n", "turns": 3, "stop_reason": "submitted"}


def test_then_is_the_fastest_accepted_old_variant_and_a_rejected_one_never_counts() -> None:
    old = [_old("a", "accepted", 1.2, [1.1, 1.3]), _old("b", "incorrect", 9.0), _old("c", "accepted", 1.5, [1.4, 1.6])]
    line = now_line(Path("softmax_rows.py"), _run(1.8, [1.7, 1.9]), old)
    assert line["then_variant"] == "c" and line["then_speedup_vs_eager"] == 1.5
    assert line["now_vs_then"] == pytest.approx(1.2)
    assert line["now_variant"] == "256 threads"


def test_an_example_is_slower_only_where_its_interval_lies_wholly_under_thens() -> None:
    old = [_old("a", "accepted", 1.5, [1.45, 1.55])]
    overlapping = now_line(Path("x.py"), _run(1.48, [1.40, 1.50]), old)
    below = now_line(Path("y.py"), _run(1.30, [1.25, 1.35]), old)
    assert not _slower(overlapping) and _slower(below)
    table = markdown([overlapping, below], "test machine")
    assert "slower beyond both intervals: 1" in table and "| y | 1.30x (1.25-1.35) |" in table


def test_a_now_run_that_was_not_accepted_has_no_ratio() -> None:
    failed = {"verdict": {"status": "incorrect"}, "stop_reason": "none of the built-in policy's kernels was accepted"}
    line = now_line(Path("x.py"), failed, [_old("a", "accepted", 1.5, [1.4, 1.6])])
    assert line["now_speedup_vs_eager"] is None and line["now_vs_then"] is None
    assert "| x | - (-) | none of the built-in policy" in markdown([line], "m")


def test_a_tree_without_the_single_kernel_policy_is_refused_with_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="holds no agent/builtin/codegen.py"):
        main(["--old-tree", str(tmp_path), "--state", str(tmp_path / "s.jsonl")])


def test_the_old_trees_own_code_writes_its_variants_at_the_examples_gpu_size(tmp_path: Path) -> None:
    tree = tmp_path / "old"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", SINGLE_KERNEL_MAIN, "agent"], cwd=ROOT, capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"{SINGLE_KERNEL_MAIN} is not in this clone's history")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    out = tmp_path / "sources"
    out.mkdir()
    variants = emit_old(tree, [ROOT / "examples" / "row_sum.py"], out)["row_sum"]
    assert len(variants) == 6 and variants[0][0].startswith("the row in registers")
    first = variants[0][1].read_text()
    # The GPU size of the example (32768 rows of 4096, chosen by torch.cuda.is_available()), not its CPU size.
    assert "load_inline(" in first and "32768" in first
