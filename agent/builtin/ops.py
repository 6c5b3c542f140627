"""Pointwise operations as C expressions (the same text compiles as C++ for the CPU and as CUDA).

Every expression keeps PyTorch's float32 semantics where inputs are finite, and NaN propagates the
way PyTorch's does: comparisons are written so that a NaN operand falls through to the NaN result
(`a < 0 ? 0 : a` keeps NaN; fmaxf(a, 0) would not).
"""
from __future__ import annotations

from collections.abc import Callable

# ks_exp and ks_tanh: on the CPU our own branch-free versions (libm's expf and tanhf are scalar calls
# that stop a loop from vectorising); on GPUs CUDA's expf and tanhf. Both are defined by codegen.
CPU_MATH = r"""
#include <cstdint>
#include <cstring>
// e^x for float32: round x/ln2 to n, reduce r = x - n*ln2 (ln2 split in two for exactness), e^r by its
// Taylor series to r^7 (|r| <= 0.35: under an ulp), times 2^n applied in two halves so results in
// the subnormal range come out right. Branch-free, so loops calling it vectorise.
static inline float ks_exp(float x) {
    const float hi = 88.72283905206835f, lo = -103.97207708f;
    const float xc = x > hi ? hi : (x < lo ? lo : x);
    const float n = (xc * 1.4426950408889634f + 12582912.0f) - 12582912.0f;
    const float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t k = static_cast<int32_t>(n), k1 = k / 2, k2 = k - k1;
    const int32_t b1 = (k1 + 127) << 23, b2 = (k2 + 127) << 23;
    float s1, s2;
    std::memcpy(&s1, &b1, sizeof s1);
    std::memcpy(&s2, &b2, sizeof s2);
    const float v = x > hi ? INFINITY : p * s1 * s2;
    return x != x ? x : v;
}
// tanh: an odd polynomial near 0 (where 1 - e^-2|x| cancels), (1 - e)/(1 + e) with e = e^-2|x| elsewhere.
static inline float ks_tanh(float x) {
    const float a = x < 0.0f ? -x : x;
    const float e = ks_exp(-2.0f * a);
    const float far = (1.0f - e) / (1.0f + e);
    const float x2 = x * x;
    const float near = x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f))));
    const float t = x < 0.0f ? -far : far;
    return a < 0.0625f ? near : t;
}
"""

CUDA_MATH = r"""
__device__ __forceinline__ float ks_exp(float x) { return expf(x); }
__device__ __forceinline__ float ks_tanh(float x) { return tanhf(x); }
"""

# Unary: name -> f(a, params) giving the C expression.
UNARY: dict[str, Callable[[str, dict], str]] = {
    "relu": lambda a, p: f"({a} < 0.0f ? 0.0f : {a})",
    "relu6": lambda a, p: f"({a} < 0.0f ? 0.0f : ({a} > 6.0f ? 6.0f : {a}))",
    "sigmoid": lambda a, p: f"(1.0f / (1.0f + ks_exp(-{a})))",
    "tanh": lambda a, p: f"ks_tanh({a})",
    "silu": lambda a, p: f"({a} / (1.0f + ks_exp(-{a})))",
    "gelu": lambda a, p: (f"(0.5f * {a} * (1.0f + ks_tanh(0.7978845608028654f * ({a} + 0.044715f * {a} * {a} * {a}))))"
                          if p.get("approximate") == "tanh" else f"(0.5f * {a} * (1.0f + erff({a} * 0.7071067811865476f)))"),
    "leaky_relu": lambda a, p: f"({a} < 0.0f ? {a} * {_f(p.get('negative_slope', 0.01))} : {a})",
    "elu": lambda a, p: f"({a} > 0.0f ? {a} : {_f(p.get('alpha', 1.0))} * expm1f({a}))",
    "softplus": lambda a, p: _softplus(a, float(p.get("beta", 1.0)), float(p.get("threshold", 20.0))),
    "mish": lambda a, p: f"({a} * ks_tanh({_softplus(a, 1.0, 20.0)}))",
    "hardtanh": lambda a, p: _clamp(a, p.get("min_val", -1.0), p.get("max_val", 1.0)),
    "hardsigmoid": lambda a, p: _clamp(f"({a} / 6.0f + 0.5f)", 0.0, 1.0),
    "hardswish": lambda a, p: f"({a} * {_clamp(f'({a} + 3.0f)', 0.0, 6.0)} / 6.0f)",
    "clamp": lambda a, p: _clamp(a, p.get("min"), p.get("max")),
    "abs": lambda a, p: f"fabsf({a})",
    "neg": lambda a, p: f"(-{a})",
    "exp": lambda a, p: f"ks_exp({a})",
    "log": lambda a, p: f"logf({a})",
    "sqrt": lambda a, p: f"sqrtf({a})",
    "rsqrt": lambda a, p: f"(1.0f / sqrtf({a}))",
    "reciprocal": lambda a, p: f"(1.0f / {a})",
    "square": lambda a, p: f"({a} * {a})",
    "sin": lambda a, p: f"sinf({a})",
    "cos": lambda a, p: f"cosf({a})",
}

