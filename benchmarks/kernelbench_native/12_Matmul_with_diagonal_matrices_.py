"""KernelBench level 1 12_Matmul_with_diagonal_matrices_, a plain hand-written CUDA candidate: diag(A) @ B is a row
scaling, C[i, j] = A[i] * B[i, j]: one pass over B, no matrix multiplication."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__global__ void scale_rows_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                  long long rows, long long cols) {
    const long long n = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        c[i] = a[i / cols] * b[i];
}

torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.dim() == 1 && b.dim() == 2 && a.size(0) == b.size(0)
                && a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "diag_matmul: a float32 CUDA vector A of N and matrix B of N x M expected");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto c = torch::empty_like(bc);
    scale_rows_kernel<<<132 * 16, 256>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), bc.size(0), bc.size(1));
    return c;
}
"""

_ext = load_inline(name="kb_native_diag_matmul", cpp_sources="torch::Tensor diag_matmul(torch::Tensor a, torch::Tensor b);",
                   cuda_sources=CUDA_SOURCE, functions=["diag_matmul"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.diag_matmul(A, B)
