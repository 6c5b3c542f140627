"""Evaluation settings: one dataclass, a help string on every field, validated on creation."""
from __future__ import annotations

from dataclasses import dataclass, field

from agent.engine.backends import BACKENDS, in_words
from agent.engine.sandbox import Limits

# Default compute ops a candidate may leave to PyTorch: GEMM and convolution families, as CUDA
# Agent's rules allow cuBLAS/cuDNN. Names are ATen overload packets (what a dispatch mode sees).
GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "dot", "mv", "addmv", "addbmm", "_scaled_mm"})
CONV_OPS = frozenset({
    "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "cudnn_convolution", "cudnn_convolution_transpose", "mkldnn_convolution",
    "convolution_overrideable", "_nnpack_spatial_convolution", "_slow_conv2d_forward", "slow_conv3d_forward",
    "slow_conv_transpose2d", "slow_conv_transpose3d", "_conv_depthwise2d", "slow_conv_dilated2d",
})
OP_FAMILIES = {"gemm": GEMM_OPS, "conv": CONV_OPS}

# In an allow-list, every op (EvalConfig.allow_any_torch_op).
ANY_OP = "*"

DISTRIBUTIONS = ("problem", "mixed_sign", "scaled_large", "scaled_small")


@dataclass(frozen=True)
class EvalConfig:
    device: str = field(default="cpu", metadata={"help": "Where the candidate runs: \"cpu\" or \"cuda\"."})
    backend: str | None = field(default=None, metadata={
        "help": "One of agent.engine.backends.BACKENDS (cuda, nvrtc, triton, cpp); None guesses from the source (static "
                "analysis)."})
    trials: int = field(default=2, metadata={
        "help": "Trials on fresh inputs from the problem's own get_inputs() (each with a new secret seed)."})
    distributions: tuple[str, ...] = field(default=("mixed_sign", "scaled_large", "scaled_small"), metadata={
        "help": "Extra trials, one per distribution, replacing floating inputs' values (same shapes)."})
    allowed_op_families: tuple[str, ...] = field(default=("gemm", "conv"), metadata={
        "help": "PyTorch compute op families the candidate may call (see OP_FAMILIES)."})
    allowed_ops: tuple[str, ...] = field(default=(), metadata={
        "help": "Further ATen op names the candidate may call, on top of the families."})
    allow_any_torch_op: bool = field(default=False, metadata={
        "help": "Sanity sweeps only (benchmarks/kernelbench_sweep.py, KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP): the candidate may "
                "call any PyTorch op, so that a problem's own code as its candidate (ModelNew = Model) is accepted at about "
                "1.0x. Never for real candidates: a PyTorch fallback would pass as a kernel."})
    rtol: float | None = field(default=None, metadata={
        "help": "Relative tolerance; None picks by dtype (float32 1e-4, float16 1e-2, bfloat16 2e-2)."})
    atol_scale: float | None = field(default=None, metadata={
        "help": "Absolute tolerance as a fraction of the reference's largest magnitude; None picks by dtype."})
    wide_timed_calls: bool = field(default=True, metadata={
        "help": "One timed call in every WIDE_EVERY (8) on inputs scaled by WIDE_SCALE (x100, the scaled_large checked call's "
                "factor), at a position in its run of 8 no call can know, where the reference stays finite there: a forward "
                "that tells timed calls from checked ones cannot then time a kernel right only on the problem's own "
                "distribution (keyed.py). On the CPU and the GPU alike (docs/benchmarks.md §15, sessions 36 and 37); False "
                "only to measure what they cost."})
    timing: bool = field(default=True, metadata={"help": "Measure the candidate and the baselines."})
    compile_baseline: bool = field(default=True, metadata={
        "help": "Also time torch.compile of the reference (cached per problem, toolchain and device)."})
    min_rounds: int = field(default=5, metadata={
        "help": "Rounds of interleaved timed batches (the candidate's, eager's, torch.compile's, the null batch) at least."})
    max_rounds: int = field(default=15, metadata={
        "help": "Rounds at most, while the speedup's interval is wider than max_interval_width."})
    max_interval_width: float = field(default=0.15, metadata={
        "help": "How wide (relative to the median) the speedup's 90% interval may be; a wider one is re-measured with more "
                "rounds, and flagged noisy_timing if it stays so (never a headline)."})
    batch_ms: float | None = field(default=None, metadata={
        "help": "Length of each timed batch on the parent's clock; None: 50 ms, so that the pipe's round trip and each job's "
                "fixed cost per batch stay small beside it (on the H100 20 ms batches left identical code at 0.87-1.02x, "
                "50 ms ones at 0.96-1.05x: docs/benchmarks.md §15)."})
    timing_seconds: float = field(default=120.0, metadata={
        "help": "Time the rounds may take in all; a timing cut short is flagged noisy_timing."})
    threads: int = field(default=1, metadata={
        "help": "CPU threads every job of an evaluation uses alike (torch, OpenMP, MKL): baselines and candidate on equal "
                "terms."})
    profile: bool = field(default=False, metadata={
        "help": "Attach a profiler summary (ncu where present on GPUs, torch.profiler otherwise)."})
    seed: int | None = field(default=None, metadata={
        "help": "Fix the secret seed (tests and reproductions); None draws a fresh one per evaluation."})
    limits: Limits = field(default_factory=Limits, metadata={"help": "Limits for the candidate's child process."})
    reference_limits: Limits = field(default_factory=lambda: Limits(wall_seconds=900, cpu_seconds=3600), metadata={
        "help": "Limits for the reference's child process (the user's own problem: generous, but still limits)."})
    build_seconds: float = field(default=600.0, metadata={
        "help": "Wall-clock limit for building the candidate's extensions."})
    device_memory_bytes: int | None = field(default=None, metadata={
        "help": "Device memory an evaluation's two jobs may use together (agent/engine/evaluate/memory.py plans from it). "
                "None: on a GPU its total memory times limits.gpu_memory_fraction (read by the footprint job); on the CPU no "
                "budget, since there the \"device memory\" is host RAM, bounded by each job's memory limit. Set it to force the"
                " plan (a CPU test forces a tiny one; KSTUDIO_EVAL_DEVICE_MEMORY_MB in the studio)."})
    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"EvalConfig.device must be 'cpu' or 'cuda', not {self.device!r}")
        if self.backend is not None and self.backend not in BACKENDS:
            raise ValueError(f"EvalConfig.backend must be {in_words()}, not {self.backend!r}")
        unknown = set(self.distributions) - set(DISTRIBUTIONS[1:])
        if unknown:
            raise ValueError(f"EvalConfig.distributions has unknown names {sorted(unknown)}; choose from {DISTRIBUTIONS[1:]}")
        bad = set(self.allowed_op_families) - set(OP_FAMILIES)
        if bad:
            raise ValueError(f"EvalConfig.allowed_op_families has unknown families {sorted(bad)}; choose from {sorted(OP_FAMILIES)}")
        if self.trials < 1:
            raise ValueError("EvalConfig.trials must be at least 1")
        if self.min_rounds < 1 or self.max_rounds < self.min_rounds:
            raise ValueError("EvalConfig.min_rounds must be at least 1 and max_rounds at least min_rounds")
        if self.threads < 1:
            raise ValueError("EvalConfig.threads must be at least 1")
        if self.device_memory_bytes is not None and self.device_memory_bytes <= 0:
            raise ValueError("EvalConfig.device_memory_bytes must be positive (or None for the device's own memory)")
        if self.batch_ms is not None and self.batch_ms <= 0:
            raise ValueError("EvalConfig.batch_ms must be positive")
        if not isinstance(self.limits, Limits) or not isinstance(self.reference_limits, Limits):
            raise ValueError("EvalConfig.limits and reference_limits must be agent.engine.sandbox.Limits")

    @property
    def wide_calls(self) -> bool:
        """Whether timed calls include wide ones (wide_timed_calls): never without the scaled_large checked call, whose
        elementwise comparison is what shows a kernel right at that scale."""
        return self.wide_timed_calls and "scaled_large" in self.distributions

    @property
    def target_batch_ms(self) -> float:
        return self.batch_ms if self.batch_ms is not None else 50.0

    def allowed_compute_ops(self) -> frozenset[str]:
        if self.allow_any_torch_op:
            return frozenset({ANY_OP})
        ops = set(self.allowed_ops)
        for family in self.allowed_op_families:
            ops |= OP_FAMILIES[family]
        return frozenset(ops)
