"""The evaluator: validate, build, drive the reference's and the candidate's jobs (session.py), judge
(judge.py). Trusted code only: user modules are parsed here, never imported; everything that imports them
runs in the sandbox."""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import platform
import secrets
import shutil
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import torch

from agent.engine import validation
from agent.engine.validation import ProblemNames
from agent.engine.build.cache import ArtifactError, BuildCache, CacheIntegrityError, default_cache_root
from agent.engine.build.inline import inline_key, module_name_for
from agent.engine.build.native_calls import native_calls
from agent.engine.build.spec import InlineExtension
from agent.engine.build.toolchain import detect_toolchain
import agent.engine.evaluate.aten_watch as aten_watch
import agent.engine.evaluate.kernel_census as kernel_census
from agent.engine.evaluate.file_pool import FilePool
from agent.engine.evaluate.codec import read_result
from agent.engine.evaluate.config import ANY_OP, EvalConfig
import agent.engine.evaluate.guards as guards
from agent.engine.evaluate.judge import PROTOCOL, judge
import agent.engine.evaluate.memory as memory
from agent.engine.memory_text import ran_out_of_memory, size_text
from agent.engine.evaluate.peaks import PEAKS_PROTOCOL
from agent.engine.evaluate.plan import TrialPlan
from agent.engine.evaluate.progress import SILENT, Progress, Watcher
from agent.engine.evaluate.session import ProblemFailed, Session, check_reference, describe_failure, keeps_compile_baseline
from agent.engine.sandbox import Job, Limits, Sandbox
from agent.engine.sandbox.client import SandboxLost
from agent.engine.verdict import BuildInfo, Flag, Stage, Status, Verdict, cap_log

# Part of every compile baseline's key: the timing protocol that measured it (judge.PROTOCOL) and this.
BASELINE_PROTOCOL = "3"
# Discovery jobs per build (see Evaluator.build), and extensions one candidate may ask for.
_BUILD_ROUNDS = 3
# The measured roofs (peaks.py) a re-measurement may only raise; the cache size is a fact, taken as measured.
_ROOFS = ("copy_bytes_per_s", "fp32_flops_per_s", "tensor_flops_per_s")
_MAX_EXTENSIONS = 16
# Compiler caches each job keeps in its private /tmp (never shared between jobs): see Evaluator._job_env.
_JOB_PRIVATE_CACHES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR")


class ProblemError(ValueError):
    """The problem itself is invalid or fails: the user must fix the problem, not the candidate."""


class ProblemTooBig(ProblemError):
    """The problem's traced footprint does not fit the process that would run it: `footprint` describes it,
    `needed` and `limit` are bytes."""

    def __init__(self, message: str, footprint: str, needed: int, limit: int) -> None:
        super().__init__(message)
        self.footprint, self.needed, self.limit = footprint, needed, limit


