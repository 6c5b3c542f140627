"""One evaluation's two jobs, driven by the trusted parent (docs/threat-model.md says why it is built so).

The reference's job (the problem, our code) and the candidate's job (the candidate, and our code that its code
can change) start together, each in its own sandbox, and from then on each does only what the parent asks,
one command at a time (channel.py):

1. The candidate's job imports the candidate before anything of the problem exists in it; once it is ready it
   gets the constructor's arguments and the reference's weights, as data.
2. Checked calls: the reference's job writes call i's inputs (drawn from the secret seed, which never leaves
   it and the parent) to the exchange file, the candidate's job runs its forward on them and writes its
   outputs, the reference's job compares.
3. Timing, in rounds: the candidate's batch, then (with the candidate's processes stopped) eager's, torch.compile's
   and the null batches, in alternating order, all on keys the parent draws as it sends each round. The
   parent's own clock times every batch; the null batch (the harness's share: keyed inputs and projections,
   run by the reference's job) is taken off, from the candidate's batches only as much of it as the candidate's
   own null batches say its process needs (null_scale, never more). Each candidate call's projection is checked
   against the reference's for the same key (keyed.py): on a GPU, from the round's eager batch, which runs every key
   the candidate's does and whose fused projections carry the bounds too; elsewhere the reference's job runs the
   reference on those keys again. Rounds go on until the speedup's interval is narrow enough.
"""
from __future__ import annotations

import math
import os
import secrets
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import agent.engine.evaluate.aten_watch as aten_watch
import agent.engine.evaluate.kernel_census as kernel_census
import agent.engine.evaluate.tensor_file as tensor_file
from agent.engine.evaluate.guards import MEMORY_OPS
from agent.engine.evaluate.channel import ChannelError, JobFailed, ParentEnd
from agent.engine.evaluate.config import EvalConfig
from agent.engine.evaluate.keyed import WIDE_EVERY, agree, is_wide
from agent.engine.evaluate.plan import VARIANT
from agent.engine.evaluate.progress import SILENT, Progress
from agent.engine.memory_text import size_text
from agent.engine.sandbox.client import Job, JobControl, JobResult, Sandbox, SandboxLost
from agent.engine.sandbox.limits import Limits
from agent.engine.verdict import REJECTING_FLAGS, Flag

# The parent's pipe round trip is ~50-100 us; batches this long keep it under 1% of each.
_MIN_CALLS, _MAX_CALLS = 1, 20_000
# A candidate's batch holds at most this many times eager's calls: every one of them is checked by running the
# reference, so a candidate that claims to be faster than that gets shorter batches, not a longer turn.
_CHECKED_PER_EAGER = 32
_GRACE = 5.0  # seconds past a job's wall-clock limit the parent waits: the sandbox kills it first, and says so
_REJECTING = frozenset(f.value for f in REJECTING_FLAGS)  # the outcome's flags are their names (the wire's form)
# On the CPU, the untimed calls a job runs on fresh keys before a timed batch that follows the other job's work. Without
# them the first timed batch after a switch paid for the caches (its harness about 15% slower on this box), and which
# batch came first alternated with the round's order: eager read 0.07-0.30 ms a call in half the rounds and 0.62-0.74 in
# the other half of one evaluation (docs/benchmarks.md §15, session 34).
_REWARM_CALLS = 2
_CONTENDED = 1.3  # a reference batch whose device probe took this much longer than the fastest: the GPU was busy


class ProblemFailed(RuntimeError):
    """The reference's job failed: the problem itself is at fault, not the candidate."""


# What the parent reads of a reply's in-process findings (_take_flags): names of Flag only, at most this many entries.
_FLAG_NAMES = frozenset(f.value for f in Flag)
_FLAGS_PER_REPLY = 4 * len(Flag)

@dataclass(frozen=True)
class CandidateRound:
    """One round's candidate batch, in seconds, with its events (ms, the candidate's own word: a cross-check), the
    reference's null batch of the same size and its events, and the candidate's own null batch (NaN: none ran)."""

    seconds: float
    calls: int
    reference_null: float
    own_null: float = float("nan")
    events_ms: float | None = None
    reference_null_events_ms: float = float("nan")


@dataclass
class Measured:
    """Per round, each function's time per call (ms) on the parent's clock, the harness's share taken off."""

    candidate: list[float] = field(default_factory=list)
    eager: list[float] = field(default_factory=list)
    compile: list[float] = field(default_factory=list)
    candidate_events: list[float] = field(default_factory=list)  # the candidate's own device events: a cross-check
    calls: dict[str, int] = field(default_factory=dict)
    contended: int = 0
    verified_calls: int = 0
    mismatched_calls: list[int] = field(default_factory=list)
    compile_error: str = ""
    compile_seconds: float = 0.0
    rounds: int = 0
    converged: bool = False
    harness_bound: set[str] = field(default_factory=set)  # functions whose calls were lost in the harness's share
    harness: str = ""  # how the timed calls' inputs were mixed and outputs projected (the reference's job's word)
    same_bases: bool = False  # the problem's two input sets were equal: every timed call had the same inputs
    # Each round's candidate batch and the null batches of its size, on the parent's clock (CandidateRound): the
    # candidate's figures are recomputed from all of them each round, with one null_scale for the whole evaluation.
    candidate_rounds: list[CandidateRound] = field(default_factory=list)
    null_scale: float = 1.0  # the share of the reference's null taken off the candidate's batches (null_scale())


@dataclass
class Outcome:
    """What the parent saw. `failure` is the candidate's: (kind, message) with kind build_error, runtime_error or
    unbuilt (an extension asked for after the import: the evaluator builds it and runs the session again)."""

    reference: dict[str, Any] = field(default_factory=dict)
    candidate_ready: dict[str, Any] = field(default_factory=dict)
    failure: tuple[str, str] | None = None
    weights: str = ""
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    flags: list[dict[str, str]] = field(default_factory=list)
    # The candidate job's CPU time from before each of its batches to after it, and the batches' wall time
    # (cpu_share.py).
    cpu_seconds: float = 0.0
    cpu_wall_seconds: float = 0.0
    # Each timed round's candidate batch and its own null batch of the same keys, as (CPU s, wall s) pairs: their
    # difference is the calls alone, the harness around them taken off (cpu_share.call_over_threads).
    cpu_rounds: list[tuple[tuple[float, float], tuple[float, float]]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    measured: Measured | None = None
    variants: dict[str, Measured] = field(default_factory=dict)  # label -> each input variant's own timing
    work: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] | None = None
    candidate_job: JobResult | None = None
    reference_job: JobResult | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    # Extensions the candidate's job asked for after its import (failure kind "unbuilt"): their requests, as data.
    unbuilt: list[dict[str, Any]] = field(default_factory=list)
    kernel_census: dict[str, Any] = field(default_factory=dict)  # kernel_census.Judge.summary(), once timing is done


