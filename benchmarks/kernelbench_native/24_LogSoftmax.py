"""KernelBench level 1 24_LogSoftmax, a plain hand-written CUDA candidate: log-softmax over dim 1 (the module's
default), one block per row: the running (max, sum of exp) of 23_Softmax's candidate, then x - max - log(sum)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

struct MaxSum { float m; double s; };

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * exp((double)(a.m - m)) + b.s * exp((double)(b.m - m))};
}

// The row's max and sum of exp(x - max), by every thread of the block.
__device__ MaxSum row_stats(const float* __restrict__ xr, long long cols) {
    __shared__ MaxSum part[32];
    MaxSum acc = {-INFINITY, 0.0};
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c];
        if (v > acc.m) { acc.s = acc.s * exp((double)(acc.m - v)) + 1.0; acc.m = v; }
        else acc.s += (double)expf(v - acc.m);
    }
    for (int off = 16; off > 0; off >>= 1) {
        MaxSum o = {__shfl_xor_sync(0xffffffffu, acc.m, off), __shfl_xor_sync(0xffffffffu, acc.s, off)};
        acc = merge(acc, o);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    MaxSum t = {-INFINITY, 0.0};
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = merge(t, part[w]);
    __syncthreads();
    return t;
}

__global__ void log_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    const MaxSum t = row_stats(xr, cols);
    const float shift = t.m + (float)log(t.s);
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] - shift;
}

torch::Tensor log_softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "log_softmax_rows: a 2-D float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    log_softmax_kernel<<<xc.size(0), 1024>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""

_ext = load_inline(name="kb_native_log_softmax", cpp_sources="torch::Tensor log_softmax_rows(torch::Tensor x);",
                   cuda_sources=CUDA_SOURCE, functions=["log_softmax_rows"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        assert dim == 1, "this kernel normalises rows (dim 1), the problem's default"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.log_softmax_rows(x)
