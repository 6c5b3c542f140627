"""Legitimate CUDA kernel: row softmax, one block per row. One pass keeps a running (max, sum)
per thread (online softmax), merged by warp shuffles then across warps in shared memory; a second
pass writes exp(x - max) / sum. 16-byte loads when the row length allows."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

struct MaxSum { float m; float s; };

// Merge two partial (max, sum-of-exp) pairs; an empty partial has m = -inf and s = 0.
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void push(MaxSum& acc, float v) {
    if (v > acc.m) {
        acc.s = acc.s * expf(acc.m - v) + 1.0f;   // expf(-inf) = 0 on the first element
        acc.m = v;
    } else {
        acc.s += expf(v - acc.m);
    }
}

template <bool VEC4>
__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    long long rows, long long cols) {
    __shared__ MaxSum warp_part[32];
    __shared__ MaxSum row_total;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        MaxSum acc = {-INFINITY, 0.0f};
        if (VEC4) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            for (long long c = threadIdx.x; c < cols / 4; c += blockDim.x) {
                const float4 v = xr4[c];
                push(acc, v.x); push(acc, v.y); push(acc, v.z); push(acc, v.w);
            }
        } else {
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) push(acc, xr[c]);
        }
        for (int off = 16; off > 0; off >>= 1) {
            MaxSum other;
            other.m = __shfl_xor_sync(0xffffffffu, acc.m, off);
            other.s = __shfl_xor_sync(0xffffffffu, acc.s, off);
            acc = merge(acc, other);
        }
        if (lane == 0) warp_part[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            MaxSum t = lane < warps ? warp_part[lane] : MaxSum{-INFINITY, 0.0f};
            for (int off = 16; off > 0; off >>= 1) {
                MaxSum other;
                other.m = __shfl_xor_sync(0xffffffffu, t.m, off);
                other.s = __shfl_xor_sync(0xffffffffu, t.s, off);
                t = merge(t, other);
            }
            if (lane == 0) row_total = t;
        }
        __syncthreads();
        const float m = row_total.m, s = row_total.s;
        if (VEC4) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            float4* yr4 = reinterpret_cast<float4*>(yr);
            for (long long c = threadIdx.x; c < cols / 4; c += blockDim.x) {
                const float4 v = xr4[c];
                yr4[c] = make_float4(expf(v.x - m) / s, expf(v.y - m) / s, expf(v.z - m) / s, expf(v.w - m) / s);
            }
        } else {
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
        }
        __syncthreads();   // row_total and warp_part are reused by the next row
    }
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "softmax_rows: a 2-D float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long rows = xc.size(0), cols = xc.size(1);
    if (rows == 0 || cols == 0) return y;
    const int threads = cols >= 2048 ? 512 : 256;
    const long long max_grid = 65535LL * 32;
    const int grid = (int)(rows < max_grid ? rows : max_grid);
    const bool aligned = ((reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) |
                           reinterpret_cast<uintptr_t>(y.data_ptr<float>())) % 16) == 0;
    if (cols % 4 == 0 && aligned)
        softmax_rows_kernel<true><<<grid, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    else
        softmax_rows_kernel<false><<<grid, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "softmax_rows launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

CPP_SOURCE = "torch::Tensor softmax_rows(torch::Tensor x);"

_ext = load_inline(
    name="ks_legit_cuda_softmax_rows",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["softmax_rows"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_rows(x)
