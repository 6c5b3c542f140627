"""The evaluator: validate, build, run the reference, run the candidate, judge. Trusted code only:
user modules are parsed here, never imported; everything that imports them runs in the sandbox."""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from agent import validation
from agent.validation import ProblemNames
from agent.build.cache import default_cache_root
from agent.evaluate import handoff
from agent.evaluate.file_pool import FilePool
from agent.evaluate.codec import DecodeError, read_result
from agent.evaluate.config import EvalConfig
from agent.evaluate.plan import TrialPlan
from agent.sandbox import Job, JobResult, Limits, Sandbox
from agent.verdict import (REJECTING_FLAGS, TIMING_FLAGS, BuildInfo, Finding, Flag, Spread, Stage, Status, Timing, TrialResult,
                           Verdict, cap_log)

# Host clock over device events beyond this (plus launch overheads) means unseen device work.
_CLOCK_RATIO = 1.5
_CLOCK_SLACK_MS = 0.05
# The fastest imaginable compute roof (dense FP8 tensor cores of current parts, with margin).
_PEAK_FLOPS = 4e15


class ProblemError(ValueError):
    """The problem itself is invalid or fails: the user must fix the problem, not the candidate."""


class Evaluator:
    """Holds a warm sandbox; evaluate() may be called many times (the agent's hot path)."""

    def __init__(self, config: EvalConfig | None = None, cache_root: Path | None = None,
                 sandbox: Sandbox | None = None, reference_sandbox: Sandbox | None = None) -> None:
        self.config = config or EvalConfig()
        self.cache_root = Path(cache_root) if cache_root else default_cache_root()
        self.cache_root.mkdir(parents=True, exist_ok=True)
        self.sandbox = sandbox or Sandbox(preload=_preload(self.config), env=self._sandbox_env())
        # The reference's jobs get a zygote of their own: they run beside the candidate's (handoff.py), and each
        # sandbox runs one job at a time.
        self.reference_sandbox = reference_sandbox or Sandbox(preload=(*_preload(self.config), "agent.evaluate.reference_job"),
                                                              env=self._sandbox_env())
        self.output_files = FilePool()
        self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kstudio-reference")

    def _sandbox_env(self) -> dict[str, str]:
        return {**os.environ, **self._job_env()}

    def _job_env(self) -> dict[str, str]:
        """The caches every job shares; a user's own inductor or Triton cache directory wins."""
        return {"KSTUDIO_CACHE_DIR": str(self.cache_root),
                "TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR", str(self.cache_root / "inductor")),
                "TRITON_CACHE_DIR": os.environ.get("TRITON_CACHE_DIR", str(self.cache_root / "triton"))}

    def __enter__(self) -> Evaluator:
        starting = self._beside.submit(self.reference_sandbox.start)  # both zygotes import torch at once
        self.sandbox.start()
        starting.result()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._beside.shutdown(wait=True)
        self.sandbox.close()
        self.reference_sandbox.close()
        self.output_files.close()

    # ------------------------------------------------------------------------------------ stages

    def build(self, candidate_source: str, config: EvalConfig | None = None,
              backend_hint: str | None = None) -> tuple[BuildInfo, dict[str, Any]]:
        """Compile every extension the candidate asks for into the shared cache (no GPU needed)."""
        cfg = config or self.config
        if cfg.backend is None and backend_hint is None:
            backend_hint = validation.validate_candidate(candidate_source).backend_hint
        backend = cfg.backend or backend_hint or _default_backend(cfg)
        started = time.monotonic()
        # A candidate built before with this toolchain needs no build job: its extensions are cached.
        record_path = self.cache_root / "candidates" / f"{_candidate_key(candidate_source, cfg)}.json"
        try:
            header = json.loads(record_path.read_text())
            info = BuildInfo(backend=backend, seconds=time.monotonic() - started, cache_hits=len(header.get("records", [])),
                             fast_path="candidate-cache", log="")
            return info, header
        except (OSError, ValueError):
            pass
        job = Job("agent.evaluate.jobs:build", {
            "candidate_source": candidate_source, "cache_root": str(self.cache_root),
            "cuda_arch": _cuda_arch(), "loadable": cfg.device == "cpu",
        }, device="cpu", limits=Limits(wall_seconds=cfg.build_seconds, cpu_seconds=int(cfg.build_seconds * 16)),
            env=self._job_env())
        out = self.sandbox.run(job)
        info = BuildInfo(backend=backend, seconds=time.monotonic() - started)
        if not out.ok:
            header = {"ok": False, "error": _describe_failure(out, "building the candidate")}
        else:
            header, _ = read_result(out.result)
        records = header.get("records", [])
        if header.get("ok") and not header.get("import_error") and all(r.get("linked", True) for r in records):
            _write_json(record_path, {"ok": True, "records": [dict(r, log="", cache_hit=True) for r in records]})
        info.cache_hits = sum(1 for r in records if r["cache_hit"])
        info.cache_misses = sum(1 for r in records if not r["cache_hit"])
        info.fast_path = ",".join(sorted({r["fast_path"] for r in records if r["fast_path"]}))
        info.log = cap_log("\n".join(filter(None, [header.get("log", ""), *(r["log"] for r in records),
                                                    out.stdout, out.stderr])))
        return info, header

    def evaluate(self, problem_source: str, candidate_source: str, config: EvalConfig | None = None,
                 names: ProblemNames | None = None) -> Verdict:
        cfg = config or self.config
        names = names or ProblemNames()
        seconds: dict[str, float] = {}
        started = time.monotonic()
        problem_report = validation.validate_problem(problem_source, names=names)
        if not problem_report.ok:
            raise ProblemError("the problem is invalid: " + "; ".join(_issue_text(i) for i in problem_report.errors()))
        report = validation.validate_candidate(candidate_source, problem_source=problem_source, problem_names=names)
        if not report.ok:
            return Verdict(Status.BUILD_ERROR, Stage.VALIDATE, "; ".join(_issue_text(i) for i in report.errors()),
                           device=cfg.device)

        plan = _plan(cfg, cfg.seed if cfg.seed is not None else secrets.randbits(62), names)
        with self.output_files.lend(cfg.limits.memory_bytes) as outputs, _Beside(self, problem_source, cfg, plan, outputs) as beside:
            # With overlap_reference the reference's job is already setting up, beside the build.
            build, build_header = self.build(candidate_source, cfg, report.backend_hint)
            seconds["build"] = time.monotonic() - started
            if not build_header.get("ok", False):
                return Verdict(Status.BUILD_ERROR, Stage.BUILD, build_header.get("error", "the build failed"),
                               build=build, device=cfg.device, seconds=seconds)
            t0 = candidate_sent = time.monotonic()
            out = self._candidate(problem_source, candidate_source, cfg, plan, outputs, beside.candidate_fds())
            seconds["candidate"] = time.monotonic() - t0
            header = self._candidate_header(out)
            finished = header.get("stage") == "done" and "status" not in header and out.ok
            t0 = time.monotonic()
            # The reference runs even when the candidate failed: a failure of the problem itself is
            # the user's to fix, and must not be blamed on the candidate.
            ref_header = beside.reference(header.get("outputs") if finished else None)
            seconds["reference.after_candidate"] = time.monotonic() - t0
            seconds.update(beside.seconds)
        verdict = self._judge(out, header, cfg, ref_header, build)
        if cfg.profile and verdict.stage is Stage.DONE:
            t0 = time.monotonic()
            verdict.profile = self._profile(problem_source, candidate_source, cfg, plan) or verdict.profile
            seconds["profile"] = time.monotonic() - t0
        # Where the time went, per job phase: the engine's own speed is part of every verdict.
        for job, job_header in (("candidate", header), ("reference", ref_header)):
            for phase, spent in job_header.get("phase_seconds", {}).items():
                seconds[f"{job}.{phase}"] = spent
        _lifecycle(seconds, header, sent=candidate_sent, returned=candidate_sent + seconds["candidate"])
        seconds["candidate.process"] = out.seconds
        verdict.seconds = {**seconds, "total": time.monotonic() - started}
        return verdict

    def check_problem(self, problem_source: str, names: ProblemNames | None = None, seconds: float = 60.0) -> dict[str, Any]:
        """Import and run a problem once in the sandbox (no candidate, no timing): what an upload form
        needs to know before accepting it. Returns its output shapes and hardware facts; raises
        ProblemError with the reason when it is invalid, crashes, hangs or fails."""
        names = names or ProblemNames()
        report = validation.validate_problem(problem_source, names=names)
        if not report.ok:
            raise ProblemError("the problem is invalid: " + "; ".join(_issue_text(i) for i in report.errors()))
        cfg = dataclasses.replace(self.config, timing=False, trials=1, distributions=())
        plan = _plan(cfg, secrets.randbits(62), names)
        return self._reference(problem_source, cfg, plan, None, None,
                               limits=dataclasses.replace(cfg.reference_limits, wall_seconds=seconds,
                                                          cpu_seconds=max(1, int(seconds * 4))))

    def trace_problem(self, problem_source: str, seconds: float = 120.0) -> dict[str, Any]:
        """The problem's torch.fx graph with shapes, traced in the sandbox on meta tensors (nothing is
        allocated or computed; see agent/builtin/trace.py). Raises ProblemError when the module does not
        import or build; a graph torch.fx cannot trace comes back as {"error": reason}."""
        # Traced with the device the candidates will run on visible: a problem that sizes itself by
        # torch.cuda.is_available() (as KernelBench's and our examples do) must be traced at the sizes it is
        # evaluated at. Meta tensors only, so the GPU is never touched.
        out = self.sandbox.run(Job("agent.builtin.trace:trace", {"problem_source": problem_source},
                                   device=self.config.device,
                                   limits=dataclasses.replace(self.config.reference_limits, wall_seconds=seconds,
                                                              cpu_seconds=max(1, int(seconds * 4))),
                                   env=self._job_env()))
        if not out.ok:
            raise ProblemError(f"the problem could not be traced: {_describe_failure(out, 'tracing the problem')}")
        return json.loads(out.result)

    def _candidate_header(self, out: JobResult) -> dict[str, Any]:
        if not out.result:
            return {}
        try:
            header, _ = read_result(out.result)
        except DecodeError as exc:
            return {"status": "runtime_error", "error": str(exc)}
        return header

    def _reference(self, problem_source: str, cfg: EvalConfig, plan: TrialPlan, outputs: int | None,
                   layout: list[dict[str, Any]] | None, limits: Limits | None = None,
                   handoff_fds: tuple[int, ...] = ()) -> dict[str, Any]:
        """The reference's job. With `handoff_fds` it runs beside the candidate's and gets the layout from the
        parent later (handoff.py); it then times the baselines only if that layout comes."""
        baseline_key = self._baseline_key(problem_source, cfg)
        timing = cfg.timing and (layout is not None or bool(handoff_fds))  # no baselines for an untimed candidate
        cached = self._cached_compile(baseline_key) if timing and cfg.compile_baseline else None
        payload = {
            "problem_source": problem_source, "device": cfg.device, "plan": plan.to_payload(),
            "candidate_outputs": layout, "time_baselines": timing, "rtol": cfg.rtol, "atol_scale": cfg.atol_scale,
            "compile_baseline": timing and cfg.compile_baseline and cached is None,
        }
        fds = (outputs, *handoff_fds) if outputs is not None else ()
        # Detached: the turn goes on once the result is whole, while the job's CUDA context is torn down.
        out = self.reference_sandbox.run(Job("agent.evaluate.reference_job:reference", payload, device=cfg.device,
                                             limits=limits or cfg.reference_limits, env=self._job_env(), fds=fds,
                                             detach=True))
        if not out.ok:
            raise ProblemError(f"the reference problem failed: {_describe_failure(out, 'running the reference')}")
        header, _ = read_result(out.result)
        if cached is not None and "eager" in header:
            header["compile"] = cached
            header["compile_cached"] = True
        elif "compile" in header and "error" not in header["compile"]:
            self._store_compile(baseline_key, header["compile"])
        return header

    def _candidate(self, problem_source: str, candidate_source: str, cfg: EvalConfig, plan: TrialPlan,
                   outputs: int, handoff_fds: tuple[int, ...]) -> JobResult:
        payload = {
            "problem_source": problem_source, "candidate_source": candidate_source, "device": cfg.device,
            "plan": plan.to_payload(), "allowed_ops": sorted(cfg.allowed_compute_ops()), "profile": cfg.profile,
            "cache_root": str(self.cache_root), "cuda_arch": _cuda_arch(), "gate_seconds": cfg.gate_seconds,
        }
        return self.sandbox.run(Job("agent.evaluate.jobs:candidate", payload, device=cfg.device, limits=cfg.limits,
                                    env=self._job_env(), fds=(outputs, *handoff_fds)))

    def _profile(self, problem_source: str, candidate_source: str, cfg: EvalConfig, plan: TrialPlan) -> dict[str, Any] | None:
        """An ncu summary where ncu exists on a GPU host; otherwise the candidate job's torch.profiler one."""
        from agent.profiling import ncu_available

        if cfg.device != "cuda" or not ncu_available():
            return None
        payload = {"problem_source": problem_source, "candidate_source": candidate_source, "plan": plan.to_payload(),
                   "cache_root": str(self.cache_root), "cuda_arch": _cuda_arch()}
        out = self.sandbox.run(Job("agent.evaluate.jobs:ncu_profile", payload, device="cuda",
                                   limits=Limits(wall_seconds=300), env=self._job_env()))
        if not out.ok:
            return {"tool": "ncu", "kernels": [], "error": _describe_failure(out, "profiling with ncu")}
        header, _ = read_result(out.result)
        return header["profile"]

    # ------------------------------------------------------------------------------------ judging

    def _judge(self, out: JobResult, header: dict[str, Any], cfg: EvalConfig, ref_header: dict[str, Any],
               build: BuildInfo) -> Verdict:
        verdict = Verdict(Status.RUNTIME_ERROR, Stage.LOAD, "", build=build, device=cfg.device,
                          stdout=out.stdout, stderr=out.stderr, hardware=ref_header.get("hardware", {}),
                          toolchain=ref_header.get("toolchain", {}))
        verdict.toolchain["isolation"] = out.isolation
        if out.killed == "wall_time":
            verdict.status, verdict.message = Status.TIMEOUT, f"the candidate ran past the {cfg.limits.wall_seconds:g} s wall-clock limit and was killed"
            return verdict
        if not header or header.get("stage") == "problem" and header.get("status") != "problem_error":
            verdict.message = header.get("error") or _describe_failure(out, "running the candidate")
            return verdict
        if header.get("status") == "problem_error":
            # The reference ran the same problem code fine in its own process: the candidate's process broke it.
            verdict.message = "setting up the problem failed in the candidate's process: " + header.get("error", "")
            return verdict
        verdict.stage = Stage(header.get("stage", "load"))
        verdict.profile = header.get("profile")
        verdict.weights = header.get("weights", "")
        for record in header.get("build_records", []):
            build.cache_hits += record["cache_hit"]
        if header.get("status") == "build_error":
            verdict.status, verdict.stage = Status.BUILD_ERROR, Stage.BUILD
            verdict.message = header.get("error", "the candidate's extension failed to build")
            build.log = cap_log(header.get("log", "") + "\n" + build.log)
            return verdict
        flags = [Finding(Flag(f["flag"]), f["detail"]) for f in header.get("flags", [])]
        if header.get("tampered"):
            if not any(f.flag is Flag.TIMER_TAMPERING for f in flags):
                flags.append(Finding(Flag.TIMER_TAMPERING, "replaced " + ", ".join(header["tampered"])))
        verdict.flags = flags
        if header.get("status") == "runtime_error" or not out.ok or header.get("stage") != "done":
            verdict.status = Status.REJECTED if _rejecting(flags) else Status.RUNTIME_ERROR
            verdict.message = header.get("error") or _describe_failure(out, "running the candidate")
            verdict.message = cap_log(verdict.message, 6000)
            return verdict

        verdict.trials = _trials(ref_header)
        verdict.correct = bool(verdict.trials) and all(t.passed for t in verdict.trials)
        if cfg.timing and "timing" in header:
            self._timing(verdict, header, ref_header, cfg)
        verdict.stage = Stage.DONE
        # A wrong answer is "incorrect"; "rejected" is for behaviour that games the evaluation. What the
        # timing revealed only matters when the checked outputs were right.
        behaviour = [f for f in verdict.flags
                     if f.flag in REJECTING_FLAGS and (verdict.correct or f.flag.value not in TIMING_FLAGS)]
        if behaviour:
            verdict.status = Status.REJECTED
            verdict.message = "rejected: " + "; ".join(f"{f.flag.value}: {f.detail}" for f in behaviour)
        elif not verdict.correct:
            verdict.status = Status.INCORRECT
            failed = [t for t in verdict.trials if not t.passed]
            first = failed[0]
            verdict.message = (f"incorrect on {len(failed)} of {len(verdict.trials)} trials; first: trial {first.index} "
                               f"({first.distribution}) max abs error {first.max_abs_error:.3g}, max rel error "
                               f"{first.max_rel_error:.3g} (atol {first.atol:.3g}, rtol {first.rtol:.3g}), "
                               f"{first.mismatched} of {first.numel} elements out of tolerance" + (f"; {first.note}" if first.note else ""))
        else:
            verdict.status = Status.ACCEPTED
            verdict.message = _accepted_message(verdict)
        return verdict

    def _timing(self, verdict: Verdict, header: dict[str, Any], ref_header: dict[str, Any], cfg: EvalConfig) -> None:
        cand = header["timing"]
        # The last timed calls' outputs, checked by the reference's job for the values those calls saw.
        if not ref_header.get("timed_outputs_match", False):
            verdict.flags.append(Finding(Flag.TIMED_OUTPUT_MISMATCH,
                                         "outputs of the timed calls (inputs rotated, values changed between calls) do not match "
                                         "the reference: results depend on something other than the inputs' values"))
        eager = ref_header.get("eager")
        compiled = ref_header.get("compile")
        if not eager:
            return
        cand_ms = cand["device"]["median_ms"]
        eager_ms = eager["device"]["median_ms"]
        compile_ok = compiled is not None and "error" not in compiled
        compile_ms = compiled["device"]["median_ms"] if compile_ok else None
        note = ""
        if compiled is not None and not compile_ok:
            note = compiled["error"]
        elif ref_header.get("compile_cached"):
            note = f"torch.compile baseline reused from {compiled.get('measured_at', 'an earlier evaluation')} on this host"
        elif compiled is not None:
            note = f"torch.compile measured in this evaluation (compiled in {compiled.get('compile_seconds', 0):.1f} s)"
        verdict.timing = Timing(
            candidate_ms=cand_ms, eager_ms=eager_ms, compile_ms=compile_ms,
            speedup_vs_eager=eager_ms / cand_ms if cand_ms > 0 else float("inf"),
            speedup_vs_compile=(compile_ms / cand_ms if cand_ms > 0 else float("inf")) if compile_ms else None,
            candidate=Spread(**cand["device"]), eager=Spread(**eager["device"]),
            compile=Spread(**compiled["device"]) if compile_ok else None,
            clock="cuda_events+host" if cfg.device == "cuda" else "host",
            host_candidate_ms=cand["host"]["median_ms"], compile_note=note,
        )
        if cfg.device == "cuda":
            host_ms = cand["host"]["median_ms"]
            if host_ms > _CLOCK_RATIO * cand_ms + _CLOCK_SLACK_MS:
                verdict.flags.append(Finding(Flag.CLOCKS_DISAGREE,
                                             f"device events measured {cand_ms:.4f} ms but the synchronized host clock "
                                             f"{host_ms:.4f} ms: work ran outside the timed stream"))
            work = ref_header.get("work", {})
            floor_ms = 0.0
            if work.get("copy_bytes_per_s"):
                floor_ms = max(floor_ms, work["bytes"] / (1.25 * work["copy_bytes_per_s"]) * 1000)
            floor_ms = max(floor_ms, work.get("flops", 0) / _PEAK_FLOPS * 1000)
            if floor_ms and cand_ms < floor_ms:
                verdict.flags.append(Finding(Flag.BEYOND_ROOFLINE,
                                             f"{cand_ms:.4f} ms is below the roofline floor of {floor_ms:.4f} ms "
                                             f"({work['bytes']} bytes, {work.get('flops', 0)} FLOPs)"))
        gate = header.get("gate") or {}
        if gate.get("timed_out"):
            verdict.flags.append(Finding(Flag.NOISY_TIMING, f"timed while the reference's job may still have used the "
                                         f"device: it had not left it after {gate.get('waited_seconds', 0):.0f} s"))
        if verdict.timing.candidate.relative_iqr > 0.25:
            verdict.flags.append(Finding(Flag.NOISY_TIMING, f"p10-p90 spread is {verdict.timing.candidate.relative_iqr:.0%} of the median"))

    # ------------------------------------------------------------------------------------ baselines

    def _baseline_key(self, problem_source: str, cfg: EvalConfig) -> str:
        facts = {"problem": problem_source, "device": cfg.device, "host": socket.gethostname(),
                 "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "torch": torch.__version__,
                 "iterations": cfg.iterations, "rotate": cfg.rotate, "warmup_ms": cfg.warmup_ms}
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()

    def _cached_compile(self, key: str) -> dict[str, Any] | None:
        path = self.cache_root / "baselines" / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def _store_compile(self, key: str, compiled: dict[str, Any]) -> None:
        record = dict(compiled, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        _write_json(self.cache_root / "baselines" / f"{key}.json", record)


class _Beside:
    """The reference's job of one evaluation: started beside the build and the candidate's job when the config
    says so (handoff.py), else run after the candidate's, as before. Either way reference() gives its header."""

    def __init__(self, evaluator: Evaluator, problem_source: str, cfg: EvalConfig, plan: TrialPlan, outputs: int) -> None:
        self.evaluator, self.problem_source, self.cfg, self.plan, self.outputs = evaluator, problem_source, cfg, plan, outputs
        self.pipes = handoff.Pipes() if cfg.overlap_reference else None
        self.future: Future[dict[str, Any]] | None = None
        self.told = False
        self.seconds: dict[str, float] = {}

    def __enter__(self) -> _Beside:
        if self.pipes is not None:
            self.started = time.monotonic()
            self.future = self.evaluator._beside.submit(self._run, self.pipes)
        return self

    def _run(self, pipes: handoff.Pipes) -> dict[str, Any]:
        try:
            return self.evaluator._reference(self.problem_source, self.cfg, self.plan, self.outputs, None,
                                             handoff_fds=pipes.reference_fds())
        finally:
            pipes.open_gate()  # a reference that ended early must not keep the candidate waiting

    def candidate_fds(self) -> tuple[int, ...]:
        return self.pipes.candidate_fds() if self.pipes is not None else ()

    def reference(self, layout: list[dict[str, Any]] | None) -> dict[str, Any]:
        if self.pipes is None or self.future is None:
            started = time.monotonic()
            header = self.evaluator._reference(self.problem_source, self.cfg, self.plan, self.outputs, layout)
            self.seconds["reference"] = time.monotonic() - started
            return header
        self.pipes.send_control(layout)
        self.told = True
        try:
            header = self.future.result()
        except ProblemError:
            if layout is not None:
                raise
            # The candidate failed, and so did the reference beside it: a candidate that faulted the device or
            # ate its memory may have taken the reference down with it. Alone, the problem decides.
            header = self.evaluator._reference(self.problem_source, self.cfg, self.plan, None, None)
        self.seconds["reference"] = time.monotonic() - self.started
        return header

    def __exit__(self, *exc: object) -> None:
        if self.pipes is None or self.future is None:
            return
        if not self.told:
            self.pipes.send_control(None)  # no candidate ran (its build failed): the reference ends untimed
        try:
            self.future.result()
        except Exception:  # noqa: BLE001 - only the evaluation's own outcome matters once it is decided
            pass
        finally:
            self.pipes.close()


def evaluate(problem_source: str, candidate_source: str, config: EvalConfig | None = None, **kwargs: Any) -> Verdict:
    """One-shot evaluation (a fresh sandbox). For many evaluations keep an Evaluator."""
    with Evaluator(config, **kwargs) as evaluator:
        return evaluator.evaluate(problem_source, candidate_source)


def _write_json(path: Path, record: dict[str, Any]) -> None:
    """Write then rename: concurrent workers never read half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def _preload(cfg: EvalConfig) -> tuple[str, ...]:
    """Modules the zygote imports once so that no child pays for them (triton costs ~1 s, and ~0.5 s more on
    a candidate's first Triton call: warm_triton.py)."""
    modules = ["agent.evaluate.jobs", "agent.evaluate.warm"]
    if cfg.device == "cuda" and importlib.util.find_spec("triton") is not None:
        modules.append("agent.evaluate.warm_triton")
    return tuple(modules)


def _plan(cfg: EvalConfig, seed: int, names: ProblemNames) -> TrialPlan:
    return TrialPlan(seed=seed, trials=cfg.trials, distributions=tuple(cfg.distributions), timing=cfg.timing,
                     iterations=cfg.iterations, rotate=cfg.rotate, warmup_ms=cfg.warmup_ms,
                     names=dataclasses.asdict(names))


def _default_backend(cfg: EvalConfig) -> str:
    return "cpp" if cfg.device == "cpu" else "cuda"


def _candidate_key(source: str, cfg: EvalConfig) -> str:
    from agent.build.toolchain import detect_toolchain

    facts = [source, cfg.device, detect_toolchain(_cuda_arch()).fingerprint()]
    return hashlib.sha256("\0".join(facts).encode()).hexdigest()


def _cuda_arch() -> str:
    return os.environ.get("KSTUDIO_CUDA_ARCH", "9.0")


def _trials(ref_header: dict[str, Any]) -> list[TrialResult]:
    """One result per checked call; a call the reference found no comparison for has failed."""
    results = []
    comparisons = {c.get("index"): c for c in ref_header.get("comparisons", [])}
    for index, label in enumerate(ref_header.get("labels", [])):
        if index in comparisons:
            c = comparisons[index]
            results.append(TrialResult(index, label, c["passed"], c["max_abs_error"], c["max_rel_error"], c["atol"],
                                       c["rtol"], c["mismatched"], c["numel"], c["note"]))
        else:
            results.append(TrialResult(index, label, False, float("inf"), float("inf"), 0.0, 0.0, 0, 0,
                                       "no output was compared for this call"))
    return results


def _lifecycle(seconds: dict[str, float], header: dict[str, Any], sent: float, returned: float) -> None:
    """The candidate's job's start-up (fork, namespaces, imports) and its exit (CUDA teardown, reaping, the
    result's trip back), from its own stamps on the host's monotonic clock against the parent's send and receive.
    (The reference's job returns at its result, before its exit: handoff.py.)"""
    began, ended = header.get("began_at"), header.get("ended_at")
    if not isinstance(began, float) or not isinstance(ended, float):
        return  # a job that died early, or one whose header was written by candidate code, has no say here
    if sent <= began <= ended <= returned:
        seconds["candidate.startup"] = began - sent
        seconds["candidate.exit"] = returned - ended


def _rejecting(flags: list[Finding]) -> bool:
    return any(f.flag in REJECTING_FLAGS for f in flags)


def _issue_text(issue: Any) -> str:
    where = f"line {issue.line}: " if getattr(issue, "line", None) else ""
    return where + issue.message


def _describe_failure(out: JobResult, what: str) -> str:
    if out.killed == "memory":
        return f"{what} exceeded the memory limit and was killed"
    if out.killed == "processes":
        return f"{what} started too many processes and was killed"
    if out.killed == "wall_time":
        return f"{what} ran past its wall-clock limit and was killed"
    if out.signal:
        name = signal.Signals(out.signal).name
        return f"{what} crashed: killed by {name}" + (f"\n{out.stderr[-2000:]}" if out.stderr.strip() else "")
    tail = out.stderr.strip()[-3000:]
    return f"{what} exited with code {out.exit_code}" + (f":\n{tail}" if tail else " and printed nothing")


def _accepted_message(verdict: Verdict) -> str:
    if verdict.timing is None:
        return f"correct on all {len(verdict.trials)} trials (not timed)"
    t = verdict.timing
    text = f"correct on all {len(verdict.trials)} trials; {t.candidate_ms:.4f} ms, {t.speedup_vs_eager:.2f}x vs eager"
    if t.speedup_vs_compile is not None:
        text += f", {t.speedup_vs_compile:.2f}x vs torch.compile"
    return text
