"""Where does a checked call's time go at H100 size? (issue 2, turn latency)

The turn-latency benchmark's hit turns spend ~1.8 s in the candidate's 7 checked calls of 256 MiB outputs.
This times each piece of that path alone, in one process, on one 8192x8192 float32 output: the memfd hand-off
(a fresh memfd, the same memfd again, with and without page-locking), the allocator poisoning, the clones and
bitwise comparisons of the in-process checks, and the 20 ms settle sleep.

Usage (GPU box): python3 benchmarks/probes/checked_call_probe.py
"""
from __future__ import annotations

import json
import mmap
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from agent.engine.evaluate import tensor_file  # noqa: E402
from agent.engine.evaluate.guards import bitwise_equal  # noqa: E402
from agent.engine.evaluate.jobs import _poison  # noqa: E402
from agent.engine.evaluate.page_lock import page_locked  # noqa: E402


def timed(label: str, fn, results: dict[str, float], repeats: int = 3) -> None:
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1000)
    results[label] = round(min(samples), 2)
    print(f"{label}: {', '.join(f'{s:.1f}' for s in samples)} ms", flush=True)


def main() -> None:
    out = torch.randn(8192, 8192, device="cuda")
    nbytes = out.numel() * out.element_size()
    results: dict[str, float] = {}

    def put(fd: int, lock: bool) -> None:
        view = tensor_file._shared(fd, 0, out.dtype, list(out.shape))
        if lock:
            with page_locked(view):
                view.copy_(out)
        else:
            view.copy_(out)

    def fresh_memfd(lock: bool) -> None:
        fd = tensor_file.create(nbytes + (1 << 20))
        put(fd, lock)
        os.close(fd)

    timed("put into a fresh memfd, page-locked", lambda: fresh_memfd(True), results)
    timed("put into a fresh memfd, pageable", lambda: fresh_memfd(False), results)
    fd = tensor_file.create(nbytes + (1 << 20))
    put(fd, False)

    def same_memfd(lock: bool) -> None:
        put(fd, lock)

    timed("put into a reused memfd, page-locked", lambda: same_memfd(True), results)
    timed("put into a reused memfd, pageable", lambda: same_memfd(False), results)
    timed("map a reused memfd (MAP_POPULATE) only", lambda: tensor_file._shared(fd, 0, out.dtype, list(out.shape)), results)
    timed("first touch of fresh anonymous memory (fill 256 MiB)",
          lambda: torch.frombuffer(mmap.mmap(-1, nbytes), dtype=torch.uint8).fill_(1), results)
    view = tensor_file._shared(fd, 0, out.dtype, list(out.shape))
    timed("host to device from the reused memfd, page-locked", lambda: _h2d(view, True), results)
    timed("host to device from the reused memfd, pageable", lambda: _h2d(view, False), results)
    timed("poison: 4 blocks of the output's size", lambda: _poison([nbytes], "cuda"), results)
    timed("clone of the output", lambda: out.clone(), results)
    copy = out.clone()
    timed("bitwise_equal of two outputs", lambda: bitwise_equal(out, copy), results)
    timed("settle sleep", lambda: time.sleep(0.02), results)
    print(json.dumps(results))


def _h2d(view: torch.Tensor, lock: bool) -> None:
    if lock:
        with page_locked(view):
            view.to("cuda")
    else:
        view.to("cuda")


if __name__ == "__main__":
    main()