# The flag raised when a stop of the candidate's job leaves a process of it running (sandbox/zygote.py _freeze).
ESCAPED = Flag.WORK_AFTER_RETURN


class Session:
    def __init__(self, candidate_sandbox: Sandbox, reference_sandbox: Sandbox, cfg: EvalConfig,
                 candidate_payload: dict[str, Any], reference_payload: dict[str, Any], env: dict[str, str],
                 exchange_fd: int, outputs_fd: int, compile_ratio: float | None, park: bool = False,
                 progress: Progress = SILENT, job_limits: tuple[Limits, Limits] | None = None) -> None:
        """`job_limits`: the candidate's and the reference's jobs' limits where the memory plan widens them
        (memory.job_limits); the commands' deadlines stay `cfg`'s."""
        self.cfg = cfg
        cand_limits, ref_limits = job_limits or (cfg.limits, cfg.reference_limits)
        self.progress = progress
        self.compile_ratio = compile_ratio
        # The sequential fallback (memory.py): whichever job the parent is not driving keeps its device state on
        # the host, so the two never hold their working sets on the device at once.
        self.park = park
        self._ref_parked = self._cand_parked = False
        # Which job ran the last batch (or check): on the CPU the first batch after a switch runs on caches the other
        # job filled, so a round's timed batch that follows a switch is preceded by an untimed one (_REWARM_CALLS).
        self._last_job: str | None = None
        # Where the fused kernels project (the reference's job says so with the bases), its eager batch's figures hold
        # the bounds too, and the candidate's calls are checked from the eager batch on the same keys (_round).
        self._eager_checks = False
        self._batch_cpu: float | None = None  # the candidate's last batch's CPU seconds, as the zygote read them
        # Past the checked calls every shape the candidate is timed on has been called once (each input variant is a
        # checked call), so an extension asked for then is no lazy build: it would start the evaluation again, with
        # the batches not yet checked dropped and after the job has seen its own times (_receive_cand).
        self._checks_done = False
        # The two files both jobs hand tensors through, and the most each may hold: what the protocol put there so far
        # (_hold_files_to_the_protocol). Pages written through a mapping count in no process's resident memory.
        self._files = {"exchange": exchange_fd, "outputs": outputs_fd}
        self._file_sizes = {name: os.fstat(fd).st_size for name, fd in self._files.items()}
        self.needed = {"exchange": 0, "outputs": 0}
        # A file from the evaluator's pool comes with the zeroed pages an earlier evaluation's protocol needed
        # (file_pool.keep_pages): those are no more this candidate's doing than the protocol's own writes.
        self._held_at_start = {name: tensor_file.held_bytes(fd) for name, fd in self._files.items()}
        self.outcome = Outcome()
        # The kernel census's parent side (kernel_census.py): each job's key, and what the candidate may run beyond
        # the memory ops.
        self.kernels = kernel_census.Judge(
            (candidate_payload.get("kernel_census") or {}).get("secret"),
            (reference_payload.get("kernel_census") or {}).get("secret"),
            kernel_census.judged_ops(cfg.allowed_compute_ops() - MEMORY_OPS, aten_watch.INTERNALS))
        self._cand_keys: list[int] = []
        # The ATen observer's counts, signed in the candidate's job and judged here (aten_watch.WatchJudge).
        self.watch = aten_watch.WatchJudge((candidate_payload.get("aten_watch") or {}).get("secret"))
        self._cand_call = 0
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kstudio-job")
        self.control = JobControl()
        self.ref = ParentEnd()
        self.cand = ParentEnd()
        self._ref_job: Future[JobResult] = self._pool.submit(reference_sandbox.run, Job(
            "agent.engine.evaluate.reference_job:reference", reference_payload, device=cfg.device, limits=ref_limits,
            env=env, fds=(*self.ref.job_fds(), exchange_fd, outputs_fd)))
        self._cand_job: Future[JobResult] = self._pool.submit(candidate_sandbox.run, Job(
            "agent.engine.evaluate.candidate_job:candidate", candidate_payload, device=cfg.device, limits=cand_limits,
            env=env, fds=(*self.cand.job_fds(), exchange_fd, outputs_fd), control=self.control))
        self.ref.alive = lambda: not self._ref_job.done()
        self.cand.alive = lambda: not self._cand_job.done()

    # ------------------------------------------------------------------------------------ the whole

    def run(self, profile: bool = False) -> Outcome:
        out = self.outcome
        started = time.monotonic()
        try:
            self.progress("reference", "the reference's job: importing the problem, building the model, drawing inputs")
            out.reference = self._ask_ref(None, self.cfg.reference_limits.wall_seconds)
            out.seconds["reference.setup"] = time.monotonic() - started
            # Each phase's wall time, for the record of where an evaluation's seconds go (never evidence of speed).
            t0 = time.monotonic()
            ready = self._candidate_ready()
            out.seconds["candidate.setup"] = time.monotonic() - t0
            if ready:
                t0 = time.monotonic()
                self._checked_calls()
                self._checks_done = True
                out.seconds["checks"] = time.monotonic() - t0
                # Timing only where the checks left a verdict open: wrong outputs, or a finding that already rejects
                # (e.g. the op census in the checked calls), decide it, and a figure would only spend the turn's time.
                if self.cfg.timing and out.failure is None and all(c["passed"] for c in out.comparisons) \
                        and not self._rejected():
                    t0 = time.monotonic()
                    out.measured = Measured()
                    models = self._time(out.measured)
                    out.seconds["timing"] = time.monotonic() - t0
                    out.work = self._ask_ref({"cmd": "work"})["work"]
                    if profile and out.failure is None:
                        self.progress("profile", "profiling the candidate with torch.profiler")
                        out.profile = self._ask_cand({"cmd": "profile"}).get("profile")
                    # Each of the problem's other input sets, timed by the same protocol on bases of its own shapes.
                    variants = [label for label in out.reference["labels"] if label.startswith(VARIANT)]
                    for k, label in enumerate(variants):
                        if any(m.mismatched_calls for m in [out.measured, *out.variants.values()]) or self._rejected():
                            break
                        self.progress("variants", f"timing the problem's other input set {label} ({k + 1} of {len(variants)})")
                        out.variants[label] = Measured()
                        self._time(out.variants[label], variant=k, models=models)
                    out.seconds["timing.variants"] = time.monotonic() - t0 - out.seconds["timing"]
                    self._judge_kernels()
        except _CandidateFailed:
            pass  # Outcome.failure says how; the reference's job still ends cleanly below
        finally:
            t0 = time.monotonic()
            self._finish()
            out.seconds["finish"] = time.monotonic() - t0
        return out

    def _candidate_ready(self) -> bool:
        out = self.outcome
        try:
            self.progress("candidate", "the candidate's job: importing the candidate, loading the reference's weights")
            out.candidate_ready = self._ask_cand(None, self.cfg.limits.wall_seconds + _GRACE)
            weights = self._ask_ref({"cmd": "weights"})
            out.weights = self._ask_cand({"cmd": "construct", "init": weights["init"], "weights": weights["weights"],
                                          "layout": weights["layout"], "weights_seed": weights["weights_seed"]})["weights"]
            return True
        except _CandidateFailed:
            return False

    def _checked_calls(self) -> None:
        out = self.outcome
        labels = out.reference["labels"]
        for index, label in enumerate(labels):
            self.progress("check", f"checking correctness: trial {index + 1} of {len(labels)} ({label})")
            given = self._ask_ref({"cmd": "inputs", "index": index})
            try:
                reply = self._ask_cand({"cmd": "call", "index": index, "layout": given["layout"], "values": given["values"]})
            except _CandidateFailed:
                self._ask_ref({"cmd": "compare", "index": index, "layout": None})  # the problem must run, whatever the candidate did
                return
            self._take_flags(reply)
            compared = self._ask_ref({"cmd": "compare", "index": index, "layout": reply.get("layout")})
            out.outputs = compared["outputs"]
            out.comparisons.append({"index": index, "label": label, **compared["comparison"],
                                    "reference_constants": compared.get("constants")})
        try:
            self._ask_cand({"cmd": "census"})  # its flags are taken like every reply's
        except _CandidateFailed:
            return

    # ------------------------------------------------------------------------------------ timing

    def _time(self, m: Measured, variant: int | None = None, models: list[str] | None = None) -> list[str]:
        """Measure on the main inputs' bases (variant None: torch.compile is compiled here) or variant k's, with the
        baselines measured on the main inputs (`models`); returns the baselines measured."""
        cfg = self.cfg
        t0 = time.monotonic()
        pool_seed = secrets.randbits(62)
        bases = self._ask_ref({"cmd": "bases", "pool_seed": pool_seed, "variant": variant})
        m.harness = str(bases.get("harness", ""))[:600]
        m.same_bases = bases.pop("same_bases", None) is True
        self._eager_checks = bases.get("fused_mix") is True
        self._ask_cand({**bases, "cmd": "bases", "pool_seed": pool_seed})
        if variant is None:
            self.outcome.seconds["timing.bases"] = time.monotonic() - t0
        if models is not None:
            return self._measure(m, models)
        return self._measure(m, ["eager"], compile_after=cfg.compile_baseline and self.compile_ratio is None)

    def _compile(self, m: Measured) -> bool:
        """torch.compile of the reference, in its job; whether it compiled (else m.compile_error says why)."""
        self._stop_candidate()
        self.progress("compile", "compiling the reference with torch.compile (the second baseline)")
        compiled = self._ask_ref({"cmd": "compile"})
        if "error" in compiled:
            m.compile_error = compiled["error"]
            return False
        m.compile_seconds = compiled["seconds"]
        return True

    def _measure(self, m: Measured, models: list[str], compile_after: bool = False) -> list[str]:
        cfg = self.cfg
        # Warm-up: batches like every other (fresh keys, every output checked), doubling until one lasts a batch's
        # length; their times only size the batches. Eager first: a candidate's batch is never given more calls than
        # the reference's job can check in a few of eager's batches.
        target = cfg.target_batch_ms / 1000
        self.progress("warm_up", "warming up and sizing the timed batches (every output checked)")
        t0 = time.monotonic()
        for name in models:
            m.calls[name] = self._autorange(name, target, m, _MAX_CALLS)
        # Never fewer than WIDE_EVERY calls: a timed batch then holds whole runs of keys, one wide call in each, so the
        # share of wide calls is one in WIDE_EVERY whatever the candidate's speed. Runs as long as a shorter batch made
        # every call of the round wide, the baselines' too, for a candidate that slowed its warm-up calls to be timed
        # in batches of one, on a kernel fast only on large inputs (the third red team's w1: 2.5-3.3x its figure on the
        # problem's own inputs).
        m.calls["candidate"] = max(WIDE_EVERY, self._autorange("candidate", target, m,
                                                               _CHECKED_PER_EAGER * m.calls["eager"]))
        if self._eager_checks:
            # Eager's batches run every key the candidate's do: their figures are the reference's outputs' projections
            # and bounds for those keys, so the candidate's calls are checked without running the reference on them
            # again (a longer eager batch only measures eager more closely).
            m.calls["eager"] = max(m.calls["eager"], m.calls["candidate"])
        decided = bool(m.mismatched_calls) or self._rejected()
        # torch.compile (seconds to tens of seconds) only once the candidate's first timed calls have left its verdict
        # open: a wrong timed call or a rejecting finding there (the op census's) ends the turn without it.
        compiling = 0.0
        if compile_after and not decided:
            t1 = time.monotonic()
            compiled = self._compile(m)
            compiling = time.monotonic() - t1
            if compiled:
                models = [*models, "compile"]
                m.calls["compile"] = self._autorange("compile", target, m, _MAX_CALLS)
        if m is self.outcome.measured:
            self.outcome.seconds["timing.warm_up"] = time.monotonic() - t0 - compiling
        if decided:
            return models  # a wrong timed call or a rejecting finding already decides the verdict: no figure is worth measuring
        probes: list[float] = []
        deadline = time.monotonic() + cfg.timing_seconds
        timed = ", ".join(["candidate", *("torch.compile" if x == "compile" else x for x in models)])
        while True:
            self.progress("timing", f"timing round {m.rounds + 1} (at least {cfg.min_rounds}, at most {cfg.max_rounds}): {timed}, "
                                    "each with its null batch, every output checked")
            self._round(models, m, probes, flip=m.rounds % 2 == 1)
            m.rounds += 1
            if m.mismatched_calls or self._rejected():
                break
            if m.rounds >= cfg.min_rounds and _interval_width(_ratios(m.eager, m.candidate)) <= cfg.max_interval_width:
                m.converged = True
                break
            if m.rounds >= cfg.max_rounds or time.monotonic() > deadline:
                break
        return models

    def _autorange(self, name: str, target: float, m: Measured, most: int) -> int:
        calls, spent = 1, 0.0
        unchecked: list[tuple[list[int], Any]] = []
        for attempt in range(18):
            keys = _keys(calls)
            if name == "candidate":
                # Checked together afterwards: in the sequential fallback each check hands the device to the
                # reference's job and back, and these batches only size the timed ones (every output still checked).
                spent, reply = self._run_candidate_batch(keys)
                unchecked.append((keys, reply.get("projections")))
            else:
                spent = self._reference_batch(name, keys)[0]
            # The first batches pay for first launches (lazily loaded kernels, allocator growth): they size nothing.
            if (attempt >= 2 and spent >= target) or calls >= most:
                break
            if attempt >= 1:
                # Straight to the size this batch's time per call predicts, where that is more than twice as many (or
                # once a batch lasted half the target, when the prediction is good): a call of a millisecond reaches a
                # 50 ms batch in two steps instead of six doublings, each one more batch and, for the candidate, more
                # calls for the reference's job to check.
                predicted = _calls(1.1 * target, spent / calls)
                calls = min(predicted if spent >= target / 2 else max(calls * 2, predicted), most)
        for keys, got in unchecked:
            self._check_batch(keys, got, m)
        return min(most, _calls(target, spent / calls))

    def _round(self, models: list[str], m: Measured, probes: list[float], flip: bool) -> None:
        """One round: the candidate's batch and each baseline's, each with its null batch, checked."""
        n_cand = m.calls["candidate"]
        keys = _keys(max(n_cand, *(m.calls[x] for x in models)), run=n_cand)
        order = ["candidate", *models]
        if flip:
            order.reverse()
        times: dict[str, float] = {}
        own_events: float | None = None
        nulls: dict[int, float] = {}
        null_events: dict[int, float] = {}
        own_null: float | None = None
        got: Any = None
        for name in order:
            n = m.calls[name]
            if name == "candidate":
                seconds, reply = self._run_candidate_batch(keys[:n], rewarm=True)
                calls_cpu = self._batch_cpu
                times[name], got, own_events = seconds, reply.get("projections"), _events_per_call(reply, n)
                own_null = self._candidate_null(keys[:n])
                if calls_cpu is not None:
                    # The whole-batch reading is of the rounds' batches only: a warm-up batch's time is the job's to
                    # stretch (it slept 6 s in its first one, and two threads read 0.22 cores: the fourth red team's x3).
                    self.outcome.cpu_seconds += calls_cpu
                    self.outcome.cpu_wall_seconds += seconds
                    # A null batch the job did not run as one (its reply is its word) credits nothing: the round's
                    # calls are then read as its whole batch, as the whole-batch rule reads them.
                    null_cpu = (self._batch_cpu, own_null) if own_null is not None and self._batch_cpu is not None \
                        else (0.0, 0.0)
                    self.outcome.cpu_rounds.append(((calls_cpu, seconds), null_cpu))
            else:
                seconds, probe, _ = self._reference_batch(name, keys[:n], rewarm=True)
                times[name] = seconds
                _note_probe(probe, probes, m)
            if n not in nulls:
                nulls[n], probe, null_events[n] = self._reference_batch("null", keys[:n], events=True, rewarm=True)
                # The null of the candidate's size comes off the candidate's time: work its job left queued on the device
                # would lengthen it, as it would slow a baseline (its probe went unused until session 41).
                _note_probe(probe, probes, m)
        # After the round's eager batch, which ran these keys first where the fused kernels project (_measure).
        self._check_batch(keys[:n_cand], got, m, command="expected")
        m.candidate_rounds.append(CandidateRound(times["candidate"], n_cand, nulls[n_cand],
                                                 own_null if own_null is not None else float("nan"), own_events,
                                                 null_events.get(n_cand, float("nan"))))
        m.null_scale = null_scale(m.candidate_rounds)
        m.candidate, m.candidate_events = [], []
        m.harness_bound.discard("candidate")
        for r in m.candidate_rounds:
            _add_figure(m, "candidate", r.seconds, m.null_scale * r.reference_null, r.calls)
            if r.events_ms is not None and math.isfinite(r.reference_null_events_ms):
                m.candidate_events.append(max(r.events_ms - m.null_scale * r.reference_null_events_ms / r.calls, 0.0))
        for name in models:
            _add_figure(m, name, times[name], nulls[m.calls[name]], m.calls[name])

    def _candidate_null(self, keys: list[int]) -> float | None:
        """The null batch (keyed inputs and projections of stand-in outputs, no call) in the candidate's job, on the
        parent's clock, in seconds; None where the job did not run it. Its projections are not checked: it only ever
        lowers how much comes off the candidate's own time (null_scale)."""
        seconds, reply = self._run_candidate_batch(keys, null=True)
        return seconds if reply.get("null") is True else None

    def _run_candidate_batch(self, keys: list[int], null: bool = False, rewarm: bool = False) -> tuple[float, dict[str, Any]]:
        """One batch of the candidate's on the parent's clock: (seconds, its reply), not checked yet. `rewarm` (a
        round's batch, on the CPU): untimed calls on keys never timed first where the reference's job ran last; like
        the park's extra batch, nothing of theirs is checked or counted, and the CPU reading starts after them."""
        if rewarm and self.cfg.device == "cpu" and self._last_job != "candidate":
            self._ask_cand({"cmd": "batch", "keys": _keys(_REWARM_CALLS), **({"null": True} if null else {})},
                           self._batch_seconds(_REWARM_CALLS))
        self._last_job = "candidate"
        self._stop_candidate()  # a fresh CPU reading (already stopped after any reference batch: nothing to do)
        cpu_before = self.control.cpu_seconds
        self._resume_candidate()
        if self._cand_parked:
            # Back from a park, the first batch would pay for the device memory every later batch reuses (its caching
            # allocator was emptied for the reference's job): an untimed batch of one call, on a key never timed, does.
            self._ask_cand({"cmd": "batch", "keys": _keys(1)}, self._batch_seconds(1))
        self._ask_cand({"cmd": "ping"}, 60.0)  # woken after its stop, and its GPU context current
        try:
            self._cand_keys = keys
            began = self.cand.send({"cmd": "batch", "keys": keys, **({"null": True} if null else {})})
        except ChannelError as exc:
            self._fail("runtime_error", str(exc))
        reply, ended = self._receive_cand(self._batch_seconds(len(keys)))
        self._stop_candidate()
        self._batch_cpu = None
        if cpu_before is not None and self.control.cpu_seconds is not None:
            # Against the batch's own time: the CPU of the rest of the window (the ping, the stop) is ours and small,
            # and a candidate that idles there (in its own process, before the batch) cannot thin the figure out. The
            # rounds add it up (_round), their candidate batches only: a job that idled through its null batches
            # (which hold no call, and whose length is its own to choose) thinned out the threads its calls had used.
            self._batch_cpu = self.control.cpu_seconds - cpu_before
        return ended - began, reply

    def _check_batch(self, keys: list[int], got: Any, m: Measured, command: str = "verify") -> None:
        """Every call's projections against the reference's for the same keys ("expected": from the round's eager
        batch where it ran them, else the reference's job runs them again, as "verify" always does)."""
        verdict = self._ask_ref({"cmd": command, "keys": keys})
        for i, (expected, bounds) in enumerate(zip(verdict["expected"], verdict["bounds"])):
            mine = got[i] if isinstance(got, list) and i < len(got) and isinstance(got[i], list) else []
            m.verified_calls += 1
            if not agree(mine, expected, bounds):
                m.mismatched_calls.append(m.verified_calls - 1)

    def _reference_batch(self, model: str, keys: list[int], events: bool = False,
                         rewarm: bool = False) -> tuple[float, float | None, float]:
        """Time one batch of the reference's on the parent's clock (with the candidate's processes stopped);
        returns seconds, the device probe's time and the batch's device events (ms, or NaN). `rewarm` as for the
        candidate's batches (_run_candidate_batch)."""
        back_from_park = self._ref_parked
        self._hand_to_reference()
        self._stop_candidate()
        switched = self._last_job != "reference"
        self._last_job = "reference"
        # Untimed calls first: back from a park, the allocator's first growth (as for the candidate's,
        # _run_candidate_batch); on the CPU after the candidate's work, the caches (rewarm).
        untimed = max(1 if back_from_park else 0, _REWARM_CALLS if rewarm and switched and self.cfg.device == "cpu" else 0)
        try:
            if untimed:
                self.ref.ask({"cmd": "batch", "model": model, "keys": _keys(untimed)},
                             self._batch_seconds(untimed, reference=True))
            # Woken, its GPU context current, like every timed job; and the device probe, outside the batch's time: the
            # candidate's batches have no probe, so one inside the null batch would be taken off the candidate's time.
            pong = self.ref.ask({"cmd": "ping", "probe": True}, 60.0)
            began = self.ref.send({"cmd": "batch", "model": model, "keys": keys})
            reply, ended = self.ref.receive(self._batch_seconds(len(keys), reference=True))
        except ChannelError as exc:
            raise ProblemFailed(f"the reference's {model} batch failed: {exc}") from exc
        if model == "null":
            self.kernels.reference_null(reply, keys)
        probe, ms = pong.get("probe_ms"), reply.get("events_ms")
        return (ended - began, float(probe) if isinstance(probe, (int, float)) else None,
                float(ms) if isinstance(ms, (int, float)) else float("nan"))

    def _batch_seconds(self, calls: int, reference: bool = False) -> float:
        limits = self.cfg.reference_limits if reference else self.cfg.limits
        return float(limits.wall_seconds) + _GRACE

    # ------------------------------------------------------------------------------------ plumbing

    def _stop_candidate(self) -> None:
        if not self.control.stopped:
            stopped = self.control.stop()
            # A stop the zygote did not acknowledge in time, of a job still running, left it running beside whatever
            # the parent timed next, and its CPU reading stale: never taken for a stop (a job can slow the zygote's
            # walk of its processes, e.g. with a crowd of them).
            unconfirmed = not stopped and self.cand.alive()
            if (self.control.escaped or unconfirmed) and not any(f["flag"] == ESCAPED.value for f in self.outcome.flags):
                # Read by the zygote, outside the candidate's processes: one of them still ran after the stop.
                self.outcome.flags.append({"flag": ESCAPED.value, "detail": (
                    "some process of the candidate's job was still running when it should have been stopped (it "
                    "forked faster than the sandbox could freeze it), so it could run while the baselines were timed: "
                    "do all work inside forward, in the job's own process, without forking")})
            if stopped:
                self._hold_files_to_the_protocol()  # frozen: what it holds there now it holds while the reference works

    def _resume_candidate(self) -> None:
        if self.control.stopped:
            self.control.resume()

    def _hand_to_reference(self) -> None:
        """In the sequential fallback, the candidate's job parks its device state before the reference's works (it is
        stopped again afterwards if it was). A candidate that keeps its memory anyway can only make the reference's
        job run out of it: a capacity verdict, never an accepted one (docs/threat-model.md)."""
        self._ref_parked = False
        if self.park and not self._cand_parked and self.outcome.failure is None and self.outcome.candidate_ready:
            stopped = self.control.stopped
            self._ask_cand({"cmd": "park"}, hand_over=False)
            self._cand_parked = True
            if stopped:
                self._stop_candidate()

    def _hand_to_candidate(self) -> None:
        self._cand_parked = False
        if self.park and not self._ref_parked:
            self._ask_ref({"cmd": "park"}, hand_over=False)
            self._ref_parked = True

    def _ask_ref(self, command: dict[str, Any] | None, seconds: float | None = None,
                 hand_over: bool = True) -> dict[str, Any]:
        """A command to the reference's job (None: its ready line); its failure is the problem's."""
        try:
            if command is not None:
                if hand_over:
                    self._hand_to_reference()
                self._last_job = "reference"  # whatever it runs there (a "verify" runs the reference) fills the caches
                self.ref.send(command)
            reply, _ = self.ref.receive(seconds or float(self.cfg.reference_limits.wall_seconds) + _GRACE)
        except JobFailed as exc:
            raise ProblemFailed(str(exc)) from exc
        except ChannelError as exc:
            raise ProblemFailed(f"the reference's job stopped answering: {exc}") from exc
        if command is not None and "layout" in reply:  # tensors it wrote to the exchange file (weights, inputs, bases)
            needed = tensor_file.needed_bytes(reply["layout"], self._file_sizes["exchange"])
            self.needed["exchange"] = max(self.needed["exchange"], needed)
        return reply

    def _ask_cand(self, command: dict[str, Any] | None, seconds: float | None = None,
                  hand_over: bool = True) -> dict[str, Any]:
        if command is not None:
            if hand_over:
                self._hand_to_candidate()
            self._resume_candidate()
            if command.get("cmd") == "batch":
                self._cand_keys = list(command["keys"])
            elif command.get("cmd") == "bases":
                self.kernels.bases_sent()
            elif command.get("cmd") == "call":
                self._cand_call = int(command["index"])
            elif command.get("cmd") == "profile":
                self.watch.extra += 2  # the profiler's record functions on, and off again
            try:
                self.cand.send(command)
            except ChannelError as exc:
                self._fail("runtime_error", str(exc))
        return _CandidateReply(self._receive_cand(seconds or float(self.cfg.limits.wall_seconds) + _GRACE)[0], self._fail)

    def _forbidden(self, source: str, found: list[str]) -> None:
        """What a signed record judged here found (the observer's counts, the kernel census): a `forbidden_torch_op` of
        the parent's own, once."""
        if found and not any(f["flag"] == Flag.FORBIDDEN_TORCH_OP.value for f in self.outcome.flags):
            self.outcome.flags.append({"flag": Flag.FORBIDDEN_TORCH_OP.value, "detail": f"{source}: " + "; ".join(found)})

    def _watched(self, found: list[str]) -> None:
        self._forbidden("the ATen observer (its counts, signed in the candidate's job and judged by the parent)", found)

    def _judge_kernels(self) -> None:
        """The kernel census over every batch of the candidate's (kernel_census.py)."""
        self.outcome.kernel_census = self.kernels.summary()
        self._forbidden("the kernel census (CUPTI's records of every kernel the device ran, judged by the parent)",
                        self.kernels.findings())

    def _rejected(self) -> bool:
        """Whether a finding so far (the candidate's job's, e.g. the timed calls' op census, or the zygote's) already
        rejects the candidate: more rounds would only spend the turn's time on a figure no verdict will carry. Its
        outputs were right (timing runs only then), so any rejecting flag decides (judge.py)."""
        return any(f["flag"] in _REJECTING for f in self.outcome.flags)

    def _take_flags(self, reply: dict[str, Any]) -> None:
        """The candidate's own in-process findings: they can only count against it (judge.py). Only names of Flag
        are taken, each once, and only the first _FLAGS_PER_REPLY entries of a reply are read: a reply of 45,000
        made-up names, each checked against every name kept, held the parent for a minute (the fourth red team's x4;
        a 4 MiB reply would have held it half an hour)."""
        flags = reply.get("flags")
        taken = {f["flag"] for f in self.outcome.flags}
        for finding in flags[:_FLAGS_PER_REPLY] if isinstance(flags, list) else []:
            name = finding.get("flag") if isinstance(finding, dict) else None
            if isinstance(name, str) and name in _FLAG_NAMES and name not in taken:
                taken.add(name)
                self.outcome.flags.append({"flag": name, "detail": str(finding.get("detail", ""))[:2000]})

    def _receive_cand(self, seconds: float) -> tuple[dict[str, Any], float]:
        try:
            reply = self.cand.receive(seconds)
            self._take_flags(reply[0])
            if self.cand.last_command == "batch":
                self.kernels.candidate_batch(reply[0], self._cand_keys)
                self._watched(self.watch.reply(reply[0], kernel_census.batch_token(self._cand_keys), len(self._cand_keys)))
            elif self.cand.last_command == "call":
                self._watched(self.watch.reply(reply[0], kernel_census.batch_token([-1 - self._cand_call]), 1))
            if self.cand.last_command == "call" and "layout" in reply[0]:
                # Its outputs, as the reference's job reads them (the entries ("out", 0), ("out", 1), ...): outputs of the
                # wrong shapes are the comparison's to judge, whatever they hold is theirs; nothing else is.
                needed = tensor_file.needed_bytes(reply[0]["layout"], self._file_sizes["outputs"], "out")
                self.needed["outputs"] = max(self.needed["outputs"], needed)
            self._hold_files_to_the_protocol()
            return reply
        except JobFailed as exc:
            self._take_flags(exc.reply)
            kind = exc.reply.get("kind") if exc.reply.get("kind") in ("build_error", "runtime_error", "unbuilt") \
                else "runtime_error"
            if kind == "unbuilt" and self._checks_done:
                # A restart would drop the batches not yet checked and let the job keep whichever session's times it
                # liked best (the third red team's w2): the candidate's own failure instead.
                self._fail("runtime_error", "the candidate asked for a new extension after its checked calls, in which it "
                                            "had already been called on every input shape it is timed on; build every "
                                            f"extension by the first call of each shape: {exc}")
            if kind == "unbuilt":
                specs = exc.reply.get("specs")
                self.outcome.unbuilt = [s for s in specs if isinstance(s, dict)][:8] if isinstance(specs, list) else []
                if not self.outcome.unbuilt:
                    kind = "runtime_error"
            if kind == "build_error":
                self.outcome.candidate_ready = {"build_records": exc.reply.get("build_records", []),
                                                "log": str(exc.reply.get("log", ""))[-20000:]}
            self._fail(kind, str(exc))
        except ChannelError as exc:
            self._fail("runtime_error", str(exc))
        raise AssertionError("unreachable")

    def _hold_files_to_the_protocol(self) -> None:
        """End the evaluation as the candidate's failure where either file holds more than the protocol put there: the
        reference's tensors in the exchange file, the candidate's outputs in the outputs file (the most of any checked
        call; every writer starts at the file's beginning). Each job maps both files, and stores through a shared mapping
        are not writes its file-size rlimit stops; once unmapped, the pages are in no process's resident memory, so the
        zygote's watch never counts them (the red team's h3: gigabytes written anywhere in the two 16 GiB files). Read
        after every reply of the candidate's job and after every stop of it: while anything is timed or checked, its
        job holds no more there than its outputs."""
        over = []
        for name, fd in self._files.items():
            held, needed = tensor_file.held_bytes(fd), max(self.needed[name], self._held_at_start[name])
            if held > needed:
                what = "the outputs it handed over" if name == "outputs" else "the reference's tensors"
                over.append(f"the {name} file holds {size_text(held)}, where {what} need at most {size_text(needed)}")
        if over:
            self._fail("runtime_error", "the candidate's job wrote into the files the parent lent it beyond what the "
                       f"protocol put there: {'; '.join(over)}. Pages written into these files (through a mapping, say) "
                       "count in no process's resident memory and so against none of the job's limits: nothing but the "
                       "outputs may be written there")

    def _fail(self, kind: str, message: str) -> None:
        if self.outcome.failure is None:
            self.outcome.failure = (kind, message)
        raise _CandidateFailed(message)

    def _finish(self) -> None:
        """Both jobs told to exit (and their results awaited: the sandbox reaps and limits them)."""
        out = self.outcome
        for end, future, resume in ((self.cand, self._cand_job, True), (self.ref, self._ref_job, False)):
            if resume:
                self._resume_candidate()
            if not future.done():
                try:
                    end.send({"cmd": "exit"})
                except ChannelError:
                    pass
            end.close()
        for job, end in (("reference", self.ref), ("candidate", self.cand)):
            out.seconds.update({f"commands.{job}.{name}": spent for name, spent in end.ledger.items()})
        # Both jobs awaited and the pool's threads ended whatever either raised: a thread left waiting on a sandbox
        # that the evaluator then closed held the process at its exit (the CLI hung after its traceback).
        try:
            try:
                out.candidate_job = self._cand_job.result()
            except SandboxLost as exc:
                out.candidate_job = self._lost_candidate(exc)
        finally:
            try:
                # The reference's sandbox dying is the engine's failure, never the candidate's: it is raised.
                out.reference_job = self._ref_job.result()
            finally:
                self.control.close()
                self._pool.shutdown(wait=True)

    def _lost_candidate(self, exc: SandboxLost) -> JobResult:
        """The candidate's sandbox died under its job (or broke the harness around it): nothing runs there but that job
        and our supervisor of it, which catches no signal a job can send (sandbox/zygote.py, deaf_to_signals), so it is
        the candidate's runtime error, whatever its job had answered before. Returns a stand-in for the job's result,
        with what its job wrote to stdout and stderr by then."""
        out = self.outcome
        before = out.failure[1] if out.failure is not None else ""
        out.failure = ("runtime_error", f"the candidate's sandbox died during its job: {exc}"
                                        + (f"\nbefore that: {before}" if before else ""))
        return JobResult(exit_code=None, signal=None, killed=None, seconds=0.0, result=b"", stdout=exc.stdout,
                         stderr=exc.stderr, isolation="unknown: the sandbox died during the job")


