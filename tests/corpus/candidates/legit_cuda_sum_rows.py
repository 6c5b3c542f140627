"""Legitimate CUDA kernel: row sums, one block per row, 16-byte loads, warp-shuffle then
shared-memory tree reduction."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

template <bool VEC4>
__global__ void sum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float acc = 0.0f;
        if (VEC4) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            for (long long c = threadIdx.x; c < cols / 4; c += blockDim.x) {
                const float4 v = xr4[c];
                acc += (v.x + v.y) + (v.z + v.w);
            }
        } else {
            for (long long c = threadIdx.x; c < cols; c += blockDim.x) acc += xr[c];
        }
        acc = warp_sum(acc);
        if (lane == 0) part[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            float t = lane < warps ? part[lane] : 0.0f;
            t = warp_sum(t);
            if (lane == 0) y[row] = t;
        }
        __syncthreads();
    }
}

torch::Tensor sum_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "sum_rows: a 2-D float32 CUDA tensor expected");
    auto xc = x.contiguous();
    const long long rows = xc.size(0), cols = xc.size(1);
    auto y = torch::empty({rows}, xc.options());
    if (rows == 0) return y;
    const int threads = 256;
    const long long max_grid = 65535LL * 32;
    const int grid = (int)(rows < max_grid ? rows : max_grid);
    const bool vec = cols % 4 == 0 && (reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) % 16) == 0;
    if (vec)
        sum_rows_kernel<true><<<grid, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    else
        sum_rows_kernel<false><<<grid, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "sum_rows launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

CPP_SOURCE = "torch::Tensor sum_rows(torch::Tensor x);"

_ext = load_inline(
    name="ks_legit_cuda_sum_rows",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["sum_rows"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_rows(x)