class Evaluator:
    """Holds a warm sandbox; evaluate() may be called many times (the agent's hot path)."""

    def __init__(self, config: EvalConfig | None = None, cache_root: Path | None = None,
                 sandbox: Sandbox | None = None, reference_sandbox: Sandbox | None = None,
                 trusted_root: Path | None = None) -> None:
        self.config = config or EvalConfig()
        # Shared caches (docs/threat-model.md, "Caches"): `cache_root` is visible to every job READ-ONLY and
        # written here only (BuildCache.install); `trusted_root` (compile baselines, candidate records) is never
        # visible to a job; `job_root` holds each build job's private output directory, this evaluator's own.
        self.cache_root = Path(cache_root) if cache_root else default_cache_root()
        self.cache_root.mkdir(parents=True, exist_ok=True)
        self.trusted_root = Path(trusted_root) if trusted_root else self.cache_root.with_name(self.cache_root.name + ".trusted")
        self.trusted_root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.job_root = Path(tempfile.mkdtemp(prefix="kstudio-jobs-"))
        self.build_cache = BuildCache(self.cache_root)
        self.sandbox = sandbox or Sandbox(preload=_preload(self.config), env=self._sandbox_env())
        # The reference's jobs get a zygote of their own: they run beside the candidate's (session.py), and each
        # sandbox runs one job at a time.
        self.reference_sandbox = reference_sandbox or Sandbox(preload=(*_preload(self.config), "agent.engine.evaluate.reference_job"),
                                                              env=self._sandbox_env())
        self.output_files = FilePool()
        self._footprints: dict[str, dict[str, Any]] = {}  # problem key -> the footprint job's answer
        self._aten_watch: dict[str, str] | None = None  # the ATen observer's binary (aten_watch.built), once
        self._census_binary: dict[str, str] | None = None  # the kernel census's ({} where it cannot be built), once
        self._beside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kstudio-reference")

    def _sandbox_env(self) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if k not in _JOB_PRIVATE_CACHES}
        return {**inherited, **self._job_env(), "KSTUDIO_JOB_ROOT": str(self.job_root),
                "KSTUDIO_TRUSTED_DIR": str(self.trusted_root)}

    def _job_env(self, cfg: EvalConfig | None = None) -> dict[str, str]:
        """The build cache every job reads (read-only), and the CPU thread count an evaluation's jobs all use
        (OpenMP in a C++ extension as much as torch's own). The inductor and Triton caches are not shared: with
        TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR unset (_sandbox_env drops a user's), torch and Triton keep
        them under the job's private /tmp, gone with the job; a shared one would let a job leave compiled code
        for another job, the reference's included, to run."""
        threads = {"OMP_NUM_THREADS": str(cfg.threads), "MKL_NUM_THREADS": str(cfg.threads)} if cfg and cfg.threads else {}
        return {**threads, "KSTUDIO_CACHE_DIR": str(self.cache_root)}

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
        shutil.rmtree(self.job_root, ignore_errors=True)

    # ------------------------------------------------------------------------------------ stages

    def build(self, candidate_source: str, config: EvalConfig | None = None,
              backend_hint: str | None = None) -> tuple[BuildInfo, dict[str, Any]]:
        """Compile every extension the candidate asks for into the shared cache (no GPU needed).

        Only this (trusted) process writes the cache. A sandboxed discovery job imports the candidate and reports
        the requests it makes, as data (agent/engine/build/job.py); each request not yet cached is compiled by a job of
        its own that runs our code only, into a private directory; this process checks what it left there, keys
        it by the request it sent and installs it with its sha256 (BuildCache.install). The discovery runs again
        when its import failed on a stand-in for what was not built yet (at most _BUILD_ROUNDS times)."""
        cfg = config or self.config
        if cfg.backend is None and backend_hint is None:
            backend_hint = validation.validate_candidate(candidate_source).backend_hint
        backend = cfg.backend or backend_hint or _default_backend(cfg)
        started = time.monotonic()
        toolchain = detect_toolchain(_cuda_arch())
        # A candidate built before with this toolchain needs no build job: its extensions are cached, and checked.
        record_path = self.trusted_root / "candidates" / f"{_candidate_key(candidate_source, cfg)}.json"
        cached = self._cached_candidate(record_path)
        if cached is not None:
            info = BuildInfo(backend=backend, seconds=time.monotonic() - started, cache_hits=len(cached["records"]),
                             fast_path="candidate-cache", log="", artifacts=dict(cached.get("artifacts", {})))
            return info, cached
        logs: list[str] = []
        installed: dict[str, dict[str, Any]] = {}  # key -> this process's record of what it installed
        header: dict[str, Any] = {}
        for _ in range(_BUILD_ROUNDS):
            job = Job("agent.engine.build.job:discover", {
                "candidate_source": candidate_source, "cache_root": str(self.cache_root),
                "cuda_arch": _cuda_arch(), "loadable": cfg.device == "cpu",
            }, device="cpu", limits=Limits(wall_seconds=cfg.build_seconds, cpu_seconds=int(cfg.build_seconds * 16)),
                env=self._job_env())
            try:
                out = self.sandbox.run(job)
            except SandboxLost as exc:  # the candidate's import, in its job, killed the sandbox: its build failed
                logs += [exc.stdout, exc.stderr]
                header = {"ok": False, "error": f"the candidate's sandbox died while its import was run for the "
                                                f"extensions it builds: {exc}"}
                break
            logs += [out.stdout, out.stderr]
            if not out.ok:
                header = {"ok": False, "error": describe_failure(out, "building the candidate")}
                break
            header, _ = read_result(out.result)
            deferred = [r for r in header.get("records", []) if r.get("deferred")]
            if not header.get("ok") or not deferred:
                break
            failure = self._install_requests(deferred, toolchain, cfg, installed)
            if failure is not None:
                header = failure
                break
            if not header.get("import_error"):
                break  # the stand-ins did not matter to the import: nothing more to discover
        records = [self._trusted_record(r, toolchain, installed) for r in header.get("records", [])]
        header["records"] = records
        artifacts = {r["name"]: r["sha256"] for r in records if r.get("sha256")}
        if header.get("ok") and not header.get("import_error") and records and all(r.get("linked", True) for r in records) \
                and not any(r.get("deferred") for r in records):
            _write_json(record_path, {"ok": True, "artifacts": artifacts,
                                      "records": [dict(r, log="", cache_hit=True) for r in records]})
        info = BuildInfo(backend=backend, seconds=time.monotonic() - started, artifacts=artifacts)
        info.cache_hits = sum(1 for r in records if r["cache_hit"])
        info.cache_misses = sum(1 for r in records if not r["cache_hit"])
        info.fast_path = ",".join(sorted({r["fast_path"] for r in records if r["fast_path"]}))
        info.log = cap_log("\n".join(filter(None, [header.get("log", ""), *(r["log"] for r in records), *logs])))
        return info, header

    def _build_requested(self, outcome: Any, header: dict[str, Any], cfg: EvalConfig) -> str | None:
        """Compile and install the extensions the candidate's job asked for after its import (outcome.unbuilt: the
        requests as data), adding them to the build's records; the build's error, or None."""
        toolchain = detect_toolchain(_cuda_arch())
        installed: dict[str, dict[str, Any]] = {}
        requests = [{"kind": "load_inline", "name": str(spec.get("name", "")) if isinstance(spec, dict) else "",
                     "spec": spec} for spec in outcome.unbuilt]
        failure = self._install_requests(requests, toolchain, cfg, installed)
        if failure is not None:
            return str(failure.get("error", "the build failed"))
        header["records"] = [*header.get("records", []), *(self._trusted_record(r, toolchain, installed) for r in requests)]
        return None

    def _native_calls(self, header: dict[str, Any], cfg: EvalConfig) -> list[dict[str, str]]:
        """A forbidden_torch_op finding for each extension whose binary calls an ATen op outside the allow-list or the
        dispatcher's own controls (build/native_calls.py), read here from the cache's verified copy: where the
        in-process recorders can be gone around, and the candidate cannot change what is read."""
        allowed = cfg.allowed_compute_ops()
        if ANY_OP in allowed:
            return []
        allowed |= guards.MEMORY_OPS
        findings = []
        for record in header.get("records", []):
            entry = self.build_cache.lookup(record["key"]) if record.get("kind") == "load_inline" and record.get("key") else None
            so = self.build_cache.meta(record["key"], entry)["built"].get("so") if entry is not None else None
            if not so:
                continue
            try:
                binary = self.build_cache.read_verified(entry, str(so))
            except CacheIntegrityError as exc:
                findings.append({"flag": "forbidden_torch_op", "detail": f"the extension's binary could not be read "
                                 f"for the calls it makes: {exc}"[:500]})
                continue
            calls = native_calls(binary, allowed, lambda name: hasattr(torch.ops.aten, name))
            if calls:
                findings.append({"flag": "forbidden_torch_op", "detail": (
                    f"extension '{record.get('name', '')}' calls into PyTorch where the in-process recorders cannot be "
                    f"relied on (read from its binary): {', '.join(calls[:8])}")[:500]})
        return findings

    def _cached_candidate(self, record_path: Path) -> dict[str, Any] | None:
        """The candidate record this process wrote, where every entry it names is still intact (hash-checked);
        a corrupt entry is evicted and the candidate rebuilt."""
        try:
            header = json.loads(record_path.read_text())
        except (OSError, ValueError):
            return None
        intact = True
        for record in header.get("records", []):
            if record.get("kind") == "load_inline" and record.get("key"):
                if self.build_cache.verify(record["key"]):
                    self.build_cache.evict(record["key"])
                    intact = False
        return header if intact and isinstance(header.get("records"), list) else None

    def _install_requests(self, deferred: list[dict[str, Any]], toolchain: Any, cfg: EvalConfig,
                          installed: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
        """Compile and install each reported request; a build failure as a header, else None."""
        if len(deferred) > _MAX_EXTENSIONS:
            return {"ok": False, "error": f"the candidate asks for {len(deferred)} extensions (at most {_MAX_EXTENSIONS})"}
        for record in deferred:
            try:
                ext = InlineExtension.from_dict(record.get("spec"))
            except ValueError as exc:
                return {"ok": False, "error": f"a malformed extension request came back from the build job: {exc}"}
            if ext.with_cuda and toolchain.cuda_home is None:
                raise RuntimeError("no CUDA toolkit found on this host: set CUDA_HOME or put nvcc on PATH")
            key = inline_key(ext, toolchain)  # ours: a key the job reported is never used to install
            if key in installed or (self.build_cache.lookup(key) is not None and not self.build_cache.verify(key)):
                continue
            private = Path(tempfile.mkdtemp(prefix="build-", dir=self.job_root))
            try:
                job = Job("agent.engine.build.job:compile_inline", {"spec": ext.to_dict(), "cuda_arch": _cuda_arch()},
                          device="cpu", limits=Limits(wall_seconds=cfg.build_seconds, cpu_seconds=int(cfg.build_seconds * 16)),
                          env=self._job_env(), private_dir=str(private))
                try:
                    out = self.sandbox.run(job)
                except SandboxLost as exc:  # the compiler ran on the candidate's sources and flags (e.g. -fplugin=)
                    return {"ok": False, "error": f"the sandbox died while extension '{ext.name}' compiled: {exc}",
                            "log": f"{exc.stdout}\n{exc.stderr}"}
                if not out.ok:
                    return {"ok": False, "error": describe_failure(out, f"compiling extension '{ext.name}'")}
                compiled, _ = read_result(out.result)
                if not compiled.get("ok"):
                    return {"ok": False, "error": str(compiled.get("error", "the build failed")),
                            "log": str(compiled.get("log", ""))}
                built = _checked_built(compiled.get("built"), ext, key)
                self.build_cache.install(key, private, built)
            except (ArtifactError, ValueError, OSError) as exc:
                return {"ok": False, "error": f"the build of extension '{ext.name}' left no installable output: {exc}"}
            finally:
                shutil.rmtree(private, ignore_errors=True)
            installed[key] = {"seconds": float(compiled.get("seconds", 0.0))}
        return None

    def _trusted_record(self, record: dict[str, Any], toolchain: Any, installed: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """A discovery job's record with what this process knows put in: the key of the request it reported, whether
        this build installed it, and the binary's sha256 from the cache's manifest (never from the job)."""
        out = {"kind": str(record.get("kind", "")), "name": str(record.get("name", ""))[:200], "key": "", "cache_hit": False,
               "seconds": 0.0, "fast_path": "", "linked": bool(record.get("linked", True)), "log": "", "deferred": False}
        if out["kind"] != "load_inline":
            out.update(cache_hit=bool(record.get("cache_hit")), log=str(record.get("log", ""))[:20000])
            return out
        try:
            ext = InlineExtension.from_dict(record.get("spec"))
        except ValueError:
            return dict(out, linked=False, deferred=True, log="the build job reported no valid request")
        key = inline_key(ext, toolchain)
        entry = self.build_cache.lookup(key)
        if entry is None:
            return dict(out, key=key, linked=False, deferred=True)
        meta = self.build_cache.meta(key, entry)
        built, files = meta["built"], meta["files"]
        so = built.get("so")
        return dict(out, key=key, cache_hit=key not in installed, seconds=installed.get(key, {}).get("seconds", 0.0),
                    fast_path=str(built.get("fast_path", "")), linked=bool(so), deferred=False,
                    log=(entry / "build.log").read_text()[-20000:] if key in installed and (entry / "build.log").is_file() else "",
                    sha256=files[so]["sha256"] if so in files else "")

    def evaluate(self, problem_source: str, candidate_source: str, config: EvalConfig | None = None,
                 names: ProblemNames | None = None, on_phase: Watcher | None = None) -> Verdict:
        """The candidate's verdict against the problem. `on_phase` watches the evaluation's phases as they start
        (progress.py): progress for a person, never evidence."""
        cfg = config or self.config
        progress = Progress(on_phase)
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
        t0 = time.monotonic()
        progress("plan", "planning memory from the problem's footprint")
        plan_ = self.memory_plan(problem_source, cfg, names)
        seconds["plan"] = time.monotonic() - t0
        if plan_.mode == memory.CAPACITY:
            return Verdict(Status.CAPACITY, Stage.PLAN, plan_.note, device=cfg.device, seconds=seconds,
                           memory=plan_.to_dict())
        progress("build", f"building the candidate ({cfg.backend or report.backend_hint or _default_backend(cfg)})")
        build, build_header = self.build(candidate_source, cfg, report.backend_hint)
        seconds["build"] = time.monotonic() - started - seconds["plan"]
        if not build_header.get("ok", False):
            return Verdict(Status.BUILD_ERROR, Stage.BUILD, build_header.get("error", "the build failed"),
                           build=build, device=cfg.device, seconds=seconds, memory=plan_.to_dict())
        peaks = self.device_peaks(cfg, progress) if cfg.timing else None
        baseline_key = self._baseline_key(problem_source, cfg)
        cached = self._cached_compile(baseline_key) if cfg.timing and cfg.compile_baseline else None
        ratio = cached.get("ratio_to_eager") if isinstance(cached, dict) else None
        ncu = cfg.profile and cfg.device == "cuda" and _ncu_available()
        t0 = time.monotonic()
        rebuilds = starts = 0
        while True:
            # A fresh seed for every start: a session started again (an extension asked for in the checked calls, or
            # a retry after running out of memory) draws other inputs and weights, so that nothing the job saw before
            # (carried over in a build request's text, which the build cache keeps where every job can read it) is
            # of use after (the eighth red team's G8).
            plan = _plan(cfg, _start_seed(cfg, starts), names)
            starts += 1
            # On a GPU the files are sized to the problem (memory.host_files): a 16 GiB input set fits its exchange.
            with self.output_files.lend(max(cfg.limits.memory_bytes, plan_.outputs_bytes)) as outputs, \
                    self.output_files.lend(max(cfg.reference_limits.memory_bytes, plan_.exchange_bytes)) as exchange:
                session = Session(self.sandbox, self.reference_sandbox, cfg,
                                  self._candidate_payload(candidate_source, cfg, _built_keys(build_header)),
                                  self._reference_payload(problem_source, cfg, plan), self._job_env(cfg),
                                  exchange, outputs, compile_ratio=ratio if isinstance(ratio, (int, float)) else None,
                                  park=plan_.park, progress=progress,
                                  job_limits=memory.job_limits(plan_, cfg.limits, cfg.reference_limits))
                try:
                    outcome = session.run(profile=cfg.profile and not ncu)
                except ProblemFailed as exc:
                    self._keep_protocol_pages(session, outputs, exchange)
                    if not _out_of_memory(str(exc), session.outcome.reference_job):
                        raise ProblemError(f"the reference problem failed: {exc}") from exc
                    # Beside the candidate's job the plan's estimate can fall short (seen on the H100: KernelBench's
                    # 4_Matrix_vector_multiplication_, 8 GiB inputs): once more one job after the other, where that fits.
                    retry = memory.after_out_of_memory(plan_, "reference") if cfg.device == "cuda" else None
                    if retry is not None:
                        plan_ = retry
                        continue
                    # The engine's own side ran out of memory: its limit, not the candidate's failure (nor the problem's).
                    return Verdict(Status.CAPACITY, Stage.REFERENCE, cap_log(
                        f"the reference's job ran out of memory ({plan_.mode} plan: {plan_.note or 'both jobs beside each other'}; "
                        f"footprint: {_footprint_text(plan_)}; limit: {_limit_text(plan_)}): the engine's limit, not the "
                        f"candidate's failure\n{exc}", 6000), device=cfg.device, memory=plan_.to_dict(),
                        seconds={**seconds, "session": time.monotonic() - t0, "total": time.monotonic() - started})
                self._keep_protocol_pages(session, outputs, exchange)
            if outcome.failure is not None and outcome.failure[0] == "unbuilt":
                # Its job asked for extensions the build step never saw (made in __init__ or forward): built here by the
                # trusted side like any other, read for what they call (_native_calls), and the evaluation starts again.
                rebuilds += 1
                failure = self._build_requested(outcome, build_header, cfg) if rebuilds <= _BUILD_ROUNDS else \
                    f"the candidate asked for new extensions again after {_BUILD_ROUNDS} builds: {outcome.failure[1]}"
                if failure is None:
                    continue
                outcome.failure = ("build_error", failure)
            # Beside the reference's job on one GPU, the candidate's may have run out of memory for the reference's
            # share (the plan's estimate is ours; allocator caches are not): once more one after the other, where that
            # fits. Out of memory then is its own.
            failed = outcome.failure is not None and outcome.failure[0] == "runtime_error" \
                and _out_of_memory(outcome.failure[1], outcome.candidate_job)
            retry = memory.after_out_of_memory(plan_) if failed and cfg.device == "cuda" else None
            if retry is None:
                break
            plan_ = retry
        seconds["session"] = time.monotonic() - t0
        seconds.update({f"session.{k}": v for k, v in outcome.seconds.items()})
        outcome.flags.extend(self._native_calls(build_header, cfg))
        verdict = judge(outcome, cfg, build, compile_cached=cached if ratio is not None else None, peaks=peaks)
        if peaks is not None and Flag.BEYOND_ROOFLINE in {f.flag for f in verdict.flags}:
            # Before rejecting a time as physically impossible, make sure the roof is not one measured on a busy
            # device: measure the peaks again (the stored roof only rises) and judge once more.
            peaks = self.device_peaks(cfg, progress, remeasure=True)
            verdict = judge(outcome, cfg, build, compile_cached=cached if ratio is not None else None, peaks=peaks)
        verdict.memory = plan_.to_dict()
        m = outcome.measured
        # Reused by later evaluations of other candidates: kept only from a steady measurement of the two baselines, so
        # that a candidate whose leftover GPU work slowed this one's baselines (m.contended) cannot move another verdict.
        if m is not None and verdict.timing is not None and verdict.timing.compile_ms and ratio is None \
                and keeps_compile_baseline(m, cfg.max_interval_width):
            self._store_compile(baseline_key, {"ratio_to_eager": verdict.timing.compile_ms / verdict.timing.eager_ms,
                                               "compile_seconds": m.compile_seconds})
        if ncu and verdict.stage is Stage.DONE:
            progress("profile", "profiling the candidate with Nsight Compute")
            t0 = time.monotonic()
            verdict.profile = self._profile(problem_source, candidate_source, cfg, plan) or verdict.profile
            seconds["profile"] = time.monotonic() - t0
        verdict.seconds = {**seconds, "total": time.monotonic() - started}
        return verdict

    def _candidate_payload(self, candidate_source: str, cfg: EvalConfig, built_keys: list[str] | None = None) -> dict[str, Any]:
        """What the candidate's job gets: its own source and our settings; nothing of the problem. `built_keys`: the
        extensions this evaluation's build installed or found (the only ones its job may load: loader.refuse_misses)."""
        allowed = sorted(cfg.allowed_compute_ops())
        if ANY_OP not in allowed and self._aten_watch is None:  # ours, compiled here (a few seconds, once per toolchain)
            self._aten_watch = aten_watch.built(self.cache_root)
        return {"candidate_source": candidate_source, "device": cfg.device, "threads": cfg.threads,
                "allowed_ops": allowed, "cache_root": str(self.cache_root), "cuda_arch": _cuda_arch(),
                "built_keys": built_keys,
                # the observer's binary, and a key of this job's with which it signs its counts for the parent
                "aten_watch": {**self._aten_watch, "secret": secrets.token_hex(16)} if ANY_OP not in allowed else None,
                "kernel_census": self._kernel_census(cfg) if ANY_OP not in allowed else None}

    def _kernel_census(self, cfg: EvalConfig) -> dict[str, str] | None:
        """The kernel census for one job on a GPU: its binary (compiled here once, under a second) and a key of its own
        (kernel_census.py); None on the CPU or where CUPTI's headers are missing."""
        if cfg.device != "cuda":
            return None
        if self._census_binary is None:
            self._census_binary = kernel_census.built(self.cache_root) or {}
        return {**self._census_binary, "secret": secrets.token_hex(16)} if self._census_binary else None

    def _reference_payload(self, problem_source: str, cfg: EvalConfig, plan: TrialPlan) -> dict[str, Any]:
        return {"problem_source": problem_source, "device": cfg.device, "threads": cfg.threads,
                "plan": plan.to_payload(), "rtol": cfg.rtol, "atol_scale": cfg.atol_scale, "wide_calls": cfg.wide_calls,
                "kernel_census": self._kernel_census(cfg)}

    def memory_plan(self, problem_source: str, cfg: EvalConfig, names: ProblemNames) -> memory.MemoryPlan:
        """The problem's footprint (traced once per problem and device by a sandboxed job, on meta tensors) against
        the device memory budget: how the evaluation's two jobs share the device, or that they cannot."""
        traced = self._traced(problem_source, cfg, names)
        if cfg.device_memory_bytes is not None:
            budget, source = cfg.device_memory_bytes, "EvalConfig.device_memory_bytes"
        elif traced.get("device_total_bytes"):
            fraction = cfg.limits.gpu_memory_fraction
            budget = int(traced["device_total_bytes"] * fraction)
            source = f"{fraction:.0%} of the GPU's {traced['device_total_bytes'] / (1 << 30):.1f} GiB"
        else:
            budget, source = None, "no budget on the CPU unless EvalConfig.device_memory_bytes sets one"
        if "footprints" not in traced:
            return memory.unplanned(traced.get("error", "the footprint job reported none"), cfg.device, budget, source)
        return memory.plan([memory.Footprint.from_dict(f) for f in traced["footprints"]], cfg.device, budget, source,
                           host_available=psutil.virtual_memory().available if cfg.device == "cuda" else None)

    def _traced(self, problem_source: str, cfg: EvalConfig, names: ProblemNames, seconds: float = 120.0) -> dict[str, Any]:
        """The problem's footprint job's answer (footprint.py: meta tensors, nothing allocated), once per problem and
        device in this evaluator; the job may take `seconds` (a module that hangs on import hangs here too)."""
        key = hashlib.sha256(json.dumps([problem_source, dataclasses.asdict(names), cfg.device]).encode()).hexdigest()
        traced = self._footprints.get(key)
        if traced is None:
            out = self.reference_sandbox.run(Job(
                "agent.engine.evaluate.footprint:footprint", {"problem_source": problem_source, "device": cfg.device,
                                                       "names": dataclasses.asdict(names)},
                device=cfg.device, limits=dataclasses.replace(cfg.reference_limits, wall_seconds=seconds,
                                                              cpu_seconds=max(1, int(seconds * 4))),
                env=self._job_env(cfg)))
            if not out.ok:
                raise ProblemError(f"the problem's footprint could not be traced: {describe_failure(out, 'the problem')}")
            traced = self._footprints[key] = json.loads(out.result)
        return traced

    def check_problem(self, problem_source: str, names: ProblemNames | None = None, seconds: float = 60.0) -> dict[str, Any]:
        """Import and run a problem once in the sandbox (no candidate, no timing): what an upload form
        needs to know before accepting it. Returns its output shapes and hardware facts; raises
        ProblemError with the reason when it is invalid, crashes, hangs or fails."""
        names = names or ProblemNames()
        report = validation.validate_problem(problem_source, names=names)
        if not report.ok:
            raise ProblemError("the problem is invalid: " + "; ".join(_issue_text(i) for i in report.errors()))
        cfg = dataclasses.replace(self.config, timing=False, trials=1, distributions=())
        started = time.monotonic()
        # Traced first on meta tensors (seconds), the trace and the run sharing the check's `seconds` (what the studio
        # waits for). On the CPU a problem that cannot fit the check's process is told so with its footprint at once,
        # rather than after filling the memory or the minute (KernelBench's GPU sizes); on a GPU the host file its
        # inputs are handed through is sized to them, as in an evaluation (memory.host_files).
        traced = self._traced(problem_source, cfg, names, seconds=seconds)
        fp = max((memory.Footprint.from_dict(f) for f in traced.get("footprints") or []),
                 key=lambda f: f.input_bytes + f.output_bytes, default=None)
        limits, capacity = cfg.reference_limits, cfg.reference_limits.memory_bytes
        if fp is not None and cfg.device == "cpu":
            needed = memory.check_peak(fp)
            if needed > limits.memory_bytes:
                raise ProblemTooBig(
                    f"the problem is too big to run here: its footprint is {fp.describe()} (traced on meta "
                    f"tensors); running it once takes about {size_text(needed)} (its weights, its inputs "
                    f"and the copy handed between processes, its outputs and a forward's workspace), and its "
                    f"process may use at most {size_text(limits.memory_bytes)}",
                    fp.describe(), needed, limits.memory_bytes)
        elif fp is not None:
            files = fp.input_bytes + memory.FILE_SLACK  # the check hands over one input set (session.check_reference)
            host = psutil.virtual_memory().available
            if files > memory.HOST_SHARE * host:
                raise ProblemTooBig(
                    f"the problem is too big for this machine: its footprint is {fp.describe()} (traced on meta "
                    f"tensors); its inputs are handed between processes through {size_text(files)} of host memory, "
                    f"and the host has {size_text(host)} free", fp.describe(), files, host)
            limits, capacity = dataclasses.replace(limits, memory_bytes=limits.memory_bytes + files), max(capacity, files)
        left = max(1.0, seconds - (time.monotonic() - started))
        limits = dataclasses.replace(limits, wall_seconds=left, cpu_seconds=max(1, int(left * 4)))
        plan = _plan(cfg, secrets.randbits(62), names)
        with self.output_files.lend(capacity) as exchange:
            try:
                return check_reference(self.reference_sandbox, dataclasses.replace(cfg, reference_limits=limits),
                                       self._reference_payload(problem_source, cfg, plan), self._job_env(cfg), exchange)
            except ProblemFailed as exc:
                raise ProblemError(f"the reference problem failed: {exc}") from exc

    def _keep_protocol_pages(self, session: Session, outputs: int, exchange: int) -> None:
        """The pages of the lent files that the session saw the protocol need stay for the next evaluation's writes
        (zeroed); the pool frees the rest, whatever the jobs wrote there (file_pool.py)."""
        self.output_files.keep_pages(outputs, session.needed["outputs"])
        self.output_files.keep_pages(exchange, session.needed["exchange"])

    def run_problem_job(self, job: str, problem_source: str, *, doing: str, seconds: float = 120.0) -> dict[str, Any]:
        """Runs a job of a caller's own code on the problem (`job` is "module:function", e.g. the built-in policy's
        tracer, agent/builtin/trace.py), in this evaluator's sandbox under the reference's limits capped at `seconds`,
        and returns its JSON result. Raises ProblemError, saying it failed while `doing`, when the job fails (the
        problem does not import or build, or the job runs out of time): `doing` names the work in words."""
        # Run with the device the candidates will run on visible: a problem that sizes itself by
        # torch.cuda.is_available() (as KernelBench's and our examples do) must be seen at the sizes it is evaluated
        # at. The caller's job decides whether it touches the device (the tracer uses meta tensors only).
        out = self.sandbox.run(Job(job, {"problem_source": problem_source},
                                   device=self.config.device,
                                   limits=dataclasses.replace(self.config.reference_limits, wall_seconds=seconds,
                                                              cpu_seconds=max(1, int(seconds * 4))),
                                   env=self._job_env()))
        if not out.ok:
            raise ProblemError(describe_failure(out, doing))
        return json.loads(out.result)

    def _profile(self, problem_source: str, candidate_source: str, cfg: EvalConfig, plan: TrialPlan) -> dict[str, Any] | None:
        """An ncu summary where ncu exists on a GPU host; otherwise the candidate job's torch.profiler one."""
        from agent.engine.profiling import ncu_available

        if cfg.device != "cuda" or not ncu_available():
            return None
        payload = {"problem_source": problem_source, "candidate_source": candidate_source, "plan": plan.to_payload(),
                   "cache_root": str(self.cache_root), "cuda_arch": _cuda_arch()}
        try:
            out = self.sandbox.run(Job("agent.engine.evaluate.jobs:ncu_profile", payload, device="cuda",
                                       limits=Limits(wall_seconds=300), env=self._job_env()))
        except SandboxLost as exc:  # the candidate's code ran there: a picture lost, the verdict already made
            return {"tool": "ncu", "kernels": [], "error": f"the candidate's sandbox died while it was profiled: {exc}"}
        if not out.ok:
            return {"tool": "ncu", "kernels": [], "error": describe_failure(out, "profiling with ncu")}
        header, _ = read_result(out.result)
        return header["profile"]

    # ------------------------------------------------------------------------------------ baselines

    def _baseline_key(self, problem_source: str, cfg: EvalConfig) -> str:
        """What a torch.compile baseline depends on: the problem, the hardware, torch and the toolchain, and the
        timing protocol that measured it."""
        facts = {"problem": hashlib.sha256(problem_source.encode()).hexdigest(), "device": cfg.device,
                 "host": socket.gethostname(), "machine": platform.machine(), "cpu": platform.processor(),
                 "cpus": os.cpu_count(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "torch": torch.__version__,
                 "toolchain": detect_toolchain(_cuda_arch()).fingerprint(), "protocol": f"{BASELINE_PROTOCOL}/{PROTOCOL}",
                 "threads": cfg.threads}
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()

    def device_peaks(self, cfg: EvalConfig, progress: Progress = SILENT, remeasure: bool = False) -> dict[str, Any] | None:
        """The device's measured peaks (peaks.py: copy bandwidth, FP32 and tensor-core FLOP/s, cache size), measured
        once per device, host, torch and thread count by a job that runs our code only, and kept in the trusted store
        no job can see or write. None where the measurement failed (the verdict then has no speed-of-light fraction).

        `remeasure`: measure again even though a record exists, and keep each roof's higher figure. A peak measured
        while the device was busy (another evaluation, another user's job) is too low, and a roof too low would
        reject an honest kernel as beyond the speed of light; a stored roof therefore only ever rises."""
        facts = {"device": cfg.device, "host": socket.gethostname(), "machine": platform.machine(),
                 "cpu": platform.processor(), "cpus": os.cpu_count(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                 "torch": torch.__version__, "threads": cfg.threads, "protocol": PEAKS_PROTOCOL}
        key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()
        path = self.trusted_root / "peaks" / f"{key}.json"
        stored: dict[str, Any] | None = None
        try:
            record = json.loads(path.read_text())
            if isinstance(record, dict) and record.get("key") == key:
                stored = record
        except (OSError, ValueError):
            pass
        if stored is not None and not remeasure:
            return stored
        progress("peaks", f"measuring this {cfg.device.upper()}'s peaks (copy bandwidth, FLOP/s): the speed-of-light bound"
                          + (", again before rejecting a time below it" if remeasure else ""))
        out = self.reference_sandbox.run(Job("agent.engine.evaluate.peaks:measure", {"device": cfg.device, "threads": cfg.threads},
                                             device=cfg.device, limits=Limits(wall_seconds=300), env=self._job_env(cfg)))
        if not out.ok:
            return stored
        header, _ = read_result(out.result)
        record = {**header["peaks"], "key": key, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        for roof in _ROOFS:
            if stored is not None and float(stored.get(roof) or 0) > float(record.get(roof) or 0):
                record[roof] = stored[roof]
        _write_json(path, record)
        return record

    def _cached_compile(self, key: str) -> dict[str, Any] | None:
        """A baseline this process stored, from the trusted store no job can see (nor write)."""
        path = self.trusted_root / "baselines" / f"{key}.json"
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and record.get("key") == key else None

    def _store_compile(self, key: str, compiled: dict[str, Any]) -> None:
        record = dict(compiled, key=key, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        _write_json(self.trusted_root / "baselines" / f"{key}.json", record)


def evaluate(problem_source: str, candidate_source: str, config: EvalConfig | None = None, **kwargs: Any) -> Verdict:
    """One-shot evaluation (a fresh sandbox). For many evaluations keep an Evaluator."""
    with Evaluator(config, **kwargs) as evaluator:
        return evaluator.evaluate(problem_source, candidate_source)


def _built_keys(header: dict[str, Any]) -> list[str]:
    return [r["key"] for r in header.get("records", []) if r.get("kind") == "load_inline" and r.get("key")]


def _checked_built(built: Any, ext: InlineExtension, key: str) -> dict[str, Any]:
    """A compile job's description of its build, kept only where it is consistent with the request we sent."""
    if not isinstance(built, dict):
        raise ValueError("the compile job described no build")
    so = built.get("so")
    if so is not None and so != f"{module_name_for(ext, key)}.so":
        raise ValueError(f"the compile job named its binary {so!r}, not the request's module")
    headers = built.get("headers", [])
    if not isinstance(headers, list) or not all(isinstance(h, list) and len(h) == 2 and all(isinstance(v, str) for v in h)
                                                 for h in headers):
        raise ValueError("malformed header sets")
    return {"kind": "inline_extension", "name": ext.name, "module": module_name_for(ext, key), "so": so,
            "link_note": str(built.get("link_note", ""))[:2000], "fast_path": str(built.get("fast_path", ""))[:20],
            "headers": headers}


def _write_json(path: Path, record: dict[str, Any]) -> None:
    """Write then rename: concurrent workers never read half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def _preload(cfg: EvalConfig) -> tuple[str, ...]:
    """Modules the zygote imports once so that no child pays for them (triton costs ~1 s, and ~0.5 s more on
    a candidate's first Triton call: warm_triton.py)."""
    modules = ["agent.engine.evaluate.jobs", "agent.engine.evaluate.candidate_job", "agent.engine.evaluate.warm"]
    if cfg.device == "cuda" and importlib.util.find_spec("triton") is not None:
        modules.append("agent.engine.evaluate.warm_triton")
    return tuple(modules)


def _start_seed(cfg: EvalConfig, start: int) -> int:
    """The secret seed of a session's `start`-th start: a fresh draw, or, where the config fixes a seed (tests,
    reproductions), one derived from it for each start alike."""
    if cfg.seed is None:
        return secrets.randbits(62)
    return cfg.seed if start == 0 else int.from_bytes(hashlib.sha256(f"{cfg.seed}:{start}".encode()).digest()[:8]) >> 2


def _plan(cfg: EvalConfig, seed: int, names: ProblemNames) -> TrialPlan:
    return TrialPlan(seed=seed, trials=cfg.trials, distributions=tuple(cfg.distributions), names=dataclasses.asdict(names))


def _ncu_available() -> bool:
    from agent.engine.profiling import ncu_available

    return ncu_available()


def _default_backend(cfg: EvalConfig) -> str:
    return "cpp" if cfg.device == "cpu" else "cuda"


def _candidate_key(source: str, cfg: EvalConfig) -> str:
    from agent.engine.build.toolchain import detect_toolchain

    facts = [source, cfg.device, detect_toolchain(_cuda_arch()).fingerprint()]
    return hashlib.sha256("\0".join(facts).encode()).hexdigest()


def _cuda_arch() -> str:
    return os.environ.get("KSTUDIO_CUDA_ARCH", "9.0")


def _out_of_memory(message: str, job: Any) -> bool:
    """Whether a failed job ran out of memory: killed at its memory limit, or its error says so (memory_text)."""
    return getattr(job, "killed", None) == "memory" or ran_out_of_memory(message)


def _footprint_text(plan: memory.MemoryPlan) -> str:
    return memory.Footprint.from_dict(plan.footprint).describe() if plan.footprint else "not traced"


def _limit_text(plan: memory.MemoryPlan) -> str:
    return f"{plan.budget_bytes / (1 << 30):.2f} GiB ({plan.budget_source})" if plan.budget_bytes else plan.budget_source


def _issue_text(issue: Any) -> str:
    where = f"line {issue.line}: " if getattr(issue, "line", None) else ""
    return where + issue.message
