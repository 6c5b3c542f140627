"""Legitimate CPU kernel: row softmax with the max shift, OpenMP over rows, SIMD reductions."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// exp(x) for x <= 0: Cody-Waite reduction plus a degree-6 polynomial, branch-free (vectorises).
static inline float exp_nonpositive(float x) {
    x = x < -104.0f ? -104.0f : x;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t k = static_cast<int32_t>(n);
    const int32_t k1 = k / 2;
    const int32_t b1 = (k1 + 127) << 23;
    const int32_t b2 = (k - k1 + 127) << 23;
    float s1, s2;
    std::memcpy(&s1, &b1, sizeof s1);
    std::memcpy(&s2, &b2, sizeof s2);
    return p * s1 * s2;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "softmax_rows: a 2-D float32 CPU tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0);
    const int64_t cols = xc.size(1);
    const float* __restrict__ xp = xc.data_ptr<float>();
    float* __restrict__ yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict__ xr = xp + r * cols;
        float* __restrict__ yr = yp + r * cols;
        float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < cols; ++c) {
            const float e = exp_nonpositive(xr[c] - m);
            yr[c] = e;
            s += e;
        }
        const float inv = 1.0f / s;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
    return y;
}
"""

_ext = load_inline(
    name="ks_legit_cpp_softmax_rows",
    cpp_sources=CPP_SOURCE,
    functions=["softmax_rows"],
    # -fno-trapping-math lets GCC if-convert the float compares, so the loops vectorise.
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_rows(x)
