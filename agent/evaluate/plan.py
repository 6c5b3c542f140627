"""What the candidate's job and the reference's job compute identically from the secret seed.

Both jobs rebuild the problem's weights and every trial's inputs themselves, on the device, from
seeds derived here: nothing of H100 size crosses a process boundary except the candidate's outputs.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import torch

from agent.evaluate import inputs
from agent.evaluate.timing import timed_values


def derive_seed(seed: int, *labels: object) -> int:
    text = ":".join(str(x) for x in (seed, *labels))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")


@dataclass(frozen=True)
class TrialPlan:
    seed: int
    trials: int
    distributions: tuple[str, ...]
    timing: bool
    iterations: int
    rotate: int
    warmup_ms: float
    names: dict[str, str]

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> TrialPlan:
        return cls(**{**data, "distributions": tuple(data["distributions"])})

    def labels(self) -> list[str]:
        """Each checked call's input distribution, in order; the last runs after timing."""
        return ["problem"] * self.trials + list(self.distributions) + ["after_timing"]

    @property
    def weights_seed(self) -> int:
        return derive_seed(self.seed, "weights")

    @property
    def digest_seed(self) -> int:
        return derive_seed(self.seed, "digest")


@dataclass
class ProblemSetup:
    init_inputs: list[Any]
    model: torch.nn.Module
    value_sets: list[list[Any]]
    """The problem's own distribution, one set per trial; timing rotates through them."""
    checked: list[list[Any]]
    """Inputs of every checked call but the last, which runs on the last timed call's buffer."""
    final: list[Any]


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
    return model


def set_up(problem: ModuleType, plan: TrialPlan, device: str) -> ProblemSetup:
    names = plan.names
    init_inputs = generate(problem, names["get_init_inputs"], derive_seed(plan.seed, "init"), device)
    model = build_model(getattr(problem, names["model"]), init_inputs, plan.weights_seed, device)
    value_sets = [generate(problem, names["get_inputs"], derive_seed(plan.seed, "trial", t), device)
                  for t in range(plan.trials)]
    checked = list(value_sets)
    for dist in plan.distributions:
        dist_seed = derive_seed(plan.seed, "dist", dist)
        checked.append(inputs.redistribute(generate(problem, names["get_inputs"], dist_seed, device), dist, dist_seed))
    final_seed = derive_seed(plan.seed, "after_timing")
    if plan.timing:
        final = inputs.perturb(timed_values(value_sets, plan.iterations - 1), final_seed)
    else:
        final = generate(problem, names["get_inputs"], final_seed, device)
    return ProblemSetup(init_inputs, model, value_sets, checked, final)


def generate(problem: ModuleType, function: str, seed: int, device: str) -> list[Any]:
    """The problem's own generator under a seed, drawing on the device (a GPU draws 256 MiB in
    microseconds; the host takes a second). Values are identical in every job on the same device."""
    inputs.seed_everything(seed)
    with torch.device(device):
        values = list(getattr(problem, function)())
    return inputs.to_device(values, device)
