"""Legitimate: a row softmax kernel whose extension is built in __init__, not at import (a common way to write a
candidate). The build step only sees what the import asks for, so the candidate's job asks the trusted side for this
one: the parent builds it, reads it, and the evaluation starts again with it installed."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "softmax_rows: a 2-D float32 tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xp + r * cols;
        float* yr = yp + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
    return y;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ext = load_inline(name="ks_legit_cpp_lazy_build_softmax", cpp_sources=CPP_SOURCE,
                                functions=["softmax_rows"], extra_cflags=["-O3"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._ext.softmax_rows(x)
