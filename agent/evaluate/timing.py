"""The timing protocol, identical for the candidate and for the eager and torch.compile baselines.

Per timed iteration: the next of R input buffers is refilled with the next of V value sets (so a
result cached by pointer is wrong), the L2 cache is flushed, then the call is bracketed by device
events and by a host clock read after a device-wide synchronisation (work hidden on a side stream
shows up on the host clock only). Iteration counts are fixed, so the outputs of the last R timed
calls can be checked against the reference computed in another process.

On a GPU the stream is kept busy across the host's launch: after the synchronisation a short device-side
spin (BUSY_US) is queued before the start event, so the start event fires only when the call's own work
is already queued behind it. Without it the event interval also holds the host's time to launch the
call (the Python forward, argument checks, allocation: tens of microseconds), which put the engine's
medians 5-25% above triton's do_bench on ~0.2 ms kernels and made them vary between processes; with it
they agree within 1% (docs/benchmarks.md, section 6). The host clock starts before the spin, and the
spin's own device time (its events) is taken off it, so the two clocks still measure the same interval.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from agent.evaluate.guards import Clocks
from agent.evaluate.inputs import digest


@dataclass
class TimedRun:
    device_ms: list[float]  # events on GPUs; the host clock on CPUs
    host_ms: list[float]
    # timed-call index -> digest of its output (the last `rotate` calls)
    digests: dict[int, list[torch.Tensor]]
    # where the protocol's own time went: set-up, warm-up, the timed loop (the engine's speed, not the kernel's)
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def spread(self, host: bool = False) -> dict[str, float]:
        return summarize(self.host_ms if host else self.device_ms)


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


# Long enough to cover the host's launch of a call; short next to the flush and refill of each iteration.
BUSY_US = 200.0


def busy_cycles(device_index: int = 0) -> int:
    """Clock cycles of BUSY_US at the GPU's top clock (at a lower clock the spin only lasts longer)."""
    khz = getattr(torch.cuda.get_device_properties(device_index), "clock_rate", 0) or 2_000_000
    return int(BUSY_US * khz / 1000)


class Flusher:
    """Evicts caches between iterations by writing a buffer larger than the last-level cache."""

    def __init__(self, device: str) -> None:
        if device == "cuda":
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
            self.buffer = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device="cuda")
        else:
            self.buffer = torch.empty(32 << 20, dtype=torch.uint8)

    def __call__(self) -> None:
        self.buffer.fill_(1)


def _as_list(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def time_calls(
    fn: Callable[..., Any],
    buffers: list[list[Any]],
    value_sets: list[list[Any]],
    *,
    device: str,
    iterations: int,
    warmup_ms: float,
    clocks: Clocks,
    digest_seed: int,
    before_timed: Callable[[], None] | None = None,
) -> TimedRun:
    """`before_timed` runs between the warm-up and the timed loop (the candidate's job waits there for the
    device to be its own: the warm-up measures nothing, so it may overlap the reference's last comparison)."""
    cuda = device == "cuda"
    sync = clocks.originals["torch.cuda.synchronize"] if cuda else (lambda: None)
    now = clocks.perf_counter
    phases: dict[str, float] = {}
    began = now()
    flush = Flusher(device)
    rotate, sets = len(buffers), len(value_sets)

    def refill(i: int, timed: bool = False) -> list[Any]:
        buffer = buffers[i % rotate]
        for dst, src in zip(buffer, timed_values(value_sets, i) if timed else value_sets[i % sets]):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        return buffer

    # Warm-up: compile caches, allocator, clocks. At least three calls, then until warmup_ms of the device's
    # time. Each call is waited for: launches return at once, so a host clock alone queued ~1000 calls in
    # 25 ms, whose device time (~0.2 s of 256 MiB refills on the H100) every evaluation then waited out.
    sync()
    start, calls = now(), 0
    phases["setup"] = start - began
    while calls < 3 or (now() - start) * 1000 < warmup_ms:
        fn(*refill(calls))
        sync()
        calls += 1
        if calls >= 1000:
            break
    warmed = now()
    phases["warmup"] = warmed - start
    if before_timed is not None:
        before_timed()
    looped = now()
    phases["gate"] = looped - warmed

    Event = clocks.originals["torch.cuda.Event"]
    record, elapsed = clocks.originals["torch.cuda.Event.record"], clocks.originals["torch.cuda.Event.elapsed_time"]
    spin, cycles = (clocks.originals["torch.cuda._sleep"], busy_cycles()) if cuda else (None, 0)
    device_ms, host_ms, digests = [], [], {}
    for i in range(iterations):
        args = refill(i, timed=True)
        flush()
        sync()
        if cuda:
            queued, begin, end = Event(enable_timing=True), Event(enable_timing=True), Event(enable_timing=True)
            t0 = now()
            record(queued)
            spin(cycles)
            record(begin)
            out = fn(*args)
            record(end)
            sync()
            t1 = now()
            device_ms.append(elapsed(begin, end))
            host_ms.append((t1 - t0) * 1000 - elapsed(queued, begin))
        else:
            t0 = now()
            out = fn(*args)
            t1 = now()
            device_ms.append((t1 - t0) * 1000)
            host_ms.append((t1 - t0) * 1000)
        if i >= iterations - rotate:
            digests[i] = digest(_as_list(out), digest_seed)
        del out
    phases["timed"] = now() - looped
    return TimedRun(device_ms, host_ms, digests, phases)


def timed_values(value_sets: list[list[Any]], i: int) -> list[Any]:
    """The inputs of timed call i: value set i mod V with every floating tensor rolled by a shift
    unique to i. No two timed calls see the same values, so a result cached by pointer or by a
    sampled fingerprint is never right, yet values stay in the problem's own distribution."""
    out = []
    for value in value_sets[i % len(value_sets)]:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 1:
            shift = ((i + 1) * 7919) % value.numel()
            out.append(value.reshape(-1).roll(shift).view(value.shape))
        else:
            out.append(value)
    return out


def last_timed_calls(iterations: int, rotate: int) -> range:
    """The timed calls whose outputs are kept and checked against the reference."""
    return range(iterations - rotate, iterations)
