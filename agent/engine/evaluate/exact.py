"""The reference evaluated in float64, for problems whose float32 reference is ill-conditioned.

Some references are noise in float32: the mean of a group-normalised tensor is exactly 0, and eager returns its
rounding error (~3e-8) against an absolute tolerance scaled by that noise (~3e-13), so no kernel that sums in another
order can pass. A float64 evaluation of the same model on the same inputs says how far the reference itself is from
the exact answer; compare.held_to_eager then holds the candidate to the reference's own accuracy there.

Runs in the reference's job only, on the model it built and the inputs it drew: nothing here is the candidate's, and
the candidate's outputs are only read. It runs only after a candidate failed a checked call (never for one that
passes), and for the keyed checks of the timed calls only once a checked call found the reference ill-conditioned
(Float64Reference.noise: on the timed calls' bases, and on them scaled as each wide call is, since the noise at one scale
bounds no other); all of them within a share of the job's time and the memory it has left.
"""
from __future__ import annotations

import copy
import os
import time
from typing import Any

import torch

from agent.engine.evaluate.batch import as_list

# A float64 copy of the model, its widened inputs, its outputs and intermediates beside what the job already holds:
# twice the float32 bytes of weights and inputs, and room for outputs and intermediates in float64 (CONTEXT_OUTPUTS
# outputs' worth) on top. Refused beyond what the job has left, so that the check never ends the job.
CONTEXT_OUTPUTS = 6
# The float64 runs of one evaluation together take at most this share of the reference job's wall-clock limit, and
# one is expected to take up to SLOWER times the float32 call it repeats: a candidate that fails on purpose cannot
# make the reference's job run out of time (its verdict would then be the problem's, not "incorrect").
SHARE = 0.1
SLOWER = 8.0


class Float64Reference:
    """The reference's float64 evaluations in one reference job, within their share of its time and its memory."""

    def __init__(self, model: Any, device: str, limits: Any) -> None:
        self.model, self.device, self.limits = model, device, limits
        self.seconds_left = SHARE * float(getattr(limits, "wall_seconds", 0) or 0)

    def outputs(self, inputs: list[Any], refs: list[torch.Tensor],
                float32_seconds: float) -> tuple[list[torch.Tensor] | None, str]:
        """The model's outputs in float64 on `inputs` (a float64 copy of the model, floating inputs widened), or None
        and why not: no time or room left for it, or the problem's code does not run in float64."""
        if SLOWER * float32_seconds > self.seconds_left:
            return None, (f"its float64 evaluation may take {SLOWER:g}x the float32 call's {float32_seconds:.2f} s, and "
                          f"{self.seconds_left:.1f} s of the reference job's time are left for such runs")
        need, room = _float64_bytes(self.model, inputs, refs), _room_bytes(self.device, self.limits)
        if need > room:
            return None, (f"a float64 evaluation of the reference needs about {need / 2**20:.0f} MiB and its job has "
                          f"{room / 2**20:.0f} MiB left")
        started = time.monotonic()
        wide = None
        try:
            wide = copy.deepcopy(self.model).double() if isinstance(self.model, torch.nn.Module) else self.model
            with torch.no_grad():
                outs = as_list(wide(*[_widened(v) for v in inputs]))
            if not all(isinstance(o, torch.Tensor) for o in outs):
                return None, "the reference's float64 evaluation did not return tensors"
            return [o.detach() for o in outs], ""
        except torch.OutOfMemoryError:
            return None, "a float64 evaluation of the reference ran out of memory"
        except Exception as exc:  # noqa: BLE001 - the problem's code may not run in float64: then nothing is re-judged
            return None, f"the reference does not run in float64 ({type(exc).__name__}: {exc})"[:400]
        finally:
            del wide
            if self.device == "cuda":
                torch.cuda.empty_cache()  # the candidate's job shares the device: give back what the float64 copy took
            self.seconds_left -= time.monotonic() - started

    def noise(self, bases: list[list[Any]]) -> list[float] | None:
        """Per output, the root-mean-square of the reference's own error from its float64 evaluation, the larger over
        the timed calls' two base sets (every timed input is a mix of them): what the keyed checks' bounds widen by
        (keyed.projection_bound). None where it cannot be measured (the checks then stay as strict as the trials')."""
        noise: list[float] | None = None
        for base in bases:
            started = time.monotonic()
            refs = as_list(self.model(*base))
            exacts, _ = self.outputs(base, refs, synced_seconds(self.device, started))
            if exacts is None or len(exacts) != len(refs):
                return None
            found = [_rms(r, x) for r, x in zip(refs, exacts)]
            noise = found if noise is None else [max(a, b) for a, b in zip(noise, found)]
            del exacts, refs
        return noise


def synced_seconds(device: str, started: float) -> float:
    """Seconds since `started` (time.monotonic()), the device's queued work included."""
    if device == "cuda":
        torch.cuda.synchronize()
    return time.monotonic() - started


def _rms(ref: Any, exact: torch.Tensor) -> float:
    if not isinstance(ref, torch.Tensor) or not ref.is_floating_point() or ref.numel() == 0 or ref.shape != exact.shape:
        return 0.0
    err = ref.detach().to(torch.float64, copy=True).sub_(exact).nan_to_num_(0.0, 0.0, 0.0)
    return float(err.square().mean().sqrt())


def _widened(value: Any) -> Any:
    return value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def _float64_bytes(model: Any, inputs: list[Any], refs: list[torch.Tensor]) -> int:
    state = list(model.state_dict().values()) if isinstance(model, torch.nn.Module) else []
    widen = lambda values: sum(v.numel() * 8 for v in values if isinstance(v, torch.Tensor))  # noqa: E731
    return widen(state) + widen(inputs) + CONTEXT_OUTPUTS * widen(refs)


def _room_bytes(device: str, limits: Any) -> int:
    """What this job may still allocate on `device`: on a GPU its share of the device less what its allocator holds
    in use; on the CPU its memory limit (the address-space rlimit there) less its address space now."""
    if device == "cuda":
        free, total = torch.cuda.mem_get_info()
        fraction = float(getattr(limits, "gpu_memory_fraction", None) or 0.9)
        share = int(fraction * total) - torch.cuda.memory_allocated()
        return max(0, min(free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated(), share))
    limit = getattr(limits, "memory_bytes", None)
    if limit is None:
        return 1 << 62
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    return max(0, int(limit) - size)
