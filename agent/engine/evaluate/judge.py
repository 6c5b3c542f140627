"""From what the parent saw (session.Outcome) to the verdict. Every number here was measured by the parent or
by the reference's job; what the candidate's job said is used only where it can count against it (its
in-process flags) or as a cross-check beside the parent's figure (its device events)."""
from __future__ import annotations

from typing import Any

from agent.engine.evaluate.compare import NOISE_FACTOR
from agent.engine.evaluate.config import EvalConfig
from agent.engine.evaluate.cpu_share import call_cores, call_over_threads, over_threads
from agent.engine.evaluate.session import Measured, Outcome, describe_failure, median_interval
from agent.engine.evaluate.timing import summarize
from agent.engine.sandbox.client import JobResult
from agent.engine.verdict import (REJECTING_FLAGS, TIMING_FLAGS, BuildInfo, Finding, Flag, Spread, Stage, Status, Timing,
                           TrialResult, Verdict, cap_log)

# Changes when what a timing means changes: cached baselines of another protocol are not comparable.
PROTOCOL = "parent-clock-keyed-batches-1"
# The fastest imaginable compute roof (dense FP8 tensor cores of current parts, with margin).
_PEAK_FLOPS = 4e15
_FLAG_NAMES = {f.value for f in Flag}
# How far below the memory roof a time may be before it is rejected as impossible (_speed_of_light says why 1.5).
SOL_MARGIN = 1.5

MEASURED_BY = {
    "candidate_ms": "parent clock over the candidate's batches, less the null batches timed in the reference's job "
                    "times null_scale",
    "null_scale": "parent clock over both jobs' null batches (the candidate's own can only lower it; at most 1)",
    "eager_ms": "parent clock over the reference's eager batches, less the null batches",
    "compile_ms": "parent clock over the reference's torch.compile batches, less the null batches",
    "verified_calls": "reference's job: keyed projections of every timed call's outputs",
    "trials": "reference's job: every checked call's outputs, elementwise (and, where one failed, against the "
              "reference in float64)",
    "device_events_ms": "candidate's job (untrusted; a cross-check only)",
    "flags": "parent and reference's job; the in-process flags of the candidate's job only count against it",
    "variants": "as the main figures, on each of the problem's input variants' own bases",
    "sol_fraction": "parent: the reference job's work estimate at the peaks a job of ours measured (trusted store), "
                    "over the parent clock's candidate_ms",
}


def judge(out: Outcome, cfg: EvalConfig, build: BuildInfo, compile_cached: dict[str, Any] | None = None,
          peaks: dict[str, Any] | None = None) -> Verdict:
    job = out.candidate_job
    assert job is not None
    verdict = Verdict(Status.RUNTIME_ERROR, Stage.LOAD, "", build=build, device=cfg.device, stdout=job.stdout,
                      stderr=job.stderr, hardware=out.reference.get("hardware", {}),
                      toolchain=dict(out.reference.get("toolchain", {})), weights=out.weights)
    verdict.toolchain["isolation"] = job.isolation
    verdict.flags = [Finding(Flag(f["flag"]), f["detail"]) for f in out.flags if f["flag"] in _FLAG_NAMES]
    verdict.trials = [_trial(c) for c in out.comparisons]
    verdict.profile = out.profile
    verdict.kernel_census = out.kernel_census or None
    if out.failure is not None:
        return _failed(verdict, out, cfg, job)
    labels = out.reference.get("labels", [])
    verdict.correct = bool(verdict.trials) and len(verdict.trials) == len(labels) and all(t.passed for t in verdict.trials)
    constant = _constant_reference(out.comparisons) or _constant_in_float64(out.comparisons)
    if constant is not None:
        verdict.flags.append(constant)
    held = [c for c in out.comparisons if c.get("held_to_eager")]
    if held and verdict.correct:
        verdict.flags.append(Finding(Flag.ILL_CONDITIONED_REFERENCE, (
            f"on {len(held)} of {len(out.comparisons)} checked trials ({', '.join(str(c['label']) for c in held)}) the "
            f"reference's own float32 output is out of tolerance of a float64 evaluation of it; there the candidate "
            f"was held to within {NOISE_FACTOR:g}x the reference's own error from float64 (each trial's note gives "
            "the figures), and the timed calls' checks were widened alike")))
    if out.measured is not None:
        _timing(verdict, out, out.measured, compile_cached)
        if cfg.device == "cpu":
            _cpu_share(verdict, out, cfg.threads)
        if verdict.timing is not None:
            _speed_of_light(verdict, verdict.timing, out.work, peaks, slowest_ms(out.measured))
    verdict.stage = Stage.DONE
    # A wrong answer is "incorrect" first; "rejected" is for behaviour that games the evaluation, and what the
    # timing revealed matters only when the checked outputs were right.
    behaviour = [f for f in verdict.flags
                 if f.flag in REJECTING_FLAGS and (verdict.correct or f.flag.value not in TIMING_FLAGS)]
    if not verdict.correct:
        verdict.status = Status.INCORRECT
        verdict.message = _incorrect_message(verdict.trials, len(labels))
        if behaviour:
            verdict.message += "; also: " + "; ".join(f"{f.flag.value}: {f.detail}" for f in behaviour)
    elif behaviour:
        verdict.status = Status.REJECTED
        verdict.message = "rejected: " + "; ".join(f"{f.flag.value}: {f.detail}" for f in behaviour)
    else:
        verdict.status = Status.ACCEPTED
        verdict.message = _accepted_message(verdict)
    return verdict


