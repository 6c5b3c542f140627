"""Legitimate CPU kernel: row sums accumulated in double, OpenMP over rows, SIMD reduction."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor sum_rows(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "sum_rows: a 2-D float32 CPU tensor expected");
    auto xc = x.contiguous();
    const int64_t rows = xc.size(0);
    const int64_t cols = xc.size(1);
    auto y = torch::empty({rows}, xc.options());
    const float* __restrict__ xp = xc.data_ptr<float>();
    float* __restrict__ yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict__ xr = xp + r * cols;
        double acc = 0.0;   // double: the result is the correctly rounded sum for these sizes
#pragma omp simd reduction(+ : acc)
        for (int64_t c = 0; c < cols; ++c) acc += static_cast<double>(xr[c]);
        yp[r] = static_cast<float>(acc);
    }
    return y;
}
"""

_ext = load_inline(
    name="ks_legit_cpp_sum_rows",
    cpp_sources=CPP_SOURCE,
    functions=["sum_rows"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_rows(x)
