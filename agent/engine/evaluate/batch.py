"""One timed batch inside a job: keyed inputs, the calls, keyed projections of their outputs (keyed.py).

The parent's clock, not this code, says how long a batch took (session.py): it starts when the parent writes
the command and stops when the reply is read. Device events around the batch are reported beside it, as a
figure the parent compares with its own and never takes on trust.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from agent.engine.evaluate.keyed import Pools, derive, project
from agent.engine.evaluate.parking import Shelf


def as_list(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def run_batch(fn: Callable[..., Any], bases: list[list[Any]], keys: list[int], device: str, pools: Pools) -> dict[str, Any]:
    """Calls fn once per key on that key's inputs; returns each call's projections (and device events)."""
    cuda = device == "cuda"
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    sums = []
    with torch.no_grad():
        for key in keys:
            outs = as_list(fn(*derive(bases, key, pools)))
            bad = [type(o).__name__ for o in outs if type(o) is not torch.Tensor]
            if bad:
                raise TypeError(f"forward returned {', '.join(bad)} instead of torch.Tensor outputs")
            sums.append(project(outs, key, pools))
    if cuda:
        end.record()
        # Every stream's work, not only the current one's, inside the batch and so inside the parent's clock: work a
        # forward left running on a stream of its own is not moved into the next command's time. (Not after every call:
        # that leaves each call's launch latency in the figures, for the baselines too, and on the H100 took identical
        # code from 0.96-1.05x to 0.80-1.09x and the cache-hit turn past 10 s: docs/benchmarks.md §15, session 18.)
        torch.cuda.synchronize()
    projections = torch.stack(sums).cpu().tolist() if sums else []  # read back once, at the end
    reply: dict[str, Any] = {"projections": projections}
    if cuda:
        reply["events_ms"] = start.elapsed_time(end)
    return reply


def parking(state: Any, name: str) -> dict[str, Any] | None:
    """The sequential fallback (memory.py), alike in both jobs: "park" moves the job's own device state to the host
    (state.move, into its shelf: parking.py) until its next command moves it back. Returns the reply to "park", else
    None."""
    if name == "park":
        state.move(to_host=True)
        Shelf.settle(state.device)
        state.parked = True
        if state.device == "cuda":
            torch.cuda.empty_cache()
        return {"ok": True}
    if state.parked and name != "exit":
        state.move(to_host=False)
        Shelf.settle(state.device)
        state.parked = False
    return None


def ping(device: str) -> dict[str, Any]:
    """Before every timed batch, in every job alike: the process is awake and its GPU context current."""
    if device == "cuda":
        torch.empty(1, device="cuda").fill_(0)
        torch.cuda.synchronize()
    return {"ok": True}


def probe_ms(cycles: int) -> float:
    """Device time of a fixed spin: longer than usual means another context is using the GPU."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)