ALIASES = {"clip": "clamp", "clamp_min": "clamp", "clamp_max": "clamp", "negative": "neg", "sigmoid_": "sigmoid",
           "relu_": "relu", "true_divide": "div", "multiply": "mul", "subtract": "sub", "divide": "div",
           "swish": "silu", "absolute": "abs", "maximum": "max2", "minimum": "min2", "fmax": "max2", "fmin": "min2"}

BINARY = {"add", "sub", "mul", "div", "max2", "min2", "pow", "rsub"}


def binary(op: str, a: str, b: str, params: dict) -> str:
    alpha = params.get("alpha")
    if op == "add":
        return f"({a} + {b})" if alpha in (None, 1) else f"({a} + {_f(alpha)} * {b})"
    if op == "sub":
        return f"({a} - {b})" if alpha in (None, 1) else f"({a} - {_f(alpha)} * {b})"
    if op == "rsub":
        return f"({b} - {a})" if alpha in (None, 1) else f"({b} - {_f(alpha)} * {a})"
    if op == "mul":
        return f"({a} * {b})"
    if op == "div":
        return f"({a} / {b})"
    if op == "max2":  # torch.maximum propagates NaN from either side
        return f"(({a} != {a} || {a} > {b}) ? {a} : {b})"
    if op == "min2":
        return f"(({a} != {a} || {a} < {b}) ? {a} : {b})"
    if op == "pow":
        return f"powf({a}, {b})"
    raise KeyError(op)


def power(a: str, exponent: float) -> str:
    """x ** k for a constant k, with the cheap exact forms PyTorch also uses."""
    if exponent == 2:
        return f"({a} * {a})"
    if exponent == 3:
        return f"({a} * {a} * {a})"
    if exponent == 1:
        return a
    if exponent == 0.5:
        return f"sqrtf({a})"
    if exponent == -1:
        return f"(1.0f / {a})"
    return f"powf({a}, {_f(exponent)})"


def literal(value: float) -> str:
    return _f(value)


def _f(value: object) -> str:
    x = float(value)  # type: ignore[arg-type]
    if x != x:
        return "NAN"
    if x in (float("inf"), float("-inf")):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    text = repr(x)
    return f"{text}f" if ("e" in text or "." in text) else f"{text}.0f"


def _clamp(a: str, lo: object, hi: object) -> str:
    out = a
    if lo is not None:
        out = f"({out} < {_f(lo)} ? {_f(lo)} : {out})"
    if hi is not None:
        out = f"({out} > {_f(hi)} ? {_f(hi)} : {out})"
    return out


def _softplus(a: str, beta: float, threshold: float) -> str:
    scaled = a if beta == 1.0 else f"({a} * {_f(beta)})"
    body = f"log1pf(ks_exp({scaled}))" if beta == 1.0 else f"(log1pf(ks_exp({scaled})) / {_f(beta)})"
    return f"({scaled} > {_f(threshold)} ? {a} : {body})"
