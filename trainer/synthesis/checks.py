"""The checks a composed problem must pass, run inside the worker process (trainer/synthesis/worker.py),
cheapest first: it runs in eager, its output is finite, not constant and depends on its input, two runs
agree (within the tolerance torch.compile is held to), its eager runtime falls in the window, and `torch.compile` runs it and agrees with eager.

`check_source` never raises for a bad problem: it returns the first failed check's reason and detail.
"""
from __future__ import annotations

import statistics
import time
import traceback
from dataclasses import dataclass
from typing import Any

import torch

# Every reason a candidate can be rejected for, in the order the pipeline tries them (the report lists them so).
REASONS = (
    "invalid_source",  # agent.engine.validation refused the rendered module (a bug in the catalogue or the renderer)
    "near_duplicate",  # same op signature or too similar a source as an existing or already kept problem
    "eager_error",  # importing, building or running it in eager raised
    "aliased_output",  # the output shares memory with an input (the evaluator refuses such outputs)
    "non_finite",  # NaN or inf in the output
    "constant_output",  # all outputs (nearly) equal, or the same output for different inputs
    "nondeterministic",  # two runs (same seed, same inputs) differ
    "too_fast",  # eager median below the window
    "too_slow",  # eager median above the window
    "compile_error",  # torch.compile raised
    "compile_mismatch",  # torch.compile's output differs from eager's beyond the tolerance
    "timeout",  # the worker did not answer in time (a hang): it was killed and restarted
    "crashed",  # the worker died (a segfault, os._exit): it was restarted
)


@dataclass(frozen=True)
class CheckSettings:
    """What the worker needs to check one problem (a plain, JSON-able subset of SynthesisConfig)."""

    device: str = "cpu"
    seed: int = 0
    min_ms: float = 0.05
    max_ms: float = 20.0
    compile: bool = True
    rtol: float = 1e-3
    atol: float = 1e-3
    timing_seconds: float = 0.2  # spend about this long timing one problem (at least 5 runs)


