"""KernelBench level 1 88_MinGPTNewGelu, a plain hand-written CUDA candidate: the tanh approximation of GELU,
0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise with 16-byte loads."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__device__ __forceinline__ float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const long long n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = x4[i];
        y4[i] = make_float4(gelu_tanh(v.x), gelu_tanh(v.y), gelu_tanh(v.z), gelu_tanh(v.w));
    }
    for (long long i = n4 * 4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) y[i] = gelu_tanh(x[i]);
}

torch::Tensor new_gelu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "new_gelu: a float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    gelu_kernel<<<132 * 16, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
"""

_ext = load_inline(name="kb_native_new_gelu", cpp_sources="torch::Tensor new_gelu(torch::Tensor x);",
                   cuda_sources=CUDA_SOURCE, functions=["new_gelu"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.new_gelu(x)
