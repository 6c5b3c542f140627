"""KernelBench level 1 26_GELU_, a plain hand-written CUDA candidate: the exact GELU,
0.5 x (1 + erf(x / sqrt(2))) over every element, 16-byte loads, a grid-stride loop over 64-bit indices."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }

__global__ void gelu_kernel(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        const float4 v = x[i];
        y[i] = make_float4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w));
    }
}

__global__ void gelu_tail(const float* __restrict__ x, float* __restrict__ y, long long start, long long n) {
    const long long i = start + blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu(x[i]);
}

torch::Tensor gelu_exact(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu_exact: a float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel(), n4 = n / 4;
    if (n4) gelu_kernel<<<132 * 16, 256>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                         reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    if (n % 4) gelu_tail<<<1, 4>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    return y;
}
"""

_ext = load_inline(name="kb_native_gelu", cpp_sources="torch::Tensor gelu_exact(torch::Tensor x);", cuda_sources=CUDA_SOURCE,
                   functions=["gelu_exact"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_exact(x)
