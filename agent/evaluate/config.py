"""Evaluation settings: one dataclass, a help string on every field, validated on creation."""
from __future__ import annotations

from dataclasses import dataclass, field

from agent.sandbox import Limits

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

DISTRIBUTIONS = ("problem", "mixed_sign", "scaled_large", "scaled_small")


@dataclass(frozen=True)
class EvalConfig:
    device: str = "cpu"
    """Where the candidate runs: "cpu" or "cuda"."""
    backend: str | None = None
    """cuda, nvrtc, triton or cpp; None guesses from the source (static analysis)."""
    trials: int = 2
    """Trials on fresh inputs from the problem's own get_inputs() (each with a new secret seed)."""
    distributions: tuple[str, ...] = ("mixed_sign", "scaled_large", "scaled_small")
    """Extra trials, one per distribution, replacing floating inputs' values (same shapes)."""
    allowed_op_families: tuple[str, ...] = ("gemm", "conv")
    """PyTorch compute op families the candidate may call (see OP_FAMILIES)."""
    allowed_ops: tuple[str, ...] = ()
    """Further ATen op names the candidate may call, on top of the families."""
    rtol: float | None = None
    """Relative tolerance; None picks by dtype (float32 1e-4, float16 1e-2, bfloat16 2e-2)."""
    atol_scale: float | None = None
    """Absolute tolerance as a fraction of the reference's largest magnitude; None picks by dtype."""
    timing: bool = True
    """Measure the candidate and the baselines."""
    compile_baseline: bool = True
    """Also time torch.compile of the reference (cached per problem, toolchain and device)."""
    warmup_ms: float = 25.0
    """Time spent warming up each timed function before measuring."""
    iterations: int = 50
    """Timed iterations per function (deterministic: the timed outputs are checked against it)."""
    rotate: int = 3
    """Input buffers rotated between timed iterations (their values change too)."""
    profile: bool = False
    """Attach a profiler summary (ncu where present on GPUs, torch.profiler otherwise)."""
    seed: int | None = None
    """Fix the secret seed (tests and reproductions); None draws a fresh one per evaluation."""
    limits: Limits = field(default_factory=Limits)
    """Limits for the candidate's child process."""
    reference_limits: Limits = field(default_factory=lambda: Limits(wall_seconds=900, cpu_seconds=3600))
    """Limits for the reference's child process (the user's own problem: generous, but still limits)."""
    build_seconds: float = 600.0
    """Wall-clock limit for building the candidate's extensions."""
    overlap_reference: bool = True
    """Run the reference's job beside the build and the candidate's job (agent/evaluate/handoff.py): its set-up
    and comparison leave the turn's critical path. Both jobs then hold their inputs on the device at once; a
    problem that needs more than half of the device's memory is evaluated with this off."""
    gate_seconds: float = 60.0
    """How long the candidate's job waits, before timing, for the reference's job to leave the device; past it,
    the timing runs anyway and the verdict says so (noisy_timing)."""

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"EvalConfig.device must be 'cpu' or 'cuda', not {self.device!r}")
        if self.backend not in (None, "cuda", "nvrtc", "triton", "cpp"):
            raise ValueError(f"EvalConfig.backend must be cuda, nvrtc, triton or cpp, not {self.backend!r}")
        unknown = set(self.distributions) - set(DISTRIBUTIONS[1:])
        if unknown:
            raise ValueError(f"EvalConfig.distributions has unknown names {sorted(unknown)}; choose from {DISTRIBUTIONS[1:]}")
        bad = set(self.allowed_op_families) - set(OP_FAMILIES)
        if bad:
            raise ValueError(f"EvalConfig.allowed_op_families has unknown families {sorted(bad)}; choose from {sorted(OP_FAMILIES)}")
        if self.trials < 1:
            raise ValueError("EvalConfig.trials must be at least 1")
        if self.gate_seconds <= 0:
            raise ValueError("EvalConfig.gate_seconds must be positive")
        if self.iterations < 5 or self.rotate < 1:
            raise ValueError("EvalConfig.iterations must be >= 5 and rotate >= 1")
        if not isinstance(self.limits, Limits) or not isinstance(self.reference_limits, Limits):
            raise ValueError("EvalConfig.limits and reference_limits must be agent.sandbox.Limits")

    def allowed_compute_ops(self) -> frozenset[str]:
        ops = set(self.allowed_ops)
        for family in self.allowed_op_families:
            ops |= OP_FAMILIES[family]
        return frozenset(ops)
