"""A finished agent run as the pages see it, made without a worker: a candidate that failed to build
(with g++'s real log), an accepted one with a full verdict (trials, flags, timing spread, a profile), and
its kernel in the library through the real keep_accepted()."""
from __future__ import annotations

import pytest

from apps.kernels.services import keep_accepted
from apps.problems.services import sha256
from apps.runs.models import Candidate, Run
from apps.runs.events import append_event
from tests.agent.engine.test_diagnostics import GXX_LOG
from tests.apps.cast import BAD_BUILD_CANDIDATE, GOOD_CANDIDATE

SPREAD = {"median_ms": 0.5, "p10_ms": 0.45, "p90_ms": 0.65, "min_ms": 0.44, "iterations": 10}
VERDICT = {
    "version": 1, "status": "accepted", "stage": "done", "message": "accepted", "correct": True, "weights": "copied",
    "device": "cpu", "hardware": {"host_cpu": "x86_64", "cpu_count": 2}, "toolchain": {"torch_version": "2.13.0+cpu"},
    "trials": [{"index": i, "distribution": d, "passed": True, "max_abs_error": 2e-7 * (i + 1), "max_rel_error": 1e-6,
                "atol": 1e-5, "rtol": 1e-5, "mismatched": 0, "numel": 1048576, "note": ""}
               for i, d in enumerate(("problem", "scaled", "mixed_sign"))],
    "flags": [{"flag": "noisy_timing", "detail": "p10-p90 spread is 40% of the median"}],
    "timing": {"candidate_ms": 0.5, "eager_ms": 1.0, "compile_ms": None, "speedup_vs_eager": 2.0, "speedup_vs_compile": None,
               "candidate": SPREAD, "eager": {**SPREAD, "median_ms": 1.0}, "compile": None, "clock": "host",
               "host_candidate_ms": 0.5, "compile_note": "", "speedup_vs_best": 2.0, "interval_vs_best": [1.8, 2.2],
               "sol_fraction": 0.25, "sol_ms": 0.125, "sol_bound": "memory", "null_scale": 0.93,
               "variants": [{"label": "variant1", "candidate_ms": 1.5, "eager_ms": 2.4, "compile_ms": None,
                             "speedup_vs_eager": 1.6, "speedup_vs_compile": None, "speedup_vs_best": 1.6,
                             "interval_vs_best": [1.5, 1.7], "rounds": 5, "verified_calls": 40, "converged": True}]},
    "build": {"backend": "cpp", "seconds": 1.0, "cache_hits": 1, "cache_misses": 0, "fast_path": "", "log": "built"},
    "profile": {"tool": "torch.profiler", "device": "cpu", "iterations": 5, "total_us": 900.0, "note": "self CPU time per operator",
                "kernels": [{"name": "silu_bias", "calls": 5, "total_us": 800.0, "avg_us": 160.0, "pct": 88.9}]},
    "stdout": "", "stderr": "", "seconds": {},
}


@pytest.fixture
def finished_run(owner, problem):
    return make_finished_run(owner, problem)


def make_finished_run(owner, problem) -> dict:
    run = Run.objects.create(problem=problem, owner=owner, kind=Run.Kind.AGENT, status=Run.Status.FINISHED,
                             stage=Run.Stage.DONE, config={"policy": "scripted", "endpoint": "demo"})
    bad = BAD_BUILD_CANDIDATE.read_text()
    Candidate.objects.create(run=run, turn=1, source=bad, source_hash=sha256(bad), backend="cpp",
                             build={"backend": "cpp", "log": GXX_LOG},
                             verdict={"status": "build_error", "stage": "build", "message": "compiling main.cpp failed"})
    good = GOOD_CANDIDATE.read_text()
    accepted = Candidate.objects.create(run=run, turn=2, source=good, source_hash=sha256(good), backend="cpp",
                                        build=VERDICT["build"], verdict=VERDICT)
    append_event(run.pk, "assistant", {"turn": 0, "text": "Trying a fused loop.", "tool_calls": []})
    run.best_candidate, run.best_speedup = accepted, 2.0
    run.save(update_fields=["best_candidate", "best_speedup"])
    kernel = keep_accepted(accepted)
    append_event(run.pk, "run_finished", {"status": "finished", "message": "Submitted.", "best_speedup": 2.0})
    return {"run": run, "kernel": kernel}