class _CandidateFailed(Exception):
    """The candidate's job failed or stopped answering; Outcome.failure says how."""


class _CandidateReply(dict):
    """A reply of the candidate's job: a field the parent reads and the reply lacks is the job's failure, never the
    engine's KeyError (a construct reply without "weights" ended the evaluation with no verdict: the eighth red team)."""

    def __init__(self, reply: dict[str, Any], fail: Any) -> None:
        super().__init__(reply)
        self._fail = fail

    def __missing__(self, key: str) -> Any:
        self._fail("runtime_error", f"the candidate's job answered without {key!r} (its harness was changed?)")


def _keys(n: int, run: int | None = None) -> list[int]:
    """n fresh keys in runs of `run` (default: n, at most WIDE_EVERY), each run with exactly one wide key (keyed.is_wide)
    at a random place; a last, shorter run holds its wide key with the chance of its length. So a batch of `run` keys or
    more always has one, and every batch over the same keys the same share of them: a round's batches all take their
    keys from one such list, whose runs are the candidate's batch (or WIDE_EVERY) long, so that no baseline is timed on
    fewer wide calls than the candidate. A forward counting its calls cannot tell which of a run's is the wide one.
    Whether a wide key is a wide call is the problem's (keyed.wide_sign): where the reference allows no sign, none is."""
    run = max(1, min(WIDE_EVERY, n if run is None else run))
    keys: list[int] = []
    for start in range(0, n, run):
        slot = secrets.randbelow(run)
        keys += [_key(wide=i == slot) for i in range(min(run, n - start))]
    return keys


