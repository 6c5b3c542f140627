"""Reusable memfds for the candidate's outputs, one per evaluation in flight.

A fresh memfd's pages are allocated and zeroed as the candidate's job first writes them: on the lent H100
box (a virtual machine) that cost ~200 ms per 256 MiB output, against ~40 ms for writing pages the file
already has (benchmarks/probes/checked_call_probe.py, docs/benchmarks.md §3), about 1.4 s of a hit turn with
seven H100-sized outputs. So an Evaluator keeps its output files between evaluations. Before a file is lent
again, every page it holds is zeroed: the next candidate (perhaps another user's) must not read what the
last one wrote. Zeroing runs in a thread of its own after the evaluation, off the turn's critical path; an
evaluation that finds no clean file meanwhile gets a fresh one.
"""
from __future__ import annotations

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


class FilePool:
    def __init__(self, name: str = "kstudio-candidate-outputs") -> None:
        self.name = name
        self._clean: list[tuple[int, int]] = []  # (fd, capacity)
        self._lock = threading.Lock()
        self._scrubbers: list[threading.Thread] = []
        self._closed = False
        self._owned = 0  # files made and not yet closed: lent, being zeroed or clean

    @contextmanager
    def lend(self, capacity: int) -> Iterator[int]:
        """A memfd of `capacity` bytes holding only zeros, for the duration of the block."""
        fd = self._take(capacity)
        try:
            yield fd
        finally:
            scrubber = threading.Thread(target=self._give_back, args=(fd, capacity), name="kstudio-scrub", daemon=True)
            with self._lock:
                self._scrubbers = [t for t in self._scrubbers if t.is_alive()] + [scrubber]
            scrubber.start()

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
