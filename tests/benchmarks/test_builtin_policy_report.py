"""The built-in policy benchmark's bookkeeping: results in, table and summary out, and a run that
crashes, prints no JSON or hangs recorded as a failure instead of stopping the benchmark."""
from __future__ import annotations

import json
import math
import sys
from typing import Any

from benchmarks.builtin_policy import markdown, run_command, summarise


def _accepted(example: str, vs_eager: float, vs_compile: float | None) -> dict[str, Any]:
    timing = {"candidate_ms": 1.0, "eager_ms": vs_eager, "compile_ms": None if vs_compile is None else vs_compile,
              "speedup_vs_eager": vs_eager, "speedup_vs_compile": vs_compile}
    return {"example": example, "status": "submitted", "stop_reason": "submitted", "policy": "builtin", "turns": 3,
            "wall_seconds": 12.5, "verdict": {"status": "accepted", "timing": timing}}


def _failed(example: str, reason: str) -> dict[str, Any]:
    return {"example": example, "status": "failed", "stop_reason": reason, "policy": "builtin", "turns": None,
            "wall_seconds": 1.0, "verdict": None}


def test_it_counts_acceptance_over_all_and_averages_speedups_geometrically_over_the_accepted() -> None:
    results = [_accepted("a", 2.0, 1.0), _accepted("b", 8.0, 4.0), _failed("c", "timeout after 900 s"),
               {**_failed("d", "max turns"), "verdict": {"status": "incorrect", "timing": None}}]
    summary = summarise(results)
    assert (summary["accepted"], summary["total"], summary["accepted_pct"]) == (2, 4, 50.0)
    assert math.isclose(summary["geomean_vs_eager"], 4.0) and math.isclose(summary["geomean_vs_compile"], 2.0)


def test_it_averages_compile_speedups_only_where_a_compile_baseline_exists() -> None:
    summary = summarise([_accepted("a", 2.0, None), _accepted("b", 2.0, 3.0)])
    assert math.isclose(summary["geomean_vs_compile"], 3.0) and summary["compile_compared"] == 1


def test_it_reports_no_speedup_when_nothing_was_accepted() -> None:
    summary = summarise([_failed("a", "exit 2 without a JSON result")])
    assert summary["accepted"] == 0 and summary["geomean_vs_eager"] is None and summary["geomean_vs_compile"] is None
    assert summarise([])["accepted_pct"] == 0.0


def test_its_table_has_a_row_per_example_with_failures_and_their_reason() -> None:
    results = [_accepted("swiglu", 2.0, 1.5), _failed("softmax_rows", "exit 2 | bad\nchoice")]
    text = markdown(results, summarise(results), "torch 2.11, NVIDIA H100 80GB HBM3")
    lines = text.splitlines()
    assert lines[0].startswith("| example | accepted | speedup vs eager | speedup vs torch.compile |")
    assert lines[2] == "| swiglu | yes | 2.00x | 1.50x | 1.0000 | 2.0000 | 1.5000 | 3 | 12.5 |"
    # The reason's pipe is escaped and its newline folded, so the row keeps its nine columns.
    assert lines[3] == "| softmax_rows | no (exit 2 \\| bad choice) | — | — | — | — | — | — | 1.0 |"
    assert lines[-1].startswith("accepted 1/2 (50%); geometric-mean speedup over the accepted: 2.00x vs eager, 1.50x vs torch.compile")
    assert lines[-1].endswith("machine: torch 2.11, NVIDIA H100 80GB HBM3")


def test_it_records_a_run_without_json_as_a_failure_with_its_stderr() -> None:
    script = "import sys; print('Traceback: no policy builtin', file=sys.stderr); sys.exit(2)"
    result = run_command("relu_scale_bias", [sys.executable, "-c", script], timeout=60)
    assert result["verdict"] is None and result["exit_code"] == 2
    assert result["stop_reason"] == "exit 2 without a JSON result: Traceback: no policy builtin"


def test_it_keeps_the_outcome_of_a_run_that_printed_json() -> None:
    outcome = {"status": "stopped", "stop_reason": "max turns", "policy": "builtin", "turns": 2, "wall_seconds": 3.0,
               "verdict": None}
    script = f"import sys; print('a warning'); print({json.dumps(json.dumps(outcome))}); sys.exit(1)"
    result = run_command("row_sum", [sys.executable, "-c", script], timeout=60)
    assert result["stop_reason"] == "max turns" and result["exit_code"] == 1 and result["example"] == "row_sum"


def test_it_kills_a_run_past_its_timeout_and_records_why() -> None:
    result = run_command("row_max", [sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)
    assert result["stop_reason"] == "timeout after 0.5 s" and result["verdict"] is None
    assert result["process_seconds"] < 30
