"""Fault: forward spins forever in C++ while holding the GIL, so no Python-level timeout (signal
handler, faulthandler.dump_traceback_later's exit, a watchdog thread) in the child can act; only a
kill from outside ends it. Verdict: timeout."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cstdint>

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    volatile uint64_t spins = 0;   // volatile: an infinite loop with side effects is not UB
    for (;;) spins = spins + 1;
    return x;
}
"""

_ext = load_inline(
    name="ks_fault_cpp_hang",
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
