"""Legitimate CUDA kernel for tiny_outputs: 1e-6 * tanh(x), grid-stride, default stream."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void tiny_tanh_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, float scale) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = tanhf(x[i]) * scale;
}

torch::Tensor tiny_tanh(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "tiny_tanh: a float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 4096) blocks = 4096;
    tiny_tanh_kernel<<<(int)blocks, threads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, (float)scale);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "tiny_tanh launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

CPP_SOURCE = "torch::Tensor tiny_tanh(torch::Tensor x, double scale);"

_ext = load_inline(
    name="ks_legit_cuda_tiny_tanh",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["tiny_tanh"],
    extra_cuda_cflags=["-O3"],
)

SCALE = 1e-6


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.tiny_tanh(x, SCALE)
