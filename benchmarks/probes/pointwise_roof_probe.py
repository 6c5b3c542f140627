"""How close to the memory roof each pointwise kernel shape gets, against eager and torch.compile (H100).

The built-in policy's pointwise template (a grid-stride loop, one float4 per thread per step, at most 16 blocks per
SM) ran KernelBench's 19_ReLU (4096 x 393216 float32) at 85% of the roof where eager and torch.compile ran at ~94%
(docs/benchmarks.md §14). This times the shapes a template could take, on ReLU (one read, one write) and on a
two-input op with a broadcast row (x * w[c] + b[c]), at KernelBench's size and at 16 Mi elements, with CUDA events
(median of repeats, the L2 flushed by the size itself). Nothing here is a verdict: it picks the template.

Usage (GPU box): python3 benchmarks/probes/pointwise_roof_probe.py [--rows 4096 --cols 393216] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

HEAD = "typedef long long i64;\n"

# Each kernel computes o = f(x [, w[c], b[c]]) over n elements of rows of `cols`; {OP} is the scalar expression of v.
SOURCES = {
    # Today's template: grid-stride, one float4 per thread per step, blocks = min(n/4/threads, 16 * SMs).
    "stride_v4": """
extern "C" __global__ void k(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                             float* __restrict__ o) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 q = (i64)blockIdx.x * blockDim.x + threadIdx.x; q < N4; q += stride) {
        const i64 i0 = q * 4, r = i0 / COLS, c0 = i0 - r * COLS; (void)r;
        const float4 v4 = *reinterpret_cast<const float4*>(&x[i0]);
        float4 out4; float v;
        v = v4.x; { const i64 c = c0 + 0; out4.x = OP; }
        v = v4.y; { const i64 c = c0 + 1; out4.y = OP; }
        v = v4.z; { const i64 c = c0 + 2; out4.z = OP; }
        v = v4.w; { const i64 c = c0 + 3; out4.w = OP; }
        *reinterpret_cast<float4*>(&o[i0]) = out4;
    }
}""",
    # One block per chunk of UNROLL float4s per thread, loads issued before any store (PyTorch's shape).
    "chunk_v4xU": """
extern "C" __global__ void k(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                             float* __restrict__ o) {
    const i64 base = (i64)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
    float4 in[UNROLL];
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const i64 q = base + (i64)u * blockDim.x;
        if (q < N4) in[u] = LOAD(reinterpret_cast<const float4*>(x) + q);
    }
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const i64 q = base + (i64)u * blockDim.x;
        if (q < N4) {
            const i64 i0 = q * 4, r = i0 / COLS, c0 = i0 - r * COLS; (void)r;
            float4 out4; float v;
            v = in[u].x; { const i64 c = c0 + 0; out4.x = OP; }
            v = in[u].y; { const i64 c = c0 + 1; out4.y = OP; }
            v = in[u].z; { const i64 c = c0 + 2; out4.z = OP; }
            v = in[u].w; { const i64 c = c0 + 3; out4.w = OP; }
            STORE(reinterpret_cast<float4*>(o) + q, out4);
        }
    }
}""",
    # Grid-stride with UNROLL float4s per thread per step (fewer blocks, same memory-level parallelism).
    "stride_v4xU": """
