"""Fault: a kernel that never finishes (one thread spins on a flag in device memory that nothing
ever sets). forward returns at once; the hang shows up in the harness's next synchronize, which
blocks in the driver where no Python signal handler runs. Verdict: timeout; the engine must kill
the child process (the driver then tears the context down)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void spin_kernel(volatile int* flag) {
    if (threadIdx.x == 0) {
        while (flag[0] == 0) { }   // volatile read: re-read every iteration, never set
    }
}

torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias) {
    auto y = torch::empty_like(x);
    // Kept alive for the life of the process, so the allocator never hands the flag's memory on.
    static torch::Tensor flag = torch::empty({1}, x.options().dtype(torch::kInt32));
    cudaMemsetAsync(flag.data_ptr<int>(), 0, sizeof(int));
    spin_kernel<<<1, 32>>>(flag.data_ptr<int>());
    return y;
}
"""

CPP_SOURCE = "torch::Tensor silu_bias(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="ks_fault_cuda_hang",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["silu_bias"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.silu_bias(x, self.bias)
