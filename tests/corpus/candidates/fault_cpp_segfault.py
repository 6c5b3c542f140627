"""Fault: forward writes through a null pointer inside C++. The evaluation child dies of SIGSEGV;
the verdict must say runtime_error (with the signal), not hang or take the parent down."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cstdint>

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    // volatile: the compiler cannot prove the address is null, so this is a real store to page 0
    // (not a __builtin_trap), i.e. SIGSEGV rather than SIGILL.
    volatile uintptr_t address = 0;
    volatile float* p = reinterpret_cast<volatile float*>(address);  // a volatile store cannot be deleted
    p[0] = static_cast<float>(x.numel());
    return torch::empty_like(x);
}
"""

_ext = load_inline(
    name="ks_fault_cpp_segfault",
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
