"""Diagnostic (session 42): one silu+bias kernel's device time per call, back to back on one input, and right after a
kernel that wrote a fresh input (as the engine's timed batches derive each call's inputs)."""
import importlib.util
import sys

import torch
import torch.nn.functional as F


def load(path):
    spec = importlib.util.spec_from_file_location(path.rsplit("/", 1)[-1][:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(fn, prepare, n=40):
    evs = []
    for i in range(n):
        prepare(i)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i)
        b.record()
        evs.append((a, b))
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) * 1000 for a, b in evs[5:])
    return t[len(t) // 2]


rows, cols = 16384, 4096
base = torch.randn(rows, cols, device="cuda")
xs = [torch.empty_like(base) for _ in range(2)]
for x in xs:
    x.copy_(base)
bias = torch.randn(cols, device="cuda") * 0.1
kernels = {"eager": lambda x: F.silu(x) + bias}
for path in sys.argv[1:]:
    m = load(path).ModelNew(cols).cuda()
    m.bias.data.copy_(bias)
    kernels[path.rsplit("/", 1)[-1][:-3]] = m
keep = []
for name, f in kernels.items():
    with torch.no_grad():
        same = timed(lambda i: keep.append(f(xs[0])), lambda i: keep.clear())
        fresh = timed(lambda i: keep.append(f(xs[i % 2])), lambda i: (keep.clear(), torch.mul(base, 1.0 + i * 1e-3, out=xs[i % 2])))
        fresh_y = timed(lambda i: keep.append(f(xs[i % 2])), lambda i: torch.mul(base, 1.0 + i * 1e-3, out=xs[i % 2]))
    print(f"{name}: same input {same:.1f} us, after a write of the input {fresh:.1f} us, outputs kept {fresh_y:.1f} us", flush=True)
    keep.clear()
