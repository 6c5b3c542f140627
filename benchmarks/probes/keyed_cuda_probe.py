"""The fused keyed kernels (agent/engine/evaluate/keyed_cuda.py) against torch's ops (keyed._lerped and the per-piece
projection) on a GPU: compile time, per-call device time, and whether they compute what they claim.

    PYTHONPATH=$PWD python3 benchmarks/probes/keyed_cuda_probe.py [--sizes 1048576,16777216]
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from agent.engine.evaluate import keyed
from agent.engine.evaluate.keyed_cuda import Kernels


def device_ms(fn, repeats: int = 30) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


def torch_projection(y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return weights.mul(y.reshape(-1)).nan_to_num_(0.0, 0.0, 0.0).sum(dtype=torch.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="65536,1048576,16777216,67108864")
    args = parser.parse_args()
    torch.zeros(1, device="cuda")  # the CUDA context first: a job has one before it mixes anything
    torch.cuda.synchronize()
    started = time.perf_counter()
    kernels = Kernels.load()
    report: dict = {"compile_and_load_s": round(time.perf_counter() - started, 4), "device": torch.cuda.get_device_name()}
    print("compile and load (CUDA context already made):", report["compile_and_load_s"], "s", flush=True)
    rows = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n in [int(s) for s in args.sizes.split(",")]:
            if dtype != torch.float32 and n != 16777216:
                continue
            g = torch.Generator(device="cuda").manual_seed(1)
            a = torch.randn(n, device="cuda", generator=g).to(dtype)
            b = torch.randn(n, device="cuda", generator=g).to(dtype)
            mixed = kernels.mix(a, b, 12345, None)
            again = kernels.mix(a, b, 12345, None)
            other = kernels.mix(a, b, 12346, None)
            low, high = torch.minimum(a, b), torch.maximum(a, b)
            u = ((mixed.float() - a.float()) / (b.float() - a.float())).nan_to_num(0.5)
            fused_pools = keyed.Pools(0, fused=True)
            weights = kernels.weights(n, keyed._seed(7, 1000), a.device)
            y = torch.randn(n, device="cuda", generator=g).to(dtype)
            exact = float(torch.dot(weights.double(), y.double()))
            fused = float(keyed.project([y], 7, fused_pools)[0])
            sums = kernels.bound_sums(y, keyed._seed(7, 1000))
            w2, ya = weights.double().square(), y.double().abs()
            expected_sums = [float((w2 * ya * ya).sum()), float((w2 * ya).sum()), float(w2.sum()),
                             float((weights.double().abs() * ya).sum()), float(ya.max())]
            pools = keyed.Pools(5)
            old_mix = device_ms(lambda: keyed._lerped(a, b, keyed._generator(a.device, 3, 0)))
            new_mix = device_ms(lambda: kernels.mix(a, b, 3, None))
            old_project = device_ms(lambda: keyed.project([y], 3, pools))
            new_project = device_ms(lambda: keyed.project([y], 3, fused_pools))
            copy = device_ms(lambda: a.clone())
            row = {
                "dtype": str(dtype).replace("torch.", ""), "n": n,
                "mix_between": bool(((mixed >= low) & (mixed <= high)).all()),
                "mix_repeatable": bool(torch.equal(mixed, again)),
                "mix_differs": float((mixed != other).float().mean()),
                "u_mean": float(u.mean()), "u_std": float(u.std()),
                "weights_mean": float(weights.mean()), "weights_std": float(weights.std()),
                "project_rel_err": abs(fused - exact) / float(torch.dot(weights.double().abs(), y.double().abs())),
                "bound_sums_rel_err": max(abs(s - e) / max(abs(e), 1e-30) for s, e in zip(sums, expected_sums)),
                "torch_mix_ms": round(old_mix, 4), "fused_mix_ms": round(new_mix, 4),
                "torch_project_ms": round(old_project, 4), "fused_project_ms": round(new_project, 4),
                "clone_ms": round(copy, 4),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    # Kept elements: an infinity in the bases keeps a's value, never NaN.
    a = torch.tensor([0.0, float("-inf"), 1.0, float("inf")] * 64, device="cuda")
    b = torch.tensor([1.0, float("-inf"), 2.0, 5.0] * 64, device="cuda")
    kept = ~torch.isfinite(a - b)
    out = kernels.mix(a, b, 9, kept)
    report["kept_ok"] = bool(torch.equal(out[kept], a[kept]) and torch.isfinite(out[~kept]).all())
    report["rows"] = rows
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}), flush=True)


if __name__ == "__main__":
    main()
