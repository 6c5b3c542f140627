"""What the harness of the candidate's job costs per timed call on the CPU, outside any evaluation: the op census
around a forward of k PyTorch calls (candidate_job._checked_outputs against the bare forward) and the CPU's keyed mix
and projection of one floating tensor (keyed.derive, keyed.project_rows). Best of many repeats, one thread; run it
in two trees to compare engines.

    PYTHONPATH=$PWD python3 benchmarks/probes/harness_cost_probe.py [--calls 1,50] [--sizes 65536,1048576,4194304]
"""
from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import torch

from agent.engine.evaluate import keyed
from agent.engine.evaluate.candidate_job import _Census, _checked_outputs


class _Chain(torch.nn.Module):
    """A forward of `k` PyTorch calls that do next to nothing (torch.empty_like): what the census adds is all there is."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.k):
            x = torch.empty_like(x)
        return x


def _best_us(fns: dict[str, Callable[[], Any]], repeats: int, inner: int) -> dict[str, float]:
    """Each function's best time per call (us) over `repeats` rounds of `inner` calls, the functions interleaved."""
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            started = time.perf_counter()
            for _ in range(inner):
                fn()
            best[name] = min(best[name], (time.perf_counter() - started) / inner * 1e6)
    return best


def census_rows(calls: list[int]) -> list[str]:
    x = torch.ones(16)
    rows = []
    for allowed in (frozenset({"empty_like"}), frozenset({"*"})):
        census = _Census(allowed, "cpu")  # pushed as before a candidate's import, popped as after its checked calls
        census.finish()
        for k in calls:
            model = _Chain(k)
            timed = _checked_outputs(model, [(x.shape, x.dtype)], census)
            best = _best_us({"bare": lambda: model(x), "census": lambda: timed(x)}, repeats=30, inner=300)
            extra = best["census"] - best["bare"]
            rows.append(f"| {'every op' if '*' in allowed else 'an allow-list'} | {k} | {best['bare']:.2f} | "
                        f"{best['census']:.2f} | {extra:.2f} | {extra / k:.2f} |")
    return rows


def harness_rows(sizes: list[int]) -> list[str]:
    rows = []
    for n in sizes:
        pools = keyed.Pools(seed=123)
        generator = torch.Generator().manual_seed(0)
        a, b, y = (torch.randn(n, generator=generator) for _ in range(3))
        keyed.derive([[a], [b]], 1, pools)  # the pools are drawn once per evaluation, outside every batch
        keyed.project_rows([y], 1, pools)
        keys = iter(range(2, 1 << 30))
        best = _best_us({"mix": lambda: keyed.derive([[a], [b]], next(keys), pools),
                         "projection": lambda: keyed.project_rows([y], next(keys), pools)}, repeats=20, inner=1)
        rows.append(f"| {n} | {best['mix'] / 1000:.3f} | {best['projection'] / 1000:.3f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", default="1,50", help="PyTorch calls per forward, comma-separated")
    parser.add_argument("--sizes", default="65536,1048576,4194304", help="elements of the mixed and projected tensor")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| allowed | PyTorch calls per forward | bare forward us | with the census us | added us | added us per call |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(census_rows([int(k) for k in args.calls.split(",")])))
    print("\n| elements | mix ms | projection ms |")
    print("| --- | --- | --- |")
    print("\n".join(harness_rows([int(n) for n in args.sizes.split(",")])))


if __name__ == "__main__":
    main()
