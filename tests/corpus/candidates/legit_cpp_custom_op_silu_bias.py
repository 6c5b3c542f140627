"""Legitimate CPU kernel behind a torch.library custom op: legit_cpp_silu_bias's fused silu(x) + bias, called from the
op's Python kernel, as code written for torch.compile registers it. The records count the kernel's own PyTorch calls
(census_reach.py): here only the extension's, which are allowed, so it is accepted like the plain one."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>
#include <cstring>

// exp(x) for x <= 0 by Cody-Waite range reduction and a degree-6 polynomial (about 1 ulp).
// Branch-free so that GCC vectorises the loop that calls it; 2^n is applied in two halves so
// that results down in the subnormal range come out right instead of flushing to zero early.
static inline float exp_nonpositive(float x) {
    x = x < -104.0f ? -104.0f : x;
    // Round to nearest by the 1.5 * 2^23 trick: plain adds, so SSE2 can vectorise it (floorf cannot).
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
    const int32_t k2 = k - k1;
    const int32_t b1 = (k1 + 127) << 23;
    const int32_t b2 = (k2 + 127) << 23;
    float s1, s2;
    std::memcpy(&s1, &b1, sizeof s1);
    std::memcpy(&s2, &b2, sizeof s2);
    return p * s1 * s2;
}

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.device().is_cpu() && bias.device().is_cpu(), "silu_bias: CPU tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "silu_bias: float32 expected");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == bias.numel(), "silu_bias: last dim must match bias");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = bc.numel();
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    const float* __restrict__ xp = xc.data_ptr<float>();
    const float* __restrict__ bp = bc.data_ptr<float>();
    float* __restrict__ yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict__ xr = xp + r * cols;
        float* __restrict__ yr = yp + r * cols;
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
            const float v = xr[c];
            const float e = exp_nonpositive(-std::fabs(v));   // exp(-|v|), never overflows
            const float inv = 1.0f / (1.0f + e);
            const float sig = v >= 0.0f ? inv : e * inv;      // sigmoid(v)
            yr[c] = v * sig + bp[c];
        }
    }
    return y;
}
"""

_ext = load_inline(
    name="ks_legit_cpp_custom_op_silu_bias",
    cpp_sources=CPP_SOURCE,
    functions=["silu_bias"],
    # -fno-trapping-math lets GCC if-convert the float compares below, so the loop vectorises.
    extra_cflags=["-O3", "-fopenmp", "-fno-trapping-math"],
    extra_ldflags=["-fopenmp"],
)


@torch.library.custom_op("ks_legit::silu_bias", mutates_args=())
def silu_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return _ext.silu_bias(x, bias)


@silu_bias.register_fake
def _(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_bias(x, self.bias)
