"""The verdict: the one structured judgement of a candidate that the agent, the studio and the trainer read.

Versioned and JSON-serializable. Bump VERDICT_VERSION when a field changes meaning or goes away.
"""
from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field
from typing import Any

VERDICT_VERSION = 1

# Captured logs are capped so a candidate that prints in a loop cannot bloat a verdict.
LOG_CAP_BYTES = 16_384


class Status(str, enum.Enum):
    ACCEPTED = "accepted"
    INCORRECT = "incorrect"
    BUILD_ERROR = "build_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    # The problem does not fit the device (agent/engine/evaluate/memory.py), or the engine's own side ran out of memory:
    # the engine's limit, never the candidate's failure. Not a reward either way (agent/loop/runner.py).
    CAPACITY = "capacity"


class Stage(str, enum.Enum):
    """How far the evaluation got; the verdict's status says how it ended there."""

    VALIDATE = "validate"
    PLAN = "plan"  # the memory plan, from the problem's footprint (agent/engine/evaluate/memory.py)
    BUILD = "build"
    REFERENCE = "reference"
    LOAD = "load"
    CORRECTNESS = "correctness"
    TIMING = "timing"
    DONE = "done"


class Flag(str, enum.Enum):
    """Named findings. Every flag in REJECTING_FLAGS stops a candidate from being accepted."""

    INPUT_MUTATED = "input_mutated"
    OUTPUT_ALIASES_INPUT = "output_aliases_input"
    OUTPUT_ALIASES_PARAMETER = "output_aliases_parameter"
    STALE_OUTPUT = "stale_output"
    FORBIDDEN_TORCH_OP = "forbidden_torch_op"
    WORK_AFTER_RETURN = "work_after_return"
    BACKGROUND_THREAD = "background_thread"
    SIDE_STREAM = "side_stream"
    TIMER_TAMPERING = "timer_tampering"
    NOT_A_PLAIN_TENSOR = "not_a_plain_tensor"
    PRECISION_DOWNGRADE = "precision_downgrade"
    OUTPUT_METADATA = "output_metadata"
    TIMED_OUTPUT_MISMATCH = "timed_output_mismatch"
    CPU_OVER_THREADS = "cpu_over_threads"
    INPUT_DEPENDENT_CACHING = "input_dependent_caching"
    BEYOND_ROOFLINE = "beyond_roofline"
    CLOCKS_DISAGREE = "clocks_disagree"
    NEAR_ZERO_REFERENCE = "near_zero_reference"
    CONSTANT_REFERENCE = "constant_reference"
    ILL_CONDITIONED_REFERENCE = "ill_conditioned_reference"
    NOISY_TIMING = "noisy_timing"


# Findings read off the timing of a candidate whose outputs were right; with wrong outputs the
# verdict is "incorrect" whatever the clocks said (a kernel that skips work is fast for that reason).
TIMING_FLAGS = frozenset({"timed_output_mismatch", "beyond_roofline", "clocks_disagree", "cpu_over_threads"})

REJECTING_FLAGS = frozenset(
    {
        Flag.INPUT_MUTATED,
        Flag.OUTPUT_ALIASES_INPUT,
        Flag.OUTPUT_ALIASES_PARAMETER,
        Flag.STALE_OUTPUT,
        Flag.FORBIDDEN_TORCH_OP,
        Flag.WORK_AFTER_RETURN,
        Flag.BACKGROUND_THREAD,
        Flag.SIDE_STREAM,
        Flag.TIMER_TAMPERING,
        Flag.NOT_A_PLAIN_TENSOR,
        Flag.PRECISION_DOWNGRADE,
        Flag.OUTPUT_METADATA,
        Flag.TIMED_OUTPUT_MISMATCH,
        Flag.CPU_OVER_THREADS,
        Flag.INPUT_DEPENDENT_CACHING,
        Flag.BEYOND_ROOFLINE,
        Flag.CLOCKS_DISAGREE,
    }
)


@dataclass
class Finding:
    flag: Flag
    detail: str


@dataclass
class TrialResult:
    """One correctness trial: fresh inputs of one distribution, compared output by output."""

    index: int
    distribution: str
    passed: bool
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    mismatched: int = 0
    numel: int = 0
    note: str = ""


