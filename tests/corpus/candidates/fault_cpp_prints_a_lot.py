"""Robustness: a correct, OpenMP silu + bias that floods stdout: 4 MiB from Python at import, 4 MiB
from C++ (printf and std::cout) on its first call, and a line from each side on every call. The
engine must drain the pipes (a full pipe blocks the child), cap the logs in the verdict and still
accept the candidate."""
import sys

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_LINE = "fault_cpp_prints_a_lot: python chatter " + "x" * 88 + "\n"   # 128 bytes
sys.stdout.write(_LINE * (4 * 1024 * 1024 // len(_LINE)))
sys.stdout.flush()

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    static bool first = true;
    if (first) {
        first = false;
        const std::string line = "fault_cpp_prints_a_lot: C++ chatter " + std::string(91, 'y') + "\n";
        for (int i = 0; i < 16384; ++i) std::printf("%s", line.c_str());   // 2 MiB through stdio
        for (int i = 0; i < 16384; ++i) std::cout << line;                 // 2 MiB through iostream
        std::fflush(stdout);
        std::cout.flush();
    }
    std::printf("fault_cpp_prints_a_lot: C++ call on %lld elements\n", (long long)x.numel());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = bias.numel(), rows = xc.numel() / cols;
    const float* xp = xc.data_ptr<float>();
    const float* bp = bias.contiguous().data_ptr<float>();
    float* yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const float v = xp[r * cols + c];
            yp[r * cols + c] = v / (1.0f + std::exp(-v)) + bp[c];
        }
    return y;
}
"""

_ext = load_inline(
    name="ks_fault_cpp_prints_a_lot",
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
        print(f"fault_cpp_prints_a_lot: python forward on {tuple(x.shape)}")
        return _ext.silu_bias(x, self.bias)