def _key(wide: bool) -> int:
    while True:  # one draw in WIDE_EVERY is wide: a few draws at most, almost always
        key = secrets.randbits(62)
        if is_wide(key) == wide:
            return key


def _events_per_call(reply: dict[str, Any], calls: int) -> float | None:
    """A batch's device events per call (ms), the candidate's own word: a cross-check, never the figure."""
    ms = reply.get("events_ms")
    return float(ms) / calls if isinstance(ms, (int, float)) and math.isfinite(ms) else None


def _calls(target_seconds: float, per_call_seconds: float) -> int:
    return int(min(_MAX_CALLS, max(_MIN_CALLS, math.ceil(target_seconds / max(per_call_seconds, 1e-7)))))


def _note_probe(probe: float | None, probes: list[float], m: Measured) -> None:
    """A reference batch's device probe (on a GPU; None elsewhere), taken just before it with the candidate's processes
    stopped: one that took _CONTENDED times the fastest found the device busy with other work, work the candidate's job
    left queued among it, and the figures are then no headline (judge: noisy_timing)."""
    if probe is None:
        return
    probes.append(probe)
    if probe > _CONTENDED * min(probes):
        m.contended += 1


def _add_figure(m: Measured, name: str, seconds: float, null: float, calls: int) -> None:
    """Append one batch's time per call (ms) to m's figures of `name`, the harness's share `null` (s) taken off; where
    that is nearly all of the batch, 2% of it is kept, so that a call too short to see next to it is not reported as
    taking no time at all."""
    raw = seconds * 1000 / calls
    per_call = max((seconds - null) * 1000 / calls, 0.02 * raw)
    if per_call <= 0.02 * raw:
        m.harness_bound.add(name)
    getattr(m, name).append(per_call)


