"""What the reference's job draws from the secret seed: weights, and each checked call's inputs.

The seed lives in the parent and the reference's job only. The candidate's job gets the weights and inputs as
data (session.py), and the one number derived from the seed that it sees, the weights' seed (so that a
candidate whose parameters have other names starts from the same values), is a hash it cannot invert.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import torch

import agent.engine.evaluate.inputs as inputs
from agent.engine.validation import INPUT_VARIANTS


# A problem's optional list of other input sets (DESIGN §3), and the label of each one's checked call.
VARIANTS = INPUT_VARIANTS
VARIANT = "variant"


def variant_count(problem: ModuleType) -> int:
    """How many input variants the problem offers (0 without get_input_variants), counted on meta tensors."""
    if not callable(getattr(problem, VARIANTS, None)):
        return 0
    try:
        with torch.device("meta"):
            return len(list(getattr(problem, VARIANTS)()))
    except (RuntimeError, NotImplementedError, TypeError):  # it reads values: counted on the CPU, once
        return len(list(getattr(problem, VARIANTS)()))


def derive_seed(seed: int, *labels: object) -> int:
    text = ":".join(str(x) for x in (seed, *labels))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")


@dataclass(frozen=True)
class TrialPlan:
    seed: int
    trials: int
    distributions: tuple[str, ...]
    names: dict[str, str]
    variants: int = 0
    """Input sets of the problem's get_input_variants(), each one more checked call (and timed on its own); the
    reference's job counts them (variant_count)."""

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> TrialPlan:
        return cls(**{**data, "distributions": tuple(data["distributions"])})

    def labels(self) -> list[str]:
        """Each checked call's input distribution, in order: the problem's own, the other distributions, then each of
        its variants' shapes ("variant1", ...)."""
        return ["problem"] * self.trials + list(self.distributions) + [f"{VARIANT}{k + 1}" for k in range(self.variants)]

    @property
    def weights_seed(self) -> int:
        return derive_seed(self.seed, "weights")

    def inputs(self, problem: ModuleType, index: int, device: str) -> list[Any]:
        """The inputs of checked call `index` (labels()[index]); calls 0 and 1 are also the timed batches' bases."""
        if index < self.trials:
            return generate(problem, self.names["get_inputs"], derive_seed(self.seed, "trial", index), device)
        if index >= len(self.labels()):  # a second base set for a plan with one trial
            return generate(problem, self.names["get_inputs"], derive_seed(self.seed, "base", index), device)
        dist = self.labels()[index]
        if dist.startswith(VARIANT):
            return self.variant_inputs(problem, int(dist[len(VARIANT):]) - 1, "trial", device)
        dist_seed = derive_seed(self.seed, "dist", dist)
        return inputs.redistribute(generate(problem, self.names["get_inputs"], dist_seed, device), dist, dist_seed)

    def variant_inputs(self, problem: ModuleType, k: int, use: str, device: str) -> list[Any]:
        """Variant k's inputs under the seed for `use` (its checked call, or one of its timing's two bases). The problem's
        get_input_variants() makes every variant's set; the others are dropped at once."""
        inputs.seed_everything(derive_seed(self.seed, VARIANT, k, use))
        with torch.device(device):
            values = list(getattr(problem, VARIANTS)()[k])
        return inputs.to_device(values, device)

    def init_inputs(self, problem: ModuleType, device: str) -> list[Any]:
        return generate(problem, self.names["get_init_inputs"], derive_seed(self.seed, "init"), device)


@dataclass
class ProblemSetup:
    init_inputs: list[Any]
    model: torch.nn.Module
    inputs: list[Any]
    """The first trial's inputs: the one set the ncu profile runs (every other set is generated where it is used)."""


def build_model(cls: Any, init_inputs: list[Any], seed: int, device: str) -> Any:
    """A model built under `seed` on the device: the reference and a candidate with other parameter
    names get the same initial values when their constructors draw the same way."""
    inputs.seed_everything(seed)
    with torch.device(device):
        model = cls(*init_inputs)
    if hasattr(model, "to"):
        model = model.to(device)
    if hasattr(model, "eval"):
        model.eval()
    if isinstance(model, torch.nn.Module):
        vary_constants(model, seed)
    return model


# How far a constant tensor's values move: a value c becomes c (1 + u), u in [-VARY, VARY) (a variance stays positive);
# a zero becomes a value in [-ZERO_VARY, ZERO_VARY).
VARY = 0.25
ZERO_VARY = 0.1


def vary_constants(model: torch.nn.Module, seed: int) -> None:
    """Every floating parameter and buffer that its constructor filled with one value (a norm's weight of ones, its
    bias and running mean of zeros, its running variance of ones; a scale parameter of ones) gets seeded values near
    it. Judged only at those defaults, a kernel that ignores them is right there and wrong for every trained model: a
    float4 path of the built-in policy read a LayerNorm's [C, H, W] weight at (n, c, h) and was accepted on the H200.
    The values depend on the seed, the tensor's shape and value, and its rank among the constant tensors of that shape
    and value (parameters, then buffers, in the order the module registers them): a candidate whose parameters have
    other names, built under the same seed, draws the same values where it declares them in the same order."""
    rank: dict[tuple[tuple[int, ...], float], int] = {}
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if not tensor.is_floating_point() or tensor.numel() == 0 or tensor.is_meta:
                continue
            value = float(tensor.reshape(-1)[0])
            if not math.isfinite(value) or not bool((tensor == value).all()):
                continue
            key = (tuple(tensor.shape), value)
            rank[key] = rank.get(key, -1) + 1
            digest = hashlib.sha256(repr((seed, key, rank[key])).encode()).digest()
            generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
            u = torch.rand(tuple(tensor.shape), generator=generator, dtype=torch.float64) * (2 * VARY) - VARY
            varied = value * (1.0 + u) if value != 0.0 else u * (ZERO_VARY / VARY)
            tensor.copy_(varied.to(tensor.dtype))


def set_up(problem: ModuleType, plan: TrialPlan, device: str) -> ProblemSetup:
    init_inputs = plan.init_inputs(problem, device)
    model = build_model(getattr(problem, plan.names["model"]), init_inputs, plan.weights_seed, device)
    return ProblemSetup(init_inputs, model, plan.inputs(problem, 0, device))


def generate(problem: ModuleType, function: str, seed: int, device: str) -> list[Any]:
    """The problem's own generator under a seed, drawing on the device (a GPU draws 256 MiB in
    microseconds; the host takes a second). Values are identical in every job on the same device."""
    inputs.seed_everything(seed)
    with torch.device(device):
        values = list(getattr(problem, function)())
    return inputs.to_device(values, device)
