"""Fault: the C++ source does not compile (a missing semicolon and an undeclared name). Verdict:
build_error, with the compiler's message in the log."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    auto y = torch::empty_like(x)
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] = undeclared_silu(x_ptr[i]);
    return y;
}
"""

_ext = load_inline(
    name="ks_fault_cpp_build_error",
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