def _cpu_share(verdict: Verdict, out: Outcome, threads: int) -> None:
    """The candidate's cores on the CPU, whole batches and calls alone (cpu_share.py); more than allowed rejects."""
    if verdict.timing is not None:
        if out.cpu_wall_seconds > 0:
            verdict.timing.cpu_cores = out.cpu_seconds / out.cpu_wall_seconds
        cpu, wall = call_cores(out.cpu_rounds, threads)
        verdict.timing.cpu_cores_calls = cpu / wall if wall > 0 else None
    extra = over_threads(out.cpu_seconds, out.cpu_wall_seconds, threads) or call_over_threads(out.cpu_rounds, threads)
    if extra is not None:
        verdict.flags.append(Finding(Flag.CPU_OVER_THREADS, extra))


def _failed(verdict: Verdict, out: Outcome, cfg: EvalConfig, job: JobResult) -> Verdict:
    kind, message = out.failure or ("runtime_error", "")
    if kind == "build_error":
        verdict.status, verdict.stage = Status.BUILD_ERROR, Stage.BUILD
        verdict.message = cap_log(message or "the candidate's extension failed to build", 6000)
        if verdict.build is not None:
            verdict.build.log = cap_log(str(out.candidate_ready.get("log", "")) + "\n" + verdict.build.log)
        return verdict
    verdict.stage = Stage.TIMING if out.measured is not None else Stage.CORRECTNESS if out.weights else Stage.LOAD
    if job.killed == "wall_time":
        verdict.status = Status.TIMEOUT
        verdict.message = f"the candidate ran past the {cfg.limits.wall_seconds:g} s wall-clock limit and was killed"
        return verdict
    if job.killed or job.signal:
        message = describe_failure(job, "running the candidate") + ("\n" + message if message else "")
    verdict.status = Status.REJECTED if any(f.flag in REJECTING_FLAGS for f in verdict.flags) else Status.RUNTIME_ERROR
    verdict.message = cap_log(message or describe_failure(job, "running the candidate"), 6000)
    return verdict


def _constant_reference(comparisons: list[dict[str, Any]]) -> Finding | None:
    """Raised where the reference's job found every output of every checked trial to be one constant, the same in
    every trial although each trial's inputs differ: then writing that constant passes every check."""
    seen = [c.get("reference_constants") for c in comparisons]
    first = seen[0] if seen else None
    if len(seen) < 2 or not first or any(s != first for s in seen) or any(v is None for v in first):
        return None
    values = ", ".join(f"{v:g}" for v in first[:4]) + (", ..." if len(first) > 4 else "")
    return Finding(Flag.CONSTANT_REFERENCE,
                   f"the reference returned the same constant output{'s' if len(first) > 1 else ''} ({values}) on all "
                   f"{len(seen)} checked trials, whatever their inputs: a candidate that only writes "
                   f"{'them' if len(first) > 1 else 'it'} passes, so this verdict says nothing about a kernel")


