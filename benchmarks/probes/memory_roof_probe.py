"""Is the memory roof above what eager's own elementwise kernels reach? (issue 21, docs/benchmarks.md §16)

The roof (peaks.memory_roof: the fastest of five kernels over 1 GiB buffers) against eager's ReLU, GELU and sum at
KernelBench level 1's own size (4096 x 393216 float32, 6 GiB in, 6 GiB out), timed the same way (best of 8 after two
warm-up calls, CUDA events). Every eager figure should be at or under the roof: a roof an honest kernel can beat is no
roof, and a time below it is rejected.

Usage (GPU box): PYTHONPATH=. python3 benchmarks/probes/memory_roof_probe.py [--rows 4096] [--cols 393216]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from agent.engine.evaluate.peaks import _best, memory_roof  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=393216)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    roof, kernels = memory_roof(device, (1 << 30) if device == "cuda" else (64 << 20))
    x = torch.rand(args.rows, args.cols, device=device)
    out = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    eager = {
        "relu": nbytes * 2 / _best(lambda: torch.clamp_min(x, 0, out=out), device, 8),
        "gelu": nbytes * 2 / _best(lambda: torch._C._nn.gelu(x, out=out), device, 8),
        "sum": nbytes / _best(lambda: x.sum(), device, 8),
    }
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    print(json.dumps({"device": name, "roof": roof, "memory_kernels": kernels, "eager": eager}, indent=1))
    for kernel, rate in {**kernels, **{f"eager {k}": v for k, v in eager.items()}}.items():
        print(f"{kernel:24s} {rate / 1e12:6.3f} TB/s  {rate / roof:6.1%} of the roof")


if __name__ == "__main__":
    main()
