"""Sandbox job: the device's measured peaks, the roofs a kernel's speed-of-light fraction is taken against.

Our code only: no problem's and no candidate's code ever runs in this process, so nothing a user wrote can move a
roof. The parent runs it once per device (and thread count) and keeps the answer in its trusted store, which no
job can see (Evaluator.device_peaks, like the compile baselines); every verdict on that device reads it there.

  copy_bytes_per_s    the memory roof: the best bytes per second (read plus written) of several kernels over a buffer
                      far larger than any cache: copies (bytes and float32), an elementwise float32 op, a fill
                      (writes only) and a sum (reads only). One copy alone read about 8% below what eager's own ReLU
                      reached on the H100 (docs/benchmarks.md §16), and a roof an honest kernel can beat is no roof.
  memory_kernels      each of those kernels' bytes per second, for the record
  fp32_flops_per_s    FP32 matmul without tensor cores (TF32 off on a GPU; torch's CPU GEMM on every core it may use)
  tensor_flops_per_s  on a GPU, a BF16 matmul on the tensor cores: the fastest compute roof a kernel can reach
  cache_bytes         the last-level cache (a GPU's L2, the CPU's largest): data that may never reach memory

Each figure is the best of several repetitions: a peak is what the device can do, and a rerun can only be slower.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable

import torch

from agent.engine.evaluate.codec import write_result
from agent.engine.evaluate.jobs import setup_device

# Changes when what a peak means changes: cached peaks of another protocol are measured again.
PEAKS_PROTOCOL = "3"  # 2: the CPU roofs on every core the job may use; 3: the memory roof, best of several kernels


def measure(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    device = payload["device"]
    cuda = device == "cuda"
    # A physical roof: on the CPU every core this job may run on (a candidate's own threads could use them all),
    # not the thread count the evaluation's jobs share for fairness.
    setup_device(device, context["limits"], None if cuda else max(1, len(os.sched_getaffinity(0))))
    roof, kernels = memory_roof(device, (1 << 30) if cuda else (256 << 20))
    peaks: dict[str, Any] = {"copy_bytes_per_s": roof, "memory_kernels": kernels}
    n = 8192 if cuda else 1024
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    peaks["fp32_flops_per_s"] = 2 * n ** 3 / _best(lambda: torch.mm(a, b), device, 5)
    if cuda:
        a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
        peaks["tensor_flops_per_s"] = 2 * n ** 3 / _best(lambda: torch.mm(a, b), device, 10)
        props = torch.cuda.get_device_properties(0)
        peaks["cache_bytes"] = int(getattr(props, "L2_cache_size", 0) or 0)
        peaks["device_name"] = props.name
    else:
        peaks["cache_bytes"] = _cpu_cache_bytes()
    write_result(result, {"peaks": peaks})


def memory_roof(device: str, nbytes: int) -> tuple[float, dict[str, float]]:
    """The best bytes moved per second (read plus written) over `nbytes` buffers (twice the largest cache, or more),
    and each kernel's figure. Kernels differ in how close they come to the memory's peak (access width, the mix of
    reads and writes), so the roof is the fastest of them."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    src_f, dst_f = src.view(torch.float32), dst.view(torch.float32)
    kernels: dict[str, tuple[Callable[[], Any], int]] = {
        "copy (bytes)": (lambda: dst.copy_(src), 2 * nbytes),
        "copy (float32)": (lambda: dst_f.copy_(src_f), 2 * nbytes),
        "elementwise (float32)": (lambda: torch.neg(src_f, out=dst_f), 2 * nbytes),
        "fill (writes only)": (lambda: dst_f.fill_(0.5), nbytes),
        "sum (reads only)": (lambda: src_f.sum(), nbytes),
    }
    rates = {name: moved / _best(fn, device, 8) for name, (fn, moved) in kernels.items()}
    return max(rates.values()), rates


def _best(fn: Callable[[], Any], device: str, repeats: int) -> float:
    """The fastest of `repeats` calls after two warm-up calls, in seconds."""
    cuda = device == "cuda"
    for _ in range(2):
        fn()
    if cuda:
        torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1000)
        else:
            began = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - began)
    return best


def _cpu_cache_bytes() -> int:
    """The largest cache sysfs lists for CPU 0 (its last level), in bytes; 0 where none is listed."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=0)