def _constant_in_float64(comparisons: list[dict[str, Any]]) -> Finding | None:
    """Raised where every checked trial was held to eager's accuracy and, in float64, the reference's outputs are the
    same constants on all of them to within the reference's own rounding (a mean of a normalised tensor: 0): writing
    them passes every check, as for a constant reference."""
    seen = [c.get("float64_constants") for c in comparisons]
    if len(seen) < 2 or any(not s or len(s) != len(seen[0]) for s in seen):
        return None
    for j, (value, _) in enumerate(seen[0]):
        if any(abs(s[j][0] - value) > max(s[j][1], seen[0][j][1]) for s in seen):
            return None
    values = ", ".join(f"{s[0]:.3g}" for s in seen[0][:4]) + (", ..." if len(seen[0]) > 4 else "")
    return Finding(Flag.CONSTANT_REFERENCE,
                   f"in float64 the reference's output is one constant ({values}) on all {len(seen)} checked trials, to "
                   "within its own float32 rounding, whatever their inputs: a candidate that only writes it passes, so "
                   "this verdict says nothing about a kernel")


def _trial(c: dict[str, Any]) -> TrialResult:
    return TrialResult(c["index"], c["label"], bool(c["passed"]), float(c["max_abs_error"]), float(c["max_rel_error"]),
                       float(c["atol"]), float(c["rtol"]), int(c["mismatched"]), int(c["numel"]), str(c.get("note", "")))


def _incorrect_message(trials: list[TrialResult], expected: int) -> str:
    failed = [t for t in trials if not t.passed]
    if not failed:
        return f"the candidate answered {len(trials)} of {expected} checked calls"
    first = failed[0]
    return (f"incorrect on {len(failed)} of {len(trials)} trials; first: trial {first.index} ({first.distribution}) "
            f"max abs error {first.max_abs_error:.3g}, max rel error {first.max_rel_error:.3g} (atol {first.atol:.3g}, "
            f"rtol {first.rtol:.3g}), {first.mismatched} of {first.numel} elements out of tolerance"
            + (f"; {first.note}" if first.note else ""))


def _paired(baseline: list[float], candidate: list[float]) -> tuple[float, list[float]] | tuple[None, None]:
    ratios = [b / c for b, c in zip(baseline, candidate) if c > 0 and b > 0]
    if not ratios:
        return None, None
    median, low, high = median_interval(ratios)
    return median, [low, high]


def _variant(label: str, m: Measured) -> dict[str, Any]:
    """One input variant's figures: the same protocol as the main inputs', on its own shapes (no cached ratio)."""
    best = [min(e, k) for e, k in zip(m.eager, m.compile)] if m.compile else list(m.eager)
    vs_eager, _ = _paired(m.eager, m.candidate)
    vs_compile, _ = _paired(m.compile, m.candidate) if m.compile else (None, None)
    vs_best, best_interval = _paired(best, m.candidate)
    return {"label": label, "candidate_ms": summarize(m.candidate)["median_ms"] if m.candidate else None,
            "eager_ms": summarize(m.eager)["median_ms"] if m.eager else None,
            "compile_ms": summarize(m.compile)["median_ms"] if m.compile else None,
            "speedup_vs_eager": vs_eager, "speedup_vs_compile": vs_compile, "speedup_vs_best": vs_best,
            "interval_vs_best": best_interval, "rounds": m.rounds, "verified_calls": m.verified_calls,
            "converged": m.converged}