extern "C" __global__ void k(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                             float* __restrict__ o) {
    const i64 stride = (i64)gridDim.x * blockDim.x * UNROLL;
    for (i64 base = (i64)blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < N4; base += stride) {
        float4 in[UNROLL];
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 q = base + (i64)u * blockDim.x;
            if (q < N4) in[u] = LOAD(reinterpret_cast<const float4*>(x) + q);
        }
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const i64 q = base + (i64)u * blockDim.x;
            if (q < N4) {
                const i64 i0 = q * 4, r = i0 / COLS, c0 = i0 - r * COLS; (void)r;
                float4 out4; float v;
                v = in[u].x; { const i64 c = c0 + 0; out4.x = OP; }
                v = in[u].y; { const i64 c = c0 + 1; out4.y = OP; }
                v = in[u].z; { const i64 c = c0 + 2; out4.z = OP; }
                v = in[u].w; { const i64 c = c0 + 3; out4.w = OP; }
                STORE(reinterpret_cast<float4*>(o) + q, out4);
            }
        }
    }
}""",
}

OPS = {"relu": "fmaxf(v, 0.0f)", "scale_bias": "v * w[c] + b[c]"}
CACHE = {"plain": ("(*(p))", "(*(p) = (v4))"), "streaming": ("__ldcs(p)", "__stcs(p, v4)")}


def compile_kernel(kind: str, op: str, unroll: int, cache: str, n4: int, cols: int):
    load, store = CACHE[cache]
    source = (HEAD + f"#define N4 {n4}LL\n#define COLS {cols}LL\n#define UNROLL {unroll}\n#define LOAD(p) {load}\n#define STORE(p, v4) {store}\n"
              + SOURCES[kind].replace("OP", f"({OPS[op]})"))
    return torch.cuda._compile_kernel(source, "k")


def time_ms(fn, repeats: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def measure(rows: int, cols: int, sms: int, repeats: int) -> list[dict]:
    """Every kernel shape, eager and torch.compile at one size (the tensors are freed on return)."""
    results = []
    n = rows * cols
    x = torch.randn(rows, cols, device="cuda")
    w, b = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
    o = torch.empty_like(x)
    roof_bytes = 2 * n * 4
    compiled = {op: torch.compile(f) for op, f in (("relu", torch.relu), ("scale_bias", lambda t: t * w + b))}
    for op in OPS:
        eager = (lambda: torch.relu(x)) if op == "relu" else (lambda: x * w + b)
        expected = eager()
        rows_out = [("eager", time_ms(eager, repeats)),
                    ("torch.compile", time_ms(lambda: compiled[op](x), repeats))]
        for kind, unroll, threads, cache in (("stride_v4", 1, 256, "plain"), ("chunk_v4xU", 1, 256, "plain"),
                                             ("chunk_v4xU", 2, 256, "plain"), ("chunk_v4xU", 4, 128, "plain"),
                                             ("chunk_v4xU", 4, 256, "plain"), ("chunk_v4xU", 4, 256, "streaming"),
                                             ("chunk_v4xU", 8, 128, "plain"), ("stride_v4xU", 4, 256, "plain"),
                                             ("stride_v4xU", 4, 256, "streaming")):
            n4 = n // 4
            kernel = compile_kernel(kind, op, unroll, cache, n4, cols)
            per_block = threads * unroll
            blocks = (n4 + per_block - 1) // per_block
            if kind.startswith("stride"):
                blocks = min(blocks, sms * (16 if unroll == 1 else 4))
            label = f"{kind} unroll {unroll}, {threads} threads, {cache}, {blocks} blocks"
            run = lambda: kernel(grid=(blocks, 1, 1), block=(threads, 1, 1), args=[x, w, b, o])  # noqa: E731
            run()
            torch.cuda.synchronize()
            ok = torch.equal(o, expected) if op == "relu" else torch.allclose(o, expected, rtol=1e-6, atol=1e-6)
            rows_out.append((label + ("" if ok else " WRONG"), time_ms(run, repeats)))
            o.zero_()
        for label, ms in rows_out:
            gbs = roof_bytes / ms / 1e6
            results.append({"elements": n, "op": op, "kernel": label, "ms": ms, "GB/s": gbs})
            print(f"{n:>12} {op:<10} {ms:8.3f} ms {gbs:7.0f} GB/s  {label}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=393216)
    parser.add_argument("--small", type=int, default=16 * 2**20, help="elements of the second, small size")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    results = []
    for rows, cols in ((args.rows, args.cols), (args.small // 4096, 4096)):
        results += measure(rows, cols, sms, args.repeats)
        torch.cuda.empty_cache()
    print(f"device: {props.name}, torch {torch.__version__}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