@dataclass
class Outcome:
    ok: bool
    reason: str | None = None  # one of REASONS when not ok
    detail: str = ""
    eager_ms: float | None = None
    compile_ms: float | None = None  # the first compiled call, compilation included
    output_shape: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Rejected(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def check_source(source: str, settings: CheckSettings) -> Outcome:
    outcome = Outcome(ok=False)
    try:
        _run_checks(source, settings, outcome)
    except Rejected as exc:
        outcome.reason, outcome.detail = exc.reason, exc.detail[:2000]
        return outcome
    finally:
        if settings.compile:
            _reset_compiler()
    outcome.ok = True
    return outcome


def _run_checks(source: str, settings: CheckSettings, outcome: Outcome) -> None:
    device = torch.device(settings.device)
    namespace = _stage("eager_error", "importing the module", lambda: _load(source))
    model = _stage("eager_error", "building Model", lambda: _build(namespace, settings.seed, device))
    inputs = _stage("eager_error", "get_inputs()", lambda: _inputs(namespace, settings.seed, device))
    out = _stage("eager_error", "running forward in eager", lambda: _forward(model, inputs))
    if not isinstance(out, torch.Tensor):
        raise Rejected("eager_error", f"forward returned {type(out).__name__}, not a tensor")
    outcome.output_shape = list(out.shape)
    if any(_shares_memory(out, t) for t in inputs):
        raise Rejected("aliased_output", "the output shares memory with an input (a view of it)")
    if not bool(torch.isfinite(out).all()):
        raise Rejected("non_finite", f"{int((~torch.isfinite(out)).sum())} of {out.numel()} outputs are NaN or inf")
    _check_varies(model, out, namespace, settings, device)
    _check_deterministic(namespace, inputs, out, settings, device)
    outcome.eager_ms = _median_ms(model, inputs, settings, device)
    if outcome.eager_ms < settings.min_ms:
        raise Rejected("too_fast", f"eager median {outcome.eager_ms:.4f} ms is below the window's {settings.min_ms} ms")
    if outcome.eager_ms > settings.max_ms:
        raise Rejected("too_slow", f"eager median {outcome.eager_ms:.3f} ms is above the window's {settings.max_ms} ms")
    if settings.compile:
        outcome.compile_ms = _check_compiled(model, inputs, out, settings, device)


def _stage(reason: str, what: str, thunk: Any) -> Any:
    try:
        return thunk()
    except Exception as exc:
        raise Rejected(reason, f"{what} raised {type(exc).__name__}: {exc}\n{_tail(traceback.format_exc())}") from None


def _load(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "synthesized_problem"}
    exec(compile(source, "synthesized_problem.py", "exec"), namespace)  # our own catalogue's code, in this worker only
    return namespace


def _build(namespace: dict[str, Any], seed: int, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(seed)
    return namespace["Model"](*namespace["get_init_inputs"]()).to(device)


def _inputs(namespace: dict[str, Any], seed: int, device: torch.device) -> list[Any]:
    torch.manual_seed(seed + 1)
    return [t.to(device) if isinstance(t, torch.Tensor) else t for t in namespace["get_inputs"]()]


def _forward(model: torch.nn.Module, inputs: list[Any]) -> Any:
    with torch.no_grad():
        return model(*inputs)


def _shares_memory(out: torch.Tensor, value: Any) -> bool:
    return isinstance(value, torch.Tensor) and out.untyped_storage().data_ptr() == value.untyped_storage().data_ptr()


def _check_varies(model: torch.nn.Module, out: torch.Tensor, namespace: dict[str, Any], settings: CheckSettings,
                  device: torch.device) -> None:
    flat = out.detach().float().flatten()
    spread = float(flat.max() - flat.min())
    if spread <= 1e-6 * max(1.0, float(flat.abs().max())):
        raise Rejected("constant_output", f"all {flat.numel()} outputs are (nearly) equal to {float(flat[0]):.6g}")
    other = _stage("eager_error", "running forward on other inputs", lambda: _forward(model, _inputs(namespace, settings.seed + 7, device)))
    if isinstance(other, torch.Tensor) and other.shape == out.shape and torch.equal(other, out):
        raise Rejected("constant_output", "the output is the same for two different input sets: it ignores its input")


def _check_deterministic(namespace: dict[str, Any], inputs: list[Any], out: torch.Tensor, settings: CheckSettings,
                         device: torch.device) -> None:
    """A second model built under the same seed, run on a copy of the same inputs, must agree with the first.

    Within the same tolerance as torch.compile's agreement, not bit for bit: CPU math libraries may pick a
    different code path per call (CI once saw tanh differ by 1.6e-4 between two identical runs), and the
    evaluator compares candidates with a tolerance too. Random ops (dropout, randn in forward) differ by O(1)."""
    again = _stage("eager_error", "building Model again", lambda: _build(namespace, settings.seed, device))
    copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    second = _stage("eager_error", "running forward again", lambda: _forward(again, copies))
    if not isinstance(second, torch.Tensor) or second.shape != out.shape:
        raise Rejected("nondeterministic", "two runs with the same seed and inputs differ (a different shape)")
    agrees, worst = _agrees(second, out, settings)
    if not agrees:
        raise Rejected("nondeterministic", f"two runs with the same seed and inputs differ (max abs difference "
                                           f"{worst:.3g}; rtol {settings.rtol}, atol {settings.atol})")


def _median_ms(model: torch.nn.Module, inputs: list[Any], settings: CheckSettings, device: torch.device) -> float:
    times: list[float] = []
    deadline = time.perf_counter() + settings.timing_seconds
    with torch.no_grad():
        model(*inputs)  # warm-up
        while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 200):
            _sync(device)
            start = time.perf_counter()
            model(*inputs)
            _sync(device)
            times.append((time.perf_counter() - start) * 1000)
            if times[-1] > 10 * settings.max_ms:
                break  # far outside the window already; timing more would only waste the worker's time
    return statistics.median(times)


def _check_compiled(model: torch.nn.Module, inputs: list[Any], out: torch.Tensor, settings: CheckSettings,
                    device: torch.device) -> float:
    compiled = torch.compile(model)
    start = time.perf_counter()
    got = _stage("compile_error", "torch.compile", lambda: _forward(compiled, inputs))
    elapsed = (time.perf_counter() - start) * 1000
    if not isinstance(got, torch.Tensor) or got.shape != out.shape:
        shape = list(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        raise Rejected("compile_mismatch", f"torch.compile returned {shape}, eager {list(out.shape)}")
    agrees, worst = _agrees(got, out, settings)
    if not agrees:
        raise Rejected("compile_mismatch", f"torch.compile differs from eager by up to {worst:.3g} "
                                           f"(rtol {settings.rtol}, atol {settings.atol})")
    return elapsed


def _agrees(got: torch.Tensor, out: torch.Tensor, settings: CheckSettings) -> tuple[bool, float]:
    """Whether `got` is within the settings' tolerance of `out` everywhere, and the largest difference."""
    diff = (got.float() - out.float()).abs()
    return bool((diff <= settings.atol + settings.rtol * out.float().abs()).all()), float(diff.max())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_compiler() -> None:
    """Drop dynamo's caches between problems: each problem is a new class, and the worker checks hundreds."""
    torch._dynamo.reset()


def _tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