def null_scale(rounds: list[CandidateRound]) -> float:
    """How much of the reference's null batch comes off the candidate's batches: the median, over the rounds, of the
    candidate's own null over the reference's, taken at the high end of its 90% interval and never above 1 (1 where its
    job ran none).

    The same harness code runs a few percent apart in two processes (where each job's buffers lie: docs/benchmarks.md
    §15, sessions 16 and 19), and with a harness several times a short call that moved identical code by up to a
    quarter either way; the candidate's own null measures its process's side. Its job can make that null anything, so
    the figure may only ever lose by it: a slower own null is capped at the reference's (scale 1: the figure the
    reference's null alone gives), a faster one takes less off the candidate's own time. One scale for the whole
    evaluation, and the paired reference null of each round still carries that round's load: a per-round smaller of
    the two nulls took off the luckier of two noisy draws, and let a candidate pick, round by round, which of its
    batches looked fastest. The interval's high end, not the median itself: the cap at 1 would otherwise turn noise
    alone into a bias against the candidate (a scale below 1 only where its process is surely the faster)."""
    ratios = [r.own_null / r.reference_null for r in rounds if math.isfinite(r.own_null) and r.reference_null > 0]
    if not ratios:
        return 1.0
    return min(1.0, max(median_interval(ratios)[2], 0.0))


