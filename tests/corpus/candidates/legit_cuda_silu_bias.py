"""Legitimate CUDA kernel: fused silu(x) + bias; 16-byte loads when the rows allow it, coalesced,
grid-stride loop sized to the SM count, default stream."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float silu_f(float v) { return v / (1.0f + expf(-v)); }

__global__ void silu_bias_vec4(const float4* __restrict__ x, const float4* __restrict__ bias,
                               float4* __restrict__ y, long long n4, long long cols4) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = x[i];
        const float4 b = __ldg(&bias[i % cols4]);
        y[i] = make_float4(silu_f(v.x) + b.x, silu_f(v.y) + b.y, silu_f(v.z) + b.z, silu_f(v.w) + b.w);
    }
}

__global__ void silu_bias_scalar(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, long long cols) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = silu_f(x[i]) + __ldg(&bias[i % cols]);
}

static int blocks_for(long long work, int threads) {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    }
    long long want = (work + threads - 1) / threads;
    long long cap = (long long)sms * 8;
    return (int)(want < cap ? (want > 0 ? want : 1) : cap);
}

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "silu_bias: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "silu_bias: float32 expected");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == bias.numel(), "silu_bias: last dim must match bias");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel(), cols = bc.numel();
    if (n == 0) return y;
    const int threads = 256;
    const bool aligned = ((reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) |
                           reinterpret_cast<uintptr_t>(bc.data_ptr<float>()) |
                           reinterpret_cast<uintptr_t>(y.data_ptr<float>())) % 16) == 0;
    if (cols % 4 == 0 && aligned) {
        silu_bias_vec4<<<blocks_for(n / 4, threads), threads>>>(
            reinterpret_cast<const float4*>(xc.data_ptr<float>()),
            reinterpret_cast<const float4*>(bc.data_ptr<float>()),
            reinterpret_cast<float4*>(y.data_ptr<float>()), n / 4, cols / 4);
    } else {
        silu_bias_scalar<<<blocks_for(n, threads), threads>>>(
            xc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), n, cols);
    }
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "silu_bias launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

CPP_SOURCE = "torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="ks_legit_cuda_silu_bias",
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
