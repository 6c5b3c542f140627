"""Where a job's device state waits on the host in the sequential fallback (memory.py AFTER).

Each park moves gigabytes (two or three 6 GiB input sets for KernelBench's 19_ReLU) off the device and back. Into a
fresh `tensor.to("cpu")` every time, each park paid for new host pages (the kernel zeroes and maps every 4 KiB
of them) and copied through the driver's small pageable staging buffer: about 30 s per correctness trial on the
H100 for 6 GiB inputs. A shelf keeps one host buffer per slot for the job's whole life, page-locked once, so every
later park and return is a DMA into pages that already exist.

Slots are positions (the n-th kept input set, its j-th tensor), not call indices, so a job that parks the inputs
of trial 2 and later those of trial 3 reuses one buffer: the host memory held is what one park needs at most
(memory.candidate_parked / reference_parked, which the job's resident-memory limit is raised by).
"""
from __future__ import annotations

from typing import Any, Hashable

import torch

from agent.engine.evaluate.page_lock import lock, unlock


class Shelf:
    """Host buffers, one per slot, reused at every park of the job."""

    def __init__(self) -> None:
        self._buffers: dict[Hashable, tuple[torch.Tensor, bool]] = {}  # slot -> (flat uint8 buffer, page-locked)

    def park(self, slot: Hashable, value: Any) -> Any:
        """`value` (a tensor on the GPU) copied into the slot's buffer; returns the host tensor, valid until the slot
        is parked into again. Anything else (a CPU tensor, a number, a strided view) goes as `.to("cpu")` would."""
        if not isinstance(value, torch.Tensor):
            return value
        nbytes = value.numel() * value.element_size()
        if value.device.type != "cuda" or not value.is_contiguous() or nbytes == 0:
            return value.to("cpu")
        buffer, locked = self._buffer(slot, nbytes)
        host = buffer[:nbytes].view(value.dtype).view(value.shape)
        host.copy_(value, non_blocking=locked)  # synchronised by settle() before the device memory is freed
        return host

    def park_sets(self, kind: str, sets: list[list[Any]]) -> list[list[Any]]:
        """Input sets (lists of tensors and values), the n-th of them in slots (kind, n, j)."""
        return [[self.park((kind, n, j), v) for j, v in enumerate(values)] for n, values in enumerate(sets)]

    @staticmethod
    def unpark_sets(sets: list[list[Any]], device: str) -> list[list[Any]]:
        """Input sets back on `device`: from page-locked buffers the copies overlap, settle() waits for them."""
        return [[v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for v in values] for values in sets]

    @staticmethod
    def settle(device: str) -> None:
        """Wait for the copies started by park and unpark_sets (their host buffers are reused by the next park)."""
        if device == "cuda":
            torch.cuda.synchronize()

    def _buffer(self, slot: Hashable, nbytes: int) -> tuple[torch.Tensor, bool]:
        held = self._buffers.get(slot)
        if held is not None and held[0].numel() >= nbytes:
            return held
        if held is not None:
            torch.cuda.synchronize()  # no copy may still use the buffer that is freed now
            if held[1]:
                unlock(held[0])
        buffer = torch.empty(nbytes, dtype=torch.uint8)
        self._buffers[slot] = (buffer, lock(buffer))
        return self._buffers[slot]

    @property
    def held_bytes(self) -> int:
        return sum(buffer.numel() for buffer, _ in self._buffers.values())