def _ratios(baseline: list[float], candidate: list[float]) -> list[float]:
    return [b / c for b, c in zip(baseline, candidate) if c > 0]


def median_interval(samples: list[float]) -> tuple[float, float, float]:
    """The median and a distribution-free interval for it of at least 90% coverage (order statistics of a
    binomial): (median, low, high). With fewer than 5 samples the interval is the whole range."""
    ordered = sorted(samples)
    n = len(ordered)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    # [x_k, x_(n-1-k)] holds the median unless at most k samples fall on one side: coverage 1 - 2 P(B <= k), B ~
    # Binomial(n, 1/2). The largest k that keeps it at 90% or more (k = 0, the whole range, below 5 samples).
    k = 0
    while k + 1 <= n - 2 - k and 2 * _binomial_cdf(k + 1, n) <= 0.10:
        k += 1
    return median, ordered[k], ordered[n - 1 - k]


def _binomial_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def keeps_compile_baseline(m: Measured, max_width: float) -> bool:
    """Whether torch.compile's time against eager's, as this evaluation measured it, is steady enough to be stored and
    reused by later evaluations of the problem: both measured, the ratio's own interval at most `max_width`, no
    contended baseline batch and no wrong timed call. The candidate's own noise does not count: it would leave every
    later turn compiling the reference again (on a loaded 2-core box ~20 s a turn: docs/benchmarks.md §15, session 18),
    and the candidate's processes are stopped while the baselines run."""
    return bool(m.compile and m.eager and not m.contended and not m.mismatched_calls
                and _interval_width(_ratios(m.eager, m.compile)) <= max_width)


