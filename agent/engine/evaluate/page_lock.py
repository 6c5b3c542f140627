"""Page-locking host memory for the duration of device copies.

The outputs of an H100-sized problem (gigabytes over the seven checked calls) move between the GPU and the
memfd that carries them from the candidate's job to the reference's. From pageable memory the driver copies
through a small staging buffer of its own; from page-locked memory the copy is one DMA. cudaHostRegister locks
memory that is already mapped (the memfd's mapping), so nothing is copied twice. Measured on the lent H100 box
for 256 MiB (benchmarks/probes/checked_call_probe.py, docs/benchmarks.md §3): host to device 24 ms locked
against 54 ms pageable; device to host into pages the memfd already has, 40 ms against 37 ms, no gain. The
large cost there was allocating fresh memfd pages, which agent/engine/evaluate/file_pool.py removes.

Locking is an optimisation: where the driver refuses (a mapping it cannot pin, no libcudart to clear the
refusal with), the copy runs pageable and gives the same bytes.
"""
from __future__ import annotations

import ctypes
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

import torch

# Below this a pageable copy costs less than pinning and unpinning the pages.
MIN_BYTES = 4 << 20


@lru_cache(maxsize=1)
def _cudart() -> ctypes.CDLL | None:
    """The libcudart this process already loaded (torch's): a refused registration stays as the thread's
    last CUDA error, which the next launch check (the candidate's, or torch's) would report as its own,
    so locking is only tried where that error can be cleared again. None where cudart is not a shared
    library here."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libcudart.so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return ctypes.CDLL(path)  # already loaded: the same library instance, the same error state
        except OSError:
            continue
    return None


def lock(host: torch.Tensor) -> bool:
    """Lock the pages under a contiguous CPU tensor until unlock(); whether they were locked. Only where CUDA is
    already initialised in this process (locking never starts it) and the tensor is large enough to gain."""
    nbytes = host.numel() * host.element_size()
    library = _cudart() if torch.cuda.is_initialized() and nbytes >= MIN_BYTES else None
    if library is None:
        return False
    if int(torch.cuda.cudart().cudaHostRegister(host.data_ptr(), nbytes, 0)) == 0:
        return True
    library.cudaGetLastError()  # clear the refusal (see _cudart)
    return False


def unlock(host: torch.Tensor) -> None:
    """Undo lock(host); call it before the tensor's memory is freed."""
    torch.cuda.cudart().cudaHostUnregister(host.data_ptr())


@contextmanager
def page_locked(host: torch.Tensor) -> Iterator[bool]:
    """Lock the pages under a CPU tensor (contiguous, over a MAP_SHARED mapping) while the block runs; yields
    whether they were locked."""
    locked = lock(host)
    try:
        yield locked
    finally:
        if locked:
            unlock(host)
