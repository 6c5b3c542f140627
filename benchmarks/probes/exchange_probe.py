"""Where does a correctness trial's time go for a KernelBench-sized tensor? (issue 21: a checked call of a 6 GiB
problem took ~10 s on the H100, four hand-offs through the memfds of tensor_file.py)

Times each step of one hand-off of a `--gib` GiB float32 tensor through a memfd, as tensor_file.py does it today
(map with MAP_POPULATE, cudaHostRegister, the copy, cudaHostUnregister, unmap), and the alternatives: the copy alone
into a mapping kept from before (pages locked once, or never).

Usage (GPU box): python3 benchmarks/probes/exchange_probe.py --gib 6
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from agent.engine.evaluate import tensor_file  # noqa: E402
from agent.engine.evaluate.page_lock import lock, unlock  # noqa: E402


def clock(results: dict[str, list[float]], label: str, fn) -> object:
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    results.setdefault(label, []).append(round(time.perf_counter() - start, 3))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    nbytes = int(args.gib * (1 << 30))
    numel = nbytes // 4
    fd = os.memfd_create("exchange-probe")
    os.ftruncate(fd, nbytes)
    gpu = torch.randn(numel, device="cuda")
    back = torch.empty_like(gpu)
    results: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        # Today's hand-off, twice per direction per trial: a fresh mapping, locked, copied, unlocked, unmapped.
        view = clock(results, "map_populate", lambda: tensor_file._shared(fd, 0, torch.float32, [numel]))
        locked = clock(results, "register", lambda: lock(view))
        clock(results, "d2h_locked", lambda: view.copy_(gpu))
        clock(results, "h2d_locked", lambda: back.copy_(view))
        if locked:
            clock(results, "unregister", lambda: unlock(view))
        clock(results, "d2h_pageable", lambda: view.copy_(gpu))
        clock(results, "h2d_pageable", lambda: back.copy_(view))
        view = None  # the mapping goes with the tensor
    print(json.dumps({"gib": args.gib, "device": torch.cuda.get_device_name(), "seconds": results}))


if __name__ == "__main__":
    main()
