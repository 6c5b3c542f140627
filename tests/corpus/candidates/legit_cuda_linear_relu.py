"""Legitimate: the GEMM through torch.mm (allowed, cuBLAS), bias + relu fused into one CUDA epilogue
kernel that works in place on the GEMM's fresh result (grid-stride, 16-byte accesses)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float bias_relu_f(float v, float b) { return fmaxf(v + b, 0.0f); }

__global__ void bias_relu_vec4(float4* __restrict__ acc, const float4* __restrict__ bias,
                               long long n4, long long cols4) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 v = acc[i];
        const float4 b = __ldg(&bias[i % cols4]);
        acc[i] = make_float4(bias_relu_f(v.x, b.x), bias_relu_f(v.y, b.y), bias_relu_f(v.z, b.z), bias_relu_f(v.w, b.w));
    }
}

__global__ void bias_relu_scalar(float* __restrict__ acc, const float* __restrict__ bias, long long n, long long cols) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        acc[i] = bias_relu_f(acc[i], __ldg(&bias[i % cols]));
}

torch::Tensor bias_relu_(torch::Tensor acc, torch::Tensor bias) {
    TORCH_CHECK(acc.is_cuda() && bias.is_cuda() && acc.dim() == 2, "bias_relu_: 2-D CUDA tensors expected");
    TORCH_CHECK(acc.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32, "bias_relu_: float32 expected");
    TORCH_CHECK(acc.is_contiguous() && bias.is_contiguous() && bias.numel() == acc.size(1),
                "bias_relu_: contiguous tensors, bias matching the columns, expected");
    const long long n = acc.numel(), cols = acc.size(1);
    if (n == 0) return acc;
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const int threads = 256;
    const bool vec = cols % 4 == 0 &&
        ((reinterpret_cast<uintptr_t>(acc.data_ptr<float>()) | reinterpret_cast<uintptr_t>(bias.data_ptr<float>())) % 16) == 0;
    const long long work = vec ? n / 4 : n;
    long long blocks = (work + threads - 1) / threads;
    if (blocks > (long long)sms * 8) blocks = (long long)sms * 8;
    if (vec)
        bias_relu_vec4<<<(int)blocks, threads>>>(reinterpret_cast<float4*>(acc.data_ptr<float>()),
                                                 reinterpret_cast<const float4*>(bias.data_ptr<float>()), n / 4, cols / 4);
    else
        bias_relu_scalar<<<(int)blocks, threads>>>(acc.data_ptr<float>(), bias.data_ptr<float>(), n, cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "bias_relu_ launch failed: ", cudaGetErrorString(err));
    return acc;
}
"""

CPP_SOURCE = "torch::Tensor bias_relu_(torch::Tensor acc, torch::Tensor bias);"

_ext = load_inline(
    name="ks_legit_cuda_linear_relu",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["bias_relu_"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc = torch.mm(x, self.linear.weight.t())
        return _ext.bias_relu_(acc, self.linear.bias)
