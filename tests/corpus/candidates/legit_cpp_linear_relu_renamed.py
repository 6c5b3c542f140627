"""Legitimate, with parameter names that do not match the reference's (proj.* vs linear.*): the
weights cannot be copied by name, so the engine must fall back to building both under one seed
(KernelBench's convention); nn.Linear here consumes the RNG exactly as the reference's does.
GEMM through torch.matmul (allowed), bias + relu fused in one OpenMP kernel writing a fresh output."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor bias_relu(torch::Tensor acc, torch::Tensor bias) {
    TORCH_CHECK(acc.device().is_cpu() && acc.scalar_type() == torch::kFloat32 && acc.dim() == 2,
                "bias_relu: a 2-D float32 CPU tensor expected");
    TORCH_CHECK(bias.numel() == acc.size(1), "bias_relu: bias size must match the columns");
    auto a = acc.contiguous();
    auto b = bias.contiguous();
    auto out = torch::empty_like(a);
    const int64_t rows = a.size(0), cols = a.size(1);
    const float* __restrict__ ap = a.data_ptr<float>();
    const float* __restrict__ bp = b.data_ptr<float>();
    float* __restrict__ op = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
            const float v = ap[r * cols + c] + bp[c];
            op[r * cols + c] = v > 0.0f ? v : 0.0f;
        }
    }
    return out;
}
"""

_ext = load_inline(
    name="ks_legit_cpp_linear_relu_renamed",
    cpp_sources=CPP_SOURCE,
    functions=["bias_relu"],
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.bias_relu(torch.matmul(x, self.proj.weight.t()), self.proj.bias)
