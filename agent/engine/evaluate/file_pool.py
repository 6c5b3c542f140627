"""Reusable memfds for the files the jobs hand tensors through (tensor_file.py), one pair per evaluation in flight.

A fresh memfd's pages are allocated and zeroed as the candidate's job first writes them: on the lent H100
box (a virtual machine) that cost ~200 ms per 256 MiB output, against ~40 ms for writing pages the file
already has (benchmarks/probes/checked_call_probe.py, docs/benchmarks.md §3), about 1.4 s of a hit turn with
seven H100-sized outputs. So an Evaluator keeps its files between evaluations, with the pages the protocol
needed in them. Before a file is lent again, every page it holds is zeroed: the next candidate (perhaps
another user's) must not read what the last one wrote. Zeroing runs in a thread of its own after the
evaluation, off the turn's critical path; an evaluation that finds no clean file meanwhile gets a fresh one.

Only the pages the protocol needed are kept (`keep_pages`, from what the session saw written there): every page
past them is freed at once when the evaluation's block ends (`fallocate(FALLOC_FL_PUNCH_HOLE)`, about 0.14 s per
GiB held on the dev box), before the verdict. A job can write anywhere in these files through a shared mapping,
which its file-size rlimit does not stop and whose pages leave its resident memory once unmapped: zeroed and kept,
such pages stayed outside every limit between evaluations and were zeroed extent by extent while the next
evaluation was timed (the third red team's h3: 1 GiB written sparsely into each file, zeroed for 11.7 s after the
verdict). Where holes cannot be punched the file is closed instead, which frees its pages as well.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import threading
from contextlib import contextmanager
from typing import Iterator

import torch

import agent.engine.evaluate.tensor_file as tensor_file

# Clean files kept for later evaluations: enough for the evaluations one worker runs at once.
KEEP = 2
_CHUNK = 64 << 20  # zeroed through one mapping at a time, so scrubbing never maps gigabytes at once
# linux/falloc.h: free a range's pages, the file's size unchanged (it is sealed at its size anyway).
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_fallocate = getattr(_libc, "fallocate", None)
if _fallocate is not None:
    _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    _fallocate.restype = ctypes.c_int


class FilePool:
    def __init__(self, name: str = "kstudio-candidate-outputs") -> None:
        self.name = name
        self._clean: list[tuple[int, int]] = []  # (fd, capacity)
        self._lock = threading.Lock()
        self._scrubbers: list[threading.Thread] = []
        self._closed = False
        self._owned = 0  # files made and not yet closed: lent, being zeroed or clean
        self._keep: dict[int, int] = {}  # lent fd -> how many of its first bytes the protocol needed (keep_pages)

    @contextmanager
    def lend(self, capacity: int) -> Iterator[int]:
        """A memfd of `capacity` bytes holding only zeros, for the duration of the block."""
        fd = self._take(capacity)
        try:
            yield fd
        finally:
            with self._lock:
                keep = self._keep.pop(fd, 0)
            try:
                free_past(fd, keep)
            except OSError:
                self._discard(fd)  # closed: that frees its pages too
            else:
                scrubber = threading.Thread(target=self._give_back, args=(fd, capacity), name="kstudio-scrub",
                                            daemon=True)
                with self._lock:
                    self._scrubbers = [t for t in self._scrubbers if t.is_alive()] + [scrubber]
                scrubber.start()

    def keep_pages(self, fd: int, nbytes: int) -> None:
        """The first `nbytes` of a lent file are what the protocol wrote there: when its block ends they are zeroed and
        kept for the next evaluation's writes, and every page past them is freed (default: none kept)."""
        with self._lock:
            self._keep[fd] = max(0, nbytes)

    def _take(self, capacity: int) -> int:
        with self._lock:
            fd = self._pop_clean(capacity)
            scrubbing = [t for t in self._scrubbers if t.is_alive()]
            # Back-to-back evaluations (a batch) alternate between KEEP files, one used while the other is
            # zeroed: the KEEP-th file is made once, rather than waiting for a scrub every time.
            wait = fd is None and scrubbing and self._owned >= KEEP
        if wait:
            for thread in scrubbing:  # every file is out: one being zeroed (~0.2 s per 1.5 GB) is worth waiting for
                thread.join(timeout=2.0)
            with self._lock:
                fd = self._pop_clean(capacity)
        if fd is not None:
            return fd
        with self._lock:
            self._owned += 1
        return tensor_file.create(capacity, self.name)

    def _pop_clean(self, capacity: int) -> int | None:
        for i, (fd, size) in enumerate(self._clean):
            if size == capacity:
                del self._clean[i]
                return fd
        return None

    def _give_back(self, fd: int, capacity: int) -> None:
        try:
            # The file is sealed at its size (tensor_file.create): the jobs that held it could not resize it.
            scrub(fd)
        except OSError:
            self._discard(fd)
            return
        with self._lock:
            keep = not self._closed and len(self._clean) < KEEP
            if keep:
                self._clean.append((fd, capacity))
        if not keep:
            self._discard(fd)

    def _discard(self, fd: int) -> None:
        os.close(fd)
        with self._lock:
            self._owned -= 1

    def settle(self) -> None:
        """Wait until every file given back has been scrubbed."""
        with self._lock:
            scrubbers = list(self._scrubbers)
        for thread in scrubbers:
            thread.join()

    def close(self) -> None:
        """Closes every file once the scrubbers still running are done."""
        with self._lock:
            self._closed = True
        self.settle()
        with self._lock:
            for fd, _ in self._clean:
                os.close(fd)
            self._owned -= len(self._clean)
            self._clean.clear()


def free_past(fd: int, keep: int) -> None:
    """Free every page of the file past its first `keep` bytes (rounded up to a huge page): they read as zeros after.
    OSError where the file system cannot punch holes."""
    size = os.fstat(fd).st_size
    start = min(size, -(-keep // tensor_file.HUGE_PAGE) * tensor_file.HUGE_PAGE)  # a huge page kept whole
    if start >= size:
        return
    if _fallocate is None:
        raise OSError(errno.EOPNOTSUPP, "this C library has no fallocate")
    if _fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, start, size - start) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"freeing the file's pages failed: {os.strerror(code)}")


def scrub(fd: int) -> None:
    """Zero every page the file holds (its data extents; the holes read as zeros already), keeping the pages."""
    size = os.fstat(fd).st_size
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after offset
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        for chunk in range(start - start % mmap.PAGESIZE, end, _CHUNK):
            region = mmap.mmap(fd, min(_CHUNK, end - chunk), flags=mmap.MAP_SHARED, offset=chunk)
            view = torch.frombuffer(region, dtype=torch.uint8)
            view.zero_()  # torch's fill runs without the GIL, on several threads
            del view  # the mapping cannot close while a tensor still exports it
            region.close()
        offset = end
