"""Legitimate CPU kernel for tiny_outputs: 1e-6 * tanh(x), accurate to a few ulp everywhere
(including tiny inputs, where 1 - exp(-2|x|) would cancel). A tolerance that is purely relative
to each element, or that ignores the reference's scale, must still accept it."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <cstring>

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

// tanh: an odd polynomial near zero (no cancellation), (1 - e) / (1 + e) with e = exp(-2|x|)
// beyond; both are computed and one is selected, so the loop stays branch-free.
static inline float tanh_f(float x) {
    const float a = std::fabs(x);
    const float z = x * x;
    float q = -5.70498872745e-3f;
    q = q * z + 2.06390887954e-2f;
    q = q * z - 5.37397155531e-2f;
    q = q * z + 1.33314422036e-1f;
    q = q * z - 3.33332819422e-1f;
    const float small = x + x * z * q;
    const float e = exp_nonpositive(-2.0f * a);
    const float large = std::copysign((1.0f - e) / (1.0f + e), x);
    return a < 0.625f ? small : large;
}

torch::Tensor tiny_tanh(torch::Tensor x, double scale) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32,
                "tiny_tanh: a float32 CPU tensor expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float s = static_cast<float>(scale);
    const float* __restrict__ xp = xc.data_ptr<float>();
    float* __restrict__ yp = y.data_ptr<float>();
    const int64_t n = xc.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) yp[i] = tanh_f(xp[i]) * s;
    return y;
}
"""

_ext = load_inline(
    name="ks_legit_cpp_tiny_tanh",
    cpp_sources=CPP_SOURCE,
    functions=["tiny_tanh"],
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math"],
    extra_ldflags=["-fopenmp"],
)

SCALE = 1e-6


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.tiny_tanh(x, SCALE)
