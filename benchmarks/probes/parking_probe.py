"""What one park and return of a KernelBench-sized input set costs (the sequential fallback, memory.py AFTER):
a fresh `tensor.to("cpu")` each time (the engine before parking.py) against the shelf's reused page-locked buffer.

    python3 benchmarks/probes/parking_probe.py [--gib 6] [--repeats 3]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from agent.engine.evaluate.parking import Shelf  # noqa: E402


def timed(fn) -> float:
    torch.cuda.synchronize()
    began = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=6.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    numel = int(args.gib * (1 << 30)) // 4
    x = torch.rand(numel, device="cuda")
    gib = numel * 4 / (1 << 30)
    shelf = Shelf()
    for r in range(args.repeats):
        fresh: list[torch.Tensor] = []
        out = timed(lambda: fresh.append(x.to("cpu")))
        back = timed(lambda: fresh.append(fresh[0].to("cuda")))
        assert torch.equal(fresh[1], x)
        fresh.clear()
        parked: list = []
        s_out = timed(lambda: parked.append(shelf.park_sets("kept", [[x]])))
        s_back = timed(lambda: parked.append(Shelf.unpark_sets(parked[0], "cuda")))
        assert torch.equal(parked[1][0][0], x)
        parked.clear()
        print(f"{gib:.1f} GiB, repeat {r + 1}: fresh to('cpu') {out:.2f} s ({gib / out:.1f} GiB/s), back {back:.2f} s "
              f"({gib / back:.1f} GiB/s) | shelf park {s_out:.2f} s ({gib / s_out:.1f} GiB/s), back {s_back:.2f} s "
              f"({gib / s_back:.1f} GiB/s)", flush=True)


if __name__ == "__main__":
    main()