def _timing(verdict: Verdict, out: Outcome, m: Measured, compile_cached: dict[str, Any] | None) -> None:
    mismatched = [(label, v) for label, v in [("", m), *out.variants.items()] if v.mismatched_calls]
    if mismatched:
        label, bad = mismatched[0]
        where = f" on {label}'s inputs" if label else ""
        verdict.flags.append(Finding(Flag.TIMED_OUTPUT_MISMATCH,
                                     f"{len(bad.mismatched_calls)} of {bad.verified_calls} timed calls{where} returned outputs "
                                     f"that do not match the reference's for their inputs (first: timed call "
                                     f"{bad.mismatched_calls[0]})"))
    if not m.candidate or not m.eager:
        return
    compile_runs = m.compile
    note = m.compile_error
    if not compile_runs and compile_cached is not None:
        ratio = float(compile_cached["ratio_to_eager"])
        compile_runs = [e * ratio for e in m.eager]
        note = (f"torch.compile's time is eager's in this evaluation times the ratio measured on this host at "
                f"{compile_cached.get('measured_at', 'an earlier evaluation')} ({ratio:.3f})")
    elif compile_runs:
        note = f"torch.compile measured in this evaluation (compiled in {m.compile_seconds:.1f} s)"
    best = [min(e, k) for e, k in zip(m.eager, compile_runs)] if compile_runs else list(m.eager)
    vs_eager, eager_interval = _paired(m.eager, m.candidate)
    vs_compile, compile_interval = _paired(compile_runs, m.candidate) if compile_runs else (None, None)
    vs_best, best_interval = _paired(best, m.candidate)
    cand, eager = summarize(m.candidate), summarize(m.eager)
    events = summarize(m.candidate_events)["median_ms"] if m.candidate_events else None
    verdict.timing = Timing(
        candidate_ms=cand["median_ms"], eager_ms=eager["median_ms"],
        compile_ms=summarize(compile_runs)["median_ms"] if compile_runs else None,
        speedup_vs_eager=vs_eager or 0.0, speedup_vs_compile=vs_compile,
        candidate=Spread(**cand), eager=Spread(**eager), compile=Spread(**summarize(compile_runs)) if compile_runs else None,
        clock="parent", host_candidate_ms=cand["median_ms"], compile_note=note, speedup_vs_best=vs_best,
        interval_vs_eager=eager_interval, interval_vs_compile=compile_interval, interval_vs_best=best_interval,
        rounds=m.rounds, calls_per_batch=dict(m.calls), verified_calls=m.verified_calls, device_events_ms=events,
        null_scale=m.null_scale,
        measured_by=dict(MEASURED_BY), variants=[_variant(label, v) for label, v in out.variants.items()],
        harness=m.harness,
    )
    t = verdict.timing
    if events is not None and t.candidate_ms > 0:
        agreement = events / t.candidate_ms
        t.note = (f"the candidate's own device events say {events:.4f} ms per call ({agreement:.1%} of the parent's "
                  f"figure); the parent's figure stands")
    interval = best_interval or eager_interval
    if interval and not m.converged:
        width = (interval[1] - interval[0]) / (vs_best or vs_eager or 1.0)
        verdict.flags.append(Finding(Flag.NOISY_TIMING, f"after {m.rounds} rounds the speedup's interval "
                                     f"{interval[0]:.2f}x-{interval[1]:.2f}x is still {width:.0%} wide"))
    if m.same_bases:
        verdict.flags.append(Finding(Flag.NOISY_TIMING, "the problem's get_inputs returned the same values twice (does it "
                                     "seed its own generator?), so every timed call had the same inputs and a kernel that "
                                     "kept its last answer would be timed as free: the figure is not a headline. Draw the "
                                     "inputs from torch's default generator"))
    if m.harness_bound:
        verdict.flags.append(Finding(Flag.NOISY_TIMING, f"the calls of {', '.join(sorted(m.harness_bound))} were too short "
                                     "to tell apart from the harness's own share of each batch"))
    if m.contended:
        verdict.flags.append(Finding(Flag.NOISY_TIMING, f"the GPU was busy with other work during {m.contended} "
                                     "of the reference's batches, baselines or the harness's null (a fixed device spin "
                                     "ran slower than usual)"))
    work = out.work
    floor_ms = work.get("flops", 0) / _PEAK_FLOPS * 1000 if verdict.device == "cuda" else 0.0
    if floor_ms and slowest_ms(m) < floor_ms:
        verdict.flags.append(Finding(Flag.BEYOND_ROOFLINE, f"{t.candidate_ms:.4f} ms is below the compute floor of "
                                     f"{floor_ms:.4f} ms ({work.get('flops', 0)} FLOPs at {_PEAK_FLOPS:.0e} FLOP/s, the "
                                     "fastest roof of any current part)"))


