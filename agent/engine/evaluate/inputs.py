"""Inputs for trials and timing: the problem's own get_inputs() under secret seeds, plus other
value distributions of the same shapes (mixed sign, large, tiny) that a shortcut would not expect."""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

SCALED_LARGE = 100.0  # the scaled_large distribution's factor (keyed.py's wide timed calls take the same)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)


def _generator(device: torch.device, seed: int) -> torch.Generator:
    """Drawing on the tensor's own device: the same values in every job on that device."""
    return torch.Generator(device=device).manual_seed(seed)


def redistribute(inputs: list[Any], distribution: str, seed: int) -> list[Any]:
    """Same shapes and dtypes; new values for every floating tensor. Integer tensors (indices,
    labels) keep the problem's values, which are valid for the problem by construction."""
    out = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            generator = _generator(value.device, seed + len(out))
            base = torch.randn(value.shape, generator=generator, dtype=torch.float32, device=value.device)
            if distribution == "mixed_sign":
                new = base
            elif distribution == "scaled_large":
                new = base * SCALED_LARGE
            elif distribution == "scaled_small":
                new = base * 1e-3
            else:
                raise ValueError(f"unknown input distribution {distribution!r}")
            out.append(new.to(value.dtype))
        else:
            out.append(value)
    return out


def to_device(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def digest_indices(numel: int, seed: int, count: int = 65_536) -> torch.Tensor:
    """Positions sampled to check timed outputs cheaply; the same in both processes."""
    if numel <= count:
        return torch.arange(numel)
    return torch.randint(numel, (count,), generator=torch.Generator().manual_seed(seed))


def digest(outputs: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    """A sample of each output's values at seeded positions (kept on the CPU)."""
    result = []
    for i, out in enumerate(outputs):
        flat = out.detach().reshape(-1)
        idx = digest_indices(flat.numel(), seed + i).to(flat.device)
        result.append(flat[idx].cpu())
    return result


_PERTURBED_FRACTION = 4096
_PERTURBED_MIN = 16


def perturb(values: list[Any], seed: int) -> list[Any]:
    """A copy with a few of each floating tensor's positions (seeded) given other in-distribution
    values. Written in place over inputs a candidate has seen, it defeats caches keyed on the
    address plus a sample of the values: the sample almost surely misses the changed positions.

    How few decides both sides: a cache that samples k positions sees the change with probability about
    k * count / n, so count is kept to 1/4096 of the positions (a 4-value fingerprint notices it ~0.1% of
    the time; at 1/64 it was ~6%, and such a cache then passed), yet never under 16, so that the outputs
    a stale result gets wrong are many, whatever the problem does with one position (a relu zeroes half)."""
    out = []
    for value in values:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 1:
            flat = value.detach().reshape(-1).clone()
            count = min(flat.numel(), max(_PERTURBED_MIN, flat.numel() // _PERTURBED_FRACTION))
            generator = _generator(flat.device, seed + len(out))
            # Unique positions: with repeats, which write wins is unspecified, and both jobs must agree.
            idx = torch.randint(flat.numel(), (count,), generator=generator, device=flat.device).unique()
            flat[idx] = flat[idx.roll(1)] * -1.5 + 0.25
            out.append(flat.view(value.shape))
        else:
            out.append(value)
    return out