@dataclass
class Spread:
    """Summary of repeated timings, in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    iterations: int

    @property
    def relative_iqr(self) -> float:
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms > 0 else 0.0


@dataclass
class Timing:
    candidate_ms: float
    eager_ms: float
    compile_ms: float | None
    speedup_vs_eager: float
    speedup_vs_compile: float | None
    candidate: Spread
    eager: Spread
    compile: Spread | None
    clock: str  # "parent": the trusted parent's clock over timed batches (docs/threat-model.md)
    host_candidate_ms: float | None = None  # the parent clock's median per call, before any refinement
    compile_note: str = ""
    speedup_vs_best: float | None = None  # against the faster of eager and torch.compile: the headline
    interval_vs_eager: list[float] | None = None  # [low, high]: a >= 90% interval for the median speedup
    interval_vs_compile: list[float] | None = None
    interval_vs_best: list[float] | None = None
    rounds: int = 0  # rounds of interleaved batches (candidate, eager, torch.compile, null)
    calls_per_batch: dict[str, int] = field(default_factory=dict)
    verified_calls: int = 0  # timed calls whose outputs the reference's job checked (all of them)
    device_events_ms: float | None = None  # the candidate's own device events per call: a cross-check only
    # The share of each round's null batch (the reference's job's) taken off the candidate's batches: at most 1, less
    # where the candidate's own null batches show its process runs the harness faster (session.null_scale).
    null_scale: float = 1.0
    note: str = ""
    measured_by: dict[str, str] = field(default_factory=dict)  # which process measured each figure
    # Each of the problem's input variants (get_input_variants), timed by the same protocol on its own shapes:
    # {"label", "candidate_ms", "eager_ms", "compile_ms", "speedup_vs_eager", "speedup_vs_compile", "speedup_vs_best",
    #  "interval_vs_best", "rounds", "verified_calls", "converged"}. The headline figures above are the main inputs'.
    variants: list[dict[str, Any]] = field(default_factory=list)
    # Speed of light (agent/engine/evaluate/judge.py _speed_of_light): the least time the problem's work takes at the device's
    # measured peaks (the peaks job, cached in the trusted store), over the candidate's time. 1.0 is the roof.
    sol_fraction: float | None = None
    sol_ms: float | None = None
    # How the timed calls' inputs were mixed and their outputs projected (agent/engine/evaluate/keyed.py): "fused GPU
    # kernels (keyed_cuda.py)", or "torch ops (why)". Both jobs alike; the harness's share is taken off either way.
    harness: str = ""
    sol_bound: str = ""  # "memory" or "compute": which roof sets sol_ms
    achieved_bytes_per_s: float | None = None
    achieved_flops_per_s: float | None = None
    peaks: dict[str, Any] = field(default_factory=dict)  # the device's measured peaks the fraction is taken against
    # CPU evaluations: the candidate job's CPU time over its batches' time on the parent's clock, as the zygote read it
    # (agent/engine/evaluate/cpu_share.py); more than 1.1 per allowed thread is cpu_over_threads.
    cpu_cores: float | None = None
    # The same for the calls alone: each timed batch less the candidate's own null batch of the same keys (the harness
    # without the calls), the null credited up to the allowed threads. Also more than 1.1 per thread is cpu_over_threads.
    cpu_cores_calls: float | None = None


@dataclass
class BuildInfo:
    backend: str
    seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    fast_path: str = ""
    log: str = ""
    # Each extension's binary: module name -> the sha256 the trusted side recorded when it installed it.
    artifacts: dict[str, str] = field(default_factory=dict)


@dataclass
class Verdict:
    status: Status
    stage: Stage
    message: str
    correct: bool = False
    flags: list[Finding] = field(default_factory=list)
    trials: list[TrialResult] = field(default_factory=list)
    timing: Timing | None = None
    build: BuildInfo | None = None
    weights: str = ""  # "copied" from the reference, or "seeded" (both built under one seed)
    device: str = "cpu"
    stdout: str = ""
    stderr: str = ""
    toolchain: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    # The memory plan (agent/engine/evaluate/memory.py MemoryPlan.to_dict()): footprint, budget, mode; None where none was made.
    memory: dict[str, Any] | None = None
    # The kernel census on a GPU (evaluate/kernel_census.py Judge.summary()): whether the parent judged CUPTI's records
    # of every kernel the candidate's job ran, over how many batches, and its kernels by device time; None on the CPU.
    kernel_census: dict[str, Any] | None = None
    version: int = VERDICT_VERSION

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED

    def flag_names(self) -> list[str]:
        return [f.flag.value for f in self.flags]

    def device_seconds(self) -> float:
        """The seconds this evaluation held the device: its two-job session and any ncu profile (the build runs on
        the host's CPU). Budgets and quotas count these."""
        return device_seconds(self.seconds)

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        data = dict(data)
        if data.get("version") != VERDICT_VERSION:
            raise ValueError(f"verdict version {data.get('version')!r} is not {VERDICT_VERSION}")
        data["status"] = Status(data["status"])
        data["stage"] = Stage(data["stage"])
        data["flags"] = [Finding(Flag(f["flag"]), f["detail"]) for f in data.get("flags", [])]
        data["trials"] = [TrialResult(**{**t, **{k: float(t[k]) for k in _TRIAL_FLOATS}}) for t in data.get("trials", [])]
        if data.get("timing"):
            t = dict(data["timing"])
            for key in ("candidate", "eager", "compile"):
                t[key] = Spread(**t[key]) if t.get(key) else None
            data["timing"] = Timing(**t)
        if data.get("build"):
            data["build"] = BuildInfo(**data["build"])
        return cls(**data)


# The verdict's `seconds` phases that hold the device (sub-phases such as "session.timing" lie inside "session").
DEVICE_PHASES = ("session", "profile")


def device_seconds(seconds: dict[str, Any] | None) -> float:
    """Device seconds from a verdict's `seconds` (a stored verdict's dict too); unreadable entries count as 0."""
    if not isinstance(seconds, dict):
        return 0.0
    total = 0.0
    for phase in DEVICE_PHASES:
        try:
            value = float(seconds.get(phase) or 0.0)
        except (TypeError, ValueError):
            continue
        total += value if math.isfinite(value) and value > 0 else 0.0
    return total


_TRIAL_FLOATS = ("max_abs_error", "max_rel_error", "atol", "rtol")


def cap_log(text: str, limit: int = LOG_CAP_BYTES) -> str:
    """Keep the head and the tail: the first error and the last words both matter."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no infinity or NaN (Postgres jsonb and browsers refuse them): "inf", "-inf", "nan",
        # which float() reads back (from_dict does).
        return str(value)
    return value
