"""What the run, candidate and kernel pages show of a verdict: the flags in plain words, the timing spread,
the profiler's table and the roofline placement. Pure functions of stored verdicts (apps/runs/stored_verdict.py);
no untrusted code runs."""
from __future__ import annotations

from typing import Any

from agent.engine.diagnostics import diagnostics
from agent.engine import place, speed_of_light_note
from apps.runs.stored_verdict import StoredVerdict

# Each verdict flag (agent/engine/verdict.py Flag) said plainly, for someone who did not write the evaluator.
FLAG_WORDS: dict[str, str] = {
    "input_mutated": "The kernel changed its input tensors; callers would see their data altered.",
    "output_aliases_input": "The output shares memory with an input instead of being a new tensor.",
    "output_aliases_parameter": "The output shares memory with one of the model's weights.",
    "stale_output": "The output was left over from an earlier call (stale memory), not computed from these inputs.",
    "forbidden_torch_op": "The kernel called PyTorch's own compute ops instead of doing the work itself.",
    "work_after_return": "Work was still running after the call returned, so the timing missed it.",
    "background_thread": "The kernel started a background thread, which can hide work from the timer.",
    "cpu_over_threads": "On the CPU the kernel used more cores than eager was given (the evaluation's thread count), so its speedup would not be a fair comparison.",
    "side_stream": "Work ran on another CUDA stream that the timing events do not see.",
    "timer_tampering": "The kernel changed the timing functions themselves.",
    "not_a_plain_tensor": "The output is a tensor subclass or lazy object rather than a plain tensor.",
    "precision_downgrade": "The kernel computed in lower precision than the reference (e.g. half instead of float).",
    "output_metadata": "The output's shape, dtype, device or layout differs from the reference's.",
    "timed_output_mismatch": "The outputs of the timed runs did not match the reference, so the fast runs were wrong.",
    "input_dependent_caching": "The kernel reused results keyed on input memory addresses instead of recomputing.",
    "beyond_roofline": "The measured time is below what the hardware can physically do for this work: not believable.",
    "clocks_disagree": "The GPU events and the host clock disagree: work ran outside the timed stream.",
    "near_zero_reference": "The reference's outputs are nearly all zero, so the tolerance check proves little.",
    "constant_reference": "The reference returns the same constant whatever its inputs: any kernel writing it passes, so this verdict proves nothing about the kernel.",
    "ill_conditioned_reference": "On some trials the reference's own float32 result is out of tolerance of its float64 one (an ill-conditioned problem, e.g. a result that is exactly zero); there the kernel was held to eager's own accuracy, not to eager's rounding.",
    "noisy_timing": "The speedup's interval stayed wide (or the timing was disturbed); the figure is less certain and is not a headline.",
}


def flags_in_words(flags: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    return [{"flag": f.get("flag", ""), "detail": f.get("detail", ""),
             "words": FLAG_WORDS.get(f.get("flag", ""), "A finding of the evaluator (see the detail).")}
            for f in flags or []]


def timing_rows(timing: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Median and spread per measured side (candidate, eager, torch.compile) of a verdict's timing."""
    rows = []
    for key, label in (("candidate", "this kernel"), ("eager", "PyTorch eager"), ("compile", "torch.compile")):
        spread = (timing or {}).get(key)
        if spread:
            median = spread.get("median_ms") or 0
            rows.append({"label": label, **spread,
                         "spread_pct": 100.0 * (spread.get("p90_ms", 0) - spread.get("p10_ms", 0)) / median if median else None})
    return rows


def verdict_panel(verdict: StoredVerdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    trials = verdict.trials
    return {"status": verdict.status, "stage": verdict.stage, "message": verdict.message,
            "weights": verdict.weights, "trials": trials,
            "max_abs": max((t.get("max_abs_error", 0) for t in trials), default=None),
            "max_rel": max((t.get("max_rel_error", 0) for t in trials), default=None),
            "flags": flags_in_words(verdict.flags), "timing": verdict.timing,
            "timing_rows": timing_rows(verdict.timing),
            "compile_note": (verdict.timing or {}).get("compile_note", "")}


def profile_panel(profile: dict[str, Any] | None) -> dict[str, Any] | None:
    """The profiler's table: the columns its tool reports, in order (ncu and torch.profiler differ)."""
    if not profile:
        return None
    kernels = profile.get("kernels") or []
    columns = [c for c in ("name", "calls", "duration_us", "total_us", "avg_us", "pct", "dram_pct", "sm_pct",
                           "occupancy_pct", "registers", "shared_mem_bytes", "grid", "block")
               if any(c in k for k in kernels)]
    return {"tool": profile.get("tool", ""), "note": profile.get("note", ""), "error": profile.get("error", ""),
            "total_us": profile.get("total_us"), "columns": columns,
            "rows": [[k.get(c) for c in columns] for k in kernels]}


def roofline(problem_validation: dict[str, Any] | None, verdict: StoredVerdict | None) -> dict[str, Any] | None:
    if verdict is None or not verdict.timing:
        return None
    work = ((problem_validation or {}).get("run") or {}).get("work")
    timing = verdict.timing
    placed = place(work, timing.get("candidate_ms"), verdict.hardware, timing.get("peaks")).to_dict()
    placed["sol_fraction"], placed["sol_ms"] = timing.get("sol_fraction"), timing.get("sol_ms")
    note = speed_of_light_note(timing)
    if note:
        placed["notes"].insert(0, note)
    memory, compute = placed["memory_roof"], placed["compute_roof"]
    placed["text"] = {"bandwidth": _rate(placed["achieved_bytes_per_s"], "B/s"), "compute": _rate(placed["achieved_flops_per_s"], "FLOP/s"),
                      "memory_roof": _rate(memory and memory["value"], "B/s"), "compute_roof": _rate(compute and compute["value"], "FLOP/s")}
    return placed


def _rate(value: float | None, unit: str) -> str:
    if not value:
        return ""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def build_markers(candidate_build: dict[str, Any] | None, source: str) -> list[dict[str, Any]]:
    log = (candidate_build or {}).get("log") or ""
    return [d.to_dict() for d in diagnostics(log, source)] if log else []
