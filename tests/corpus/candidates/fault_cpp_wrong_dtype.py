"""Fault: a correct silu + bias computed and returned in float64. Values match to float32 rounding,
so a comparison that upcasts both sides passes it; the output dtype differs from the reference's.
Verdict: incorrect or rejected with output_metadata."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto y = torch::empty(xc.sizes(), xc.options().dtype(torch::kFloat64));
    const int64_t cols = bias.numel(), n = xc.numel();
    const float* xp = xc.data_ptr<float>();
    const float* bp = bias.contiguous().data_ptr<float>();
    double* yp = y.data_ptr<double>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const double v = xp[i];
        yp[i] = v / (1.0 + std::exp(-v)) + bp[i % cols];
    }
    return y;
}
"""

_ext = load_inline(
    name="ks_fault_cpp_wrong_dtype",
    cpp_sources=CPP_SOURCE,
    functions=["silu_bias"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.silu_bias(x, self.bias)
