"""Legitimate: the GEMM through torch.addmm (allowed), the relu epilogue as an OpenMP kernel applied
in place to the GEMM's fresh result (in-place work on the candidate's own tensor is not input
mutation)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_(torch::Tensor y) {
    TORCH_CHECK(y.device().is_cpu() && y.scalar_type() == torch::kFloat32 && y.is_contiguous(),
                "relu_: a contiguous float32 CPU tensor expected");
    float* __restrict__ p = y.data_ptr<float>();
    const int64_t n = y.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
    return y;
}
"""

_ext = load_inline(
    name="ks_legit_cpp_linear_relu",
    cpp_sources=CPP_SOURCE,
    functions=["relu_"],
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return _ext.relu_(y)