def _interval_width(samples: list[float]) -> float:
    median, low, high = median_interval(samples)
    return (high - low) / median if median and median > 0 else float("inf")


def check_reference(sandbox: Sandbox, cfg: EvalConfig, payload: dict[str, Any], env: dict[str, str],
                    exchange_fd: int) -> dict[str, Any]:
    """The reference's job alone (an upload's check): set up, one call, its outputs' shapes and the work."""
    end = ParentEnd()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kstudio-check")
    job = pool.submit(sandbox.run, Job("agent.engine.evaluate.reference_job:reference", payload, device=cfg.device,
                                       limits=cfg.reference_limits, env=env, fds=(*end.job_fds(), exchange_fd, exchange_fd)))
    end.alive = lambda: not job.done()
    seconds = float(cfg.reference_limits.wall_seconds) + _GRACE  # the sandbox's own limit ends a hang first
    try:
        ready = end.receive(seconds)[0]
        end.send({"cmd": "inputs", "index": 0})
        end.receive(seconds)
        end.send({"cmd": "compare", "index": 0, "layout": None})
        compared = end.receive(seconds)[0]
        end.send({"cmd": "work"})
        work = end.receive(seconds)[0]["work"]
        end.send({"cmd": "exit"})
    except ChannelError as exc:
        end.close()
        result = job.result()
        if result.killed or result.signal or result.exit_code:
            raise ProblemFailed(describe_failure(result, "the problem")) from exc
        detail = f" ({result.stderr.strip()[-2000:]})" if result.stderr.strip() else ""
        raise ProblemFailed(f"{exc}{detail}") from exc
    finally:
        end.close()
        job.result()
        pool.shutdown(wait=True)
    return {"outputs": compared["outputs"], "returns_sequence": compared.get("returns_sequence", False), "work": work,
            "hardware": ready.get("hardware"), "toolchain": ready.get("toolchain")}


def describe_failure(out: JobResult, what: str) -> str:
    if out.killed == "memory":
        return f"{what} exceeded the memory limit and was killed"
    if out.killed == "processes":
        return f"{what} started too many processes and was killed"
    if out.killed == "wall_time":
        return f"{what} ran past its wall-clock limit and was killed"
    # A process inside the sandbox's own namespace shows its signal as the exit code 128 + N.
    number = out.signal or (out.exit_code - 128 if out.exit_code and 128 < out.exit_code < 128 + 65 else None)
    if number == signal.SIGKILL:
        # Nothing of ours kills with SIGKILL without saying so (out.killed): the kernel's out-of-memory killer does.
        return (f"{what} was killed by SIGKILL, most often because the machine ran out of memory (the kernel's "
                f"out-of-memory killer)" + (f"\n{out.stderr[-2000:]}" if out.stderr.strip() else ""))
    if number:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"{what} crashed: killed by {name}" + (f"\n{out.stderr[-2000:]}" if out.stderr.strip() else "")
    tail = out.stderr.strip()[-3000:]
    return f"{what} exited with code {out.exit_code}" + (f":\n{tail}" if tail else " and printed nothing")
