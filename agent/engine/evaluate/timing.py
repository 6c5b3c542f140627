"""Summaries of timings, and the device spin used to see whether the GPU is free (reference_job.py)."""
from __future__ import annotations

import statistics

import torch


def summarize(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "median_ms": statistics.median(ordered),
        "p10_ms": ordered[int(0.1 * (n - 1))],
        "p90_ms": ordered[int(0.9 * (n - 1))],
        "min_ms": ordered[0],
        "iterations": n,
    }


# The spin's length at which busy_cycles() is calibrated.
BUSY_US = 200.0


def busy_cycles(device_index: int = 0) -> int:
    """Clock cycles of BUSY_US at the GPU's top clock (at a lower clock the spin only lasts longer)."""
    khz = getattr(torch.cuda.get_device_properties(device_index), "clock_rate", 0) or 2_000_000
    return int(BUSY_US * khz / 1000)
