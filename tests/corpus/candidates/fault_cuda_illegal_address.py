"""Fault: the kernel writes 1 TiB past the end of its output: an illegal-address fault that
poisons the CUDA context (every later CUDA call in the process fails). The error surfaces at the
next synchronisation, not at the launch. Verdict: runtime_error; the next evaluation must get a
fresh process."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void silu_bias_far_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                     float* __restrict__ y, long long n, long long cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        y[i + (1LL << 38)] = v / (1.0f + expf(-v)) + bias[i % cols];   // 2^38 floats = 1 TiB away
    }
}

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n > 0) silu_bias_far_kernel<<<(int)((n + 255) / 256), 256>>>(xc.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), n, bias.numel());
    return y;
}
"""

CPP_SOURCE = "torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="ks_fault_cuda_illegal_address",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["silu_bias"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.silu_bias(x, self.bias)
