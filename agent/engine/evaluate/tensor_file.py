"""Tensors handed from one sandboxed job to another through a memfd the trusted parent owns.

The candidate's outputs of an H100-sized problem are gigabytes. Through pipes they were copied
five times (device to host, serialise, pipe, parent, pipe again); through a memfd they are copied
from the device straight into shared memory by the candidate's job and read back by the reference
job's mapping, and the parent never touches them. The layout (what lies where) is written by a
process that ran candidate code, so the reader trusts none of it: every entry is checked against
the file before a byte is read.
"""
from __future__ import annotations

import fcntl
import math
import mmap
import os
from typing import Any

import torch

from agent.engine.evaluate.page_lock import page_locked

_ALIGN = mmap.PAGESIZE  # mmap offsets must be page-aligned
_DTYPES = {str(d): d for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64,
                               torch.complex128, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                               torch.bool)}
_MAX_ENTRIES = 100_000
_MAX_EXTENT = 1 << 62  # the product of a shape's non-zero dimensions: torch's sizes are int64
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux only; elsewhere pages fault in as usual
HUGE_PAGE = 2 << 20  # the largest page shmem backs a file with on x86-64 (transparent huge pages)

Key = tuple[Any, ...]


class TensorFileError(ValueError):
    """The layout does not describe the file: written by a crashed or tampered-with process."""


def create(capacity: int, name: str = "kstudio-tensors") -> int:
    """A new anonymous in-memory file of `capacity` bytes, sized here (by the trusted parent) and sealed at
    that size: a job writes within it and can neither grow it (its file-size rlimit stays as tight as for disk
    files) nor shrink it, which matters because the reference's job reads it while the candidate's job still
    runs: a page cut off under the reader's mapping would kill the reader with SIGBUS. Pages cost memory only
    once written. The caller closes it."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, capacity)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def held_bytes(fd: int) -> int:
    """The memory the file holds now: its allocated pages, whoever wrote them and however (through a mapping too)."""
    return os.fstat(fd).st_blocks * 512


def needed_bytes(layout: Any, size: int, prefix: str | None = None) -> int:
    """The most a file of `size` bytes holding what `layout` describes may hold (held_bytes): each entry's bytes rounded
    up to a page, and room for a huge page per entry and one more (shmem may back a file with transparent huge pages).
    `prefix`: only the entries a reader's tensors(prefix) reads, (prefix, 0), (prefix, 1), ... up to the first gap. A
    layout that does not describe the file needs nothing: no reader reads any of it."""
    try:
        entries = _checked_layout(layout, size)
    except TensorFileError:
        return 0
    if prefix is not None:
        entries = {i: entries[(prefix, i)] for i in range(_chain_length(entries, (prefix,)))}
    if not entries:
        return 0
    return sum(_round_up(nbytes) for _, _, _, nbytes in entries.values()) + HUGE_PAGE * (len(entries) + 1)


def _chain_length(entries: dict[Key, Any], prefix: tuple[Any, ...]) -> int:
    """How many of prefix + (0,), prefix + (1,), ... are keys of `entries`, up to the first gap."""
    n = 0
    while (*prefix, n) in entries:
        n += 1
    return n


def _round_up(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class TensorFileWriter:
    """Appends tensors to the file; `layout` (JSON-serialisable) says where each one went."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.capacity = os.fstat(fd).st_size
        self.size = 0
        self.layout: list[dict[str, Any]] = []

    def put(self, key: list[Any], tensor: torch.Tensor) -> None:
        t = tensor.detach()
        if str(t.dtype) not in _DTYPES:
            raise TypeError(f"cannot pass a {t.dtype} tensor between jobs")
        nbytes = t.numel() * t.element_size()
        offset = self.size
        if offset + nbytes > self.capacity:
            raise TensorFileError(f"the outputs exceed {self.capacity / (1 << 30):.1f} GiB in all (the job's memory limit); "
                                  f"a {tuple(t.shape)} {t.dtype} output does not fit")
        self.size = offset + _round_up(max(nbytes, 1))
        if nbytes:
            view = _shared(self.fd, offset, t.dtype, list(t.shape))
            with page_locked(view):  # a no-op unless the output is on a GPU (CUDA initialised) and large
                view.copy_(t)  # from a GPU the one device-to-host copy, a DMA where the pages could be locked
        self.layout.append({"key": list(key), "shape": list(t.shape), "dtype": str(t.dtype), "offset": offset,
                            "nbytes": nbytes})


