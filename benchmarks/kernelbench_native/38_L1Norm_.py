"""KernelBench level 1 38_L1Norm_, a plain hand-written CUDA candidate: x / mean(|x|, dim 1), one block per row (rows
of 65535: the sum of |x| in double), then every element divided by the row's mean."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__global__ void l1norm_kernel(const float* __restrict__ x, float* __restrict__ y, long long cols) {
    __shared__ double part[32];
    __shared__ float mean;
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    double acc = 0.0;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) acc += (double)fabsf(xr[c]);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += part[w];
        mean = (float)(total / (double)cols);
    }
    __syncthreads();
    const float m = mean;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] / m;
}

torch::Tensor l1norm(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "l1norm: a 2-D float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    l1norm_kernel<<<xc.size(0), 1024>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""

_ext = load_inline(name="kb_native_l1norm", cpp_sources="torch::Tensor l1norm(torch::Tensor x);", cuda_sources=CUDA_SOURCE,
                   functions=["l1norm"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.l1norm(x)
