"""Legitimate CPU kernel for scale_shift_variants: 2x + 1 over however many elements the input has."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor scale_shift(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "scale_shift: a float32 CPU tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* __restrict__ xp = xc.data_ptr<float>();
    float* __restrict__ yp = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] * 2.0f + 1.0f;
    return y;
}
"""

_ext = load_inline(name="ks_legit_cpp_scale_shift_any_shape", cpp_sources=CPP_SOURCE, functions=["scale_shift"],
                   extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_shift(x)
