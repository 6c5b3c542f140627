"""Legitimate (GPU): the twin of legit_cpp_symlog_log1p, a CUDA symlog with log1pf, clamped in every call: more exact
than eager's log(1 + |x|), so it passes against float64 (flag ill_conditioned_reference), wide timed calls included."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void symlog_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, bool clamp) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        const float r = copysignf(log1pf(fabsf(v)), v) * (v != 0.f);
        y[i] = clamp ? fminf(fmaxf(r, -1e-4f), 1e-4f) : r;
    }
}

torch::Tensor symlog(torch::Tensor x, bool clamp) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    long long blocks = (n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    if (n > 0) symlog_kernel<<<(int)blocks, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, clamp);
    return y;
}
"""

CPP_SOURCE = "torch::Tensor symlog(torch::Tensor x, bool clamp);"

_ext = load_inline(name="ks_legit_cuda_symlog_log1p", cpp_sources=CPP_SOURCE,
                   cuda_sources=CUDA_SOURCE, functions=["symlog"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.symlog(x, True)