class TensorFileReader:
    """Tensors of a file written by TensorFileWriter, as CPU tensors over private mappings. Entries may come
    in several batches (add) while the writer still runs; the first entry for a key is the one kept."""

    def __init__(self, fd: int, layout: Any = None) -> None:
        self._fd = fd
        self._size = os.fstat(fd).st_size
        self._entries: dict[Key, tuple[torch.dtype, list[int], int, int]] = {}
        if layout is not None:
            self.add(layout)

    def add(self, layout: Any) -> list[Key]:
        """Check and take more entries; returns the keys that were new."""
        new = [(k, v) for k, v in _checked_layout(layout, self._size).items() if k not in self._entries]
        self._entries.update(new)
        return [k for k, _ in new]

    def keys(self) -> list[Key]:
        return list(self._entries)

    def count(self, *prefix: Any) -> int:
        """How many entries prefix + (0,), prefix + (1,), ... there are, up to the first gap; nothing is mapped."""
        return _chain_length(self._entries, prefix)

    def described(self, key: Key) -> tuple[torch.dtype, list[int]] | None:
        """An entry's dtype and shape as its writer described them, or None; nothing is mapped."""
        entry = self._entries.get(tuple(key))
        return None if entry is None else (entry[0], list(entry[1]))

    def has(self, key: Key) -> bool:
        return tuple(key) in self._entries

    def get(self, key: Key) -> torch.Tensor | None:
        entry = self._entries.get(tuple(key))
        if entry is None:
            return None
        dtype, shape, offset, nbytes = entry
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype)
        # A private (copy-on-write) mapping: writable for torch, yet nothing written here reaches the file.
        region = mmap.mmap(self._fd, nbytes, access=mmap.ACCESS_COPY, offset=offset)
        return torch.frombuffer(region, dtype=dtype, count=nbytes // _itemsize(dtype)).view(shape)

    def tensors(self, *prefix: Any) -> list[torch.Tensor]:
        """The tensors whose keys are prefix + (0,), prefix + (1,), ... in order, up to the first gap."""
        return [self.get((*prefix, i)) for i in range(self.count(*prefix))]

    def device_tensors(self, device: str, *prefix: Any) -> list[torch.Tensor]:
        """As tensors(), copied to `device` (on the CPU too: the writer may still be running, and what is
        compared must not change under the comparison). To a GPU each is read through a shared mapping of
        its own whose pages are locked for the copy (a private mapping's pages could only be locked by
        copying them)."""
        out: list[torch.Tensor] = []
        while (tensor := self.device_tensor((*prefix, len(out)), device)) is not None:
            out.append(tensor)
        return out

    def device_tensor(self, key: Key, device: str) -> torch.Tensor | None:
        """One entry as device_tensors() gives it, or None where the key has none."""
        if device != "cuda":
            found = self.get(key)
            return None if found is None else found.clone()
        entry = self._entries.get(tuple(key))
        if entry is None:
            return None
        dtype, shape, offset, nbytes = entry
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype, device=device)
        view = _shared(self._fd, offset, dtype, shape)
        with page_locked(view):
            return view.to(device)


def _shared(fd: int, offset: int, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    """A tensor over a shared mapping of the file at `offset`; the mapping goes when the tensor does."""
    numel = math.prod(shape)
    # MAP_POPULATE: the kernel allocates (or maps) the pages in one go, not one fault per 4 KiB during the copy.
    region = mmap.mmap(fd, numel * _itemsize(dtype), flags=mmap.MAP_SHARED | _POPULATE, offset=offset)
    return torch.frombuffer(region, dtype=dtype, count=numel).view(shape)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _checked_layout(layout: Any, size: int) -> dict[Key, tuple[torch.dtype, list[int], int, int]]:
    if not isinstance(layout, list) or len(layout) > _MAX_ENTRIES:
        raise TensorFileError("the tensor layout is not a list of at most 100000 entries")
    entries: dict[Key, tuple[torch.dtype, list[int], int, int]] = {}
    for entry in layout:
        try:
            key = tuple(entry["key"])
            dtype = _DTYPES[entry["dtype"]]
            shape = [int(n) for n in entry["shape"]]
            offset, nbytes = int(entry["offset"]), int(entry["nbytes"])
        except (TypeError, KeyError, ValueError) as exc:
            raise TensorFileError(f"malformed tensor layout entry {entry!r}: {exc}") from exc
        if not all(isinstance(k, (str, int)) for k in key):
            raise TensorFileError(f"entry key {entry['key']!r} is not a list of strings and integers")
        numel, extent = 1, 1
        for n in shape:
            if n < 0:
                raise TensorFileError(f"negative dimension in {entry!r}")
            numel *= n
            extent *= max(n, 1)
        if extent >= _MAX_EXTENT:  # torch cannot even describe it, though an empty one holds no byte
            raise TensorFileError(f"entry {key} has a shape no tensor can have: {shape}")
        if numel * _itemsize(dtype) != nbytes:
            raise TensorFileError(f"entry {key} claims {nbytes} bytes for shape {shape} of {dtype}")
        if offset < 0 or offset % _ALIGN or offset + nbytes > size:
            raise TensorFileError(f"entry {key} lies outside the {size}-byte file (offset {offset}, {nbytes} bytes)")
        entries[key] = (dtype, shape, offset, nbytes)
    return entries