def slowest_ms(m: Measured) -> float:
    """The high end of the 90% interval of the candidate's median time per call (ms): what a rejection for speed is
    judged on. A median whose rounds scatter (a call too short to tell from the harness's share of its batch) can fall
    far below what the call takes: an honest NVRTC row sum at the memory roof read 0.0162 ms against a 0.1036 ms floor
    on the H200 and was rejected. A candidate that is beyond the roof in earnest is so in most rounds, and one that
    slows enough rounds to lift this end widens its speedup's interval as much (noisy_timing: no headline, no speed
    reward)."""
    return median_interval(m.candidate)[2] if m.candidate else 0.0


def _speed_of_light(verdict: Verdict, t: Timing, work: dict[str, Any], peaks: dict[str, Any] | None,
                    slowest: float | None = None) -> None:
    """The candidate's time against the least time its work takes at the device's measured peaks; a time so far
    below the memory bound that no kernel could have moved its bytes is rejected (beyond_roofline), judged on
    `slowest` (slowest_ms; the median where none is given).

    The bound that rejects is the memory one only: every correct kernel reads its inputs and writes its outputs
    (`work["bytes"]`, the reference job's count), while the counted FLOPs are the reference's algorithm's and a
    better one may need fewer (a diagonal matmul as a row scaling). What the last-level cache holds may never reach
    memory, so it is taken off first. The margin, SOL_MARGIN (1.5x), covers what the measured copy roof leaves on
    the table (torch's copy reaches ~85-90% of the best streaming kernels on an H100), the timing's spread (a >= 90%
    interval of paired medians) and the harness's share taken off each batch: a time 1.5x under the roof is no
    measurement error."""
    if not peaks or not t.candidate_ms or t.candidate_ms <= 0:
        return
    seconds = t.candidate_ms / 1000
    moved, flops = int(work.get("bytes") or 0), int(work.get("flops") or 0)
    bandwidth = float(peaks.get("copy_bytes_per_s") or 0)
    compute = float(peaks.get("tensor_flops_per_s") or peaks.get("fp32_flops_per_s") or 0)
    t.peaks = {k: v for k, v in peaks.items() if k != "key"}
    t.achieved_bytes_per_s = moved / seconds if moved else None
    t.achieved_flops_per_s = flops / seconds if flops else None
    memory_s = moved / bandwidth if moved and bandwidth else 0.0
    compute_s = flops / compute if flops and compute else 0.0
    if not memory_s and not compute_s:
        return
    t.sol_bound = "memory" if memory_s >= compute_s else "compute"
    t.sol_ms = max(memory_s, compute_s) * 1000
    t.sol_fraction = t.sol_ms / t.candidate_ms
    cache = int(peaks.get("cache_bytes") or 0)
    if not bandwidth or not cache or moved <= cache:
        return  # the whole working set could sit in a cache (or its size is unknown): no bound holds for memory
    floor_ms = (moved - cache) / bandwidth * 1000
    slowest = max(slowest or 0.0, t.candidate_ms)
    if slowest * SOL_MARGIN < floor_ms:
        at_most = f" (at most {slowest:.4f} ms at the high end of its interval)" if slowest > t.candidate_ms else ""
        verdict.flags.append(Finding(Flag.BEYOND_ROOFLINE, (
            f"{t.candidate_ms:.4f} ms{at_most} is more than {SOL_MARGIN:g}x below the speed of light: any correct kernel moves "
            f"{moved} bytes, of which a {cache}-byte cache can hold at most its size, and the rest takes {floor_ms:.4f} ms "
            f"at the device's measured copy bandwidth ({bandwidth / 1e9:.1f} GB/s)")))


def _accepted_message(verdict: Verdict) -> str:
    if verdict.timing is None:
        return f"correct on all {len(verdict.trials)} trials (not timed)"
    t = verdict.timing
    text = f"correct on all {len(verdict.trials)} trials; {t.candidate_ms:.4f} ms, {t.speedup_vs_eager:.2f}x vs eager"
    if t.speedup_vs_compile is not None:
        text += f", {t.speedup_vs_compile:.2f}x vs torch.compile"
    if t.interval_vs_best:
        text += f" (best of both: {t.speedup_vs_best:.2f}x, interval {t.interval_vs_best[0]:.2f}-{t.interval_vs_best[1]:.2f}x)"
    for v in t.variants:
        if v["candidate_ms"] is not None:
            text += f"; {v['label']}: {v['candidate_ms']:.4f} ms, {v['speedup_vs_best'] or 0.0:.2f}x vs the best baseline"
    return text

