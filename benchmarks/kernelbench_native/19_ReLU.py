"""KernelBench level 1 19_ReLU, a plain hand-written CUDA candidate (issue 21's native-size acceptance on the H100):
max(x, 0) over every element, 16-byte loads, a grid-stride loop over 64-bit indices (1.6e9 elements)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        const float4 v = x[i];
        y[i] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f), fmaxf(v.w, 0.0f));
    }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long long start, long long n) {
    const long long i = start + blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "relu: a float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel(), n4 = n / 4;
    if (n4) relu_kernel<<<132 * 16, 256>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                         reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    if (n % 4) relu_tail<<<1, 4>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    return y;
}
"""

_ext = load_inline(name="kb_native_relu", cpp_sources="torch::Tensor relu(torch::Tensor x);", cuda_sources=CUDA_SOURCE,
                   functions=["relu"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu(x)
