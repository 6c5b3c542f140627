"""Legitimate: the GEMM through torch.mm (allowed), the bias added by a C++ kernel in place on the GEMM's fresh
result. 1 Mi outputs: every timed call's projection must let an honest float32 result through."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor add_bias_(torch::Tensor y, torch::Tensor bias) {
    TORCH_CHECK(y.is_contiguous() && y.scalar_type() == torch::kFloat32, "add_bias_: contiguous float32 expected");
    auto b = bias.contiguous();
    float* __restrict__ p = y.data_ptr<float>();
    const float* __restrict__ q = b.data_ptr<float>();
    const int64_t rows = y.size(0), cols = y.size(1);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) p[r * cols + c] += q[c];
    return y;
}
"""

_ext = load_inline(name="ks_legit_cpp_linear_wide", cpp_sources=CPP_SOURCE, functions=["add_bias_"],
                   extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.add_bias_(torch.mm(x, self.linear.weight.t()), self.linear.bias)
