"""The synthesis pipeline's settings (DESIGN §9: a help string on every field, checked in __post_init__)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from trainer.synthesis.catalogue import SIZES
from trainer.synthesis.checks import CheckSettings

# The default runtime window per device, in milliseconds of eager median: long enough to be worth a kernel
# (launch and Python overhead do not dominate), short enough that evaluating it hundreds of times is cheap.
DEFAULT_WINDOW_MS = {"cpu": (0.05, 20.0), "cuda": (0.05, 50.0)}


@dataclass
class SynthesisConfig:
    count: int = field(default=50, metadata={"help": "how many problems to keep"})
    seed: int = field(default=0, metadata={"help": "seeds the composition (same seed, same candidates) and the checks' inputs"})
    device: str = field(default="cpu", metadata={"help": "where the checks run and what the sizes are chosen for: cpu or cuda"})
    dtype: str = field(default="float32", metadata={"help": "the inputs' dtype: float32, float16 or bfloat16"})
    min_ops: int = field(default=1, metadata={"help": "fewest seed ops in a chain (at least 1)"})
    max_ops: int = field(default=5, metadata={"help": "most seed ops in a chain (at most 8)"})
    min_ms: float | None = field(default=None, metadata={
        "help": "reject problems whose eager median runtime is below this many ms (default: 0.05)"})
    max_ms: float | None = field(default=None, metadata={
        "help": "reject problems whose eager median runtime is above this many ms (default: 20 on cpu, 50 on cuda)"})
    similarity: float = field(default=0.97, metadata={
        "help": "token similarity (0-1, difflib ratio of the normalized Model classes) at or above which a candidate "
                "is a near-duplicate of an existing or kept problem; 1.0 leaves only the op-signature test"})
    compile_check: bool = field(default=True, metadata={
        "help": "require torch.compile to run each problem and agree with eager (the slowest check: seconds each)"})
    rtol: float = field(default=1e-3, metadata={"help": "relative tolerance of the torch.compile-versus-eager check"})
    atol: float = field(default=1e-3, metadata={"help": "absolute tolerance of the torch.compile-versus-eager check"})
    timeout_s: float = field(default=120.0, metadata={
        "help": "seconds one problem's checks may take in the worker before it is killed (a hang counts as a rejection)"})
    max_attempts: int | None = field(default=None, metadata={
        "help": "stop after composing this many candidates even if fewer than count were kept (default: 20 x count)"})
    threads: int | None = field(default=None, metadata={
        "help": "CPU threads of the worker process (OMP_NUM_THREADS; default: torch's own choice)"})

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"count={self.count}: set it to the number of problems to keep (1 or more)")
        if self.device not in SIZES:
            raise ValueError(f"device={self.device!r}: set it to one of {', '.join(SIZES)}")
        if self.dtype not in ("float32", "float16", "bfloat16"):
            raise ValueError(f"dtype={self.dtype!r}: set it to float32, float16 or bfloat16")
        if not 1 <= self.min_ops <= self.max_ops <= 8:
            raise ValueError(f"min_ops={self.min_ops}, max_ops={self.max_ops}: need 1 <= min_ops <= max_ops <= 8")
        low, high = DEFAULT_WINDOW_MS[self.device]
        self.min_ms = low if self.min_ms is None else self.min_ms
        self.max_ms = high if self.max_ms is None else self.max_ms
        if not 0 <= self.min_ms < self.max_ms:
            raise ValueError(f"min_ms={self.min_ms}, max_ms={self.max_ms}: the runtime window needs 0 <= min_ms < max_ms")
        if not 0 < self.similarity <= 1:
            raise ValueError(f"similarity={self.similarity}: set a ratio in (0, 1]; 1.0 turns the token test off")
        if self.rtol < 0 or self.atol < 0:
            raise ValueError(f"rtol={self.rtol}, atol={self.atol}: tolerances cannot be negative")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s={self.timeout_s}: set a positive number of seconds")
        self.max_attempts = 20 * self.count if self.max_attempts is None else self.max_attempts
        if self.max_attempts < self.count:
            raise ValueError(f"max_attempts={self.max_attempts} is below count={self.count}: it must allow at least one try per problem")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads={self.threads}: set 1 or more, or leave it unset")

    def check_settings(self) -> CheckSettings:
        assert self.min_ms is not None and self.max_ms is not None  # filled in by __post_init__
        return CheckSettings(device=self.device, seed=self.seed, min_ms=self.min_ms, max_ms=self.max_ms,
                             compile=self.compile_check, rtol=self.rtol, atol=self.atol)

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata["help"] for f in fields(cls)}
