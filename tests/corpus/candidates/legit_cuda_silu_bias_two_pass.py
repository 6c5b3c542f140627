"""Legitimate but unfused CUDA kernels: sigmoid(x) into a temporary, then x * s + bias in a second
launch, one scalar element per thread. Correct, and slower than the fused float4 kernel
(legit_cuda_silu_bias.py): it moves x twice and the temporary twice. The scripted GPU demo's middle turn."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sigmoid_kernel(const float* __restrict__ x, float* __restrict__ s, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[i] = 1.0f / (1.0f + expf(-x[i]));
}

__global__ void mul_bias_kernel(const float* __restrict__ x, const float* __restrict__ s,
                                const float* __restrict__ bias, float* __restrict__ y, long long n, long long cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s[i] + bias[i % cols];
}

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "silu_bias: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "silu_bias: float32 expected");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == bias.numel(), "silu_bias: last dim must match bias");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto s = torch::empty_like(xc);
    auto y = torch::empty_like(xc);
    const long long n = xc.numel(), cols = bc.numel();
    if (n == 0) return y;
    const int threads = 256;
    const long long blocks = (n + threads - 1) / threads;
    sigmoid_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), s.data_ptr<float>(), n);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "sigmoid_kernel launch failed");
    mul_bias_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), s.data_ptr<float>(), bc.data_ptr<float>(),
                                         y.data_ptr<float>(), n, cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "mul_bias_kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

CPP_SOURCE = "torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="ks_legit_cuda_silu_bias_two_pass",
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
