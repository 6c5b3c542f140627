"""Legitimate NVRTC kernel (torch.cuda._compile_kernel): fused silu(x) + bias, grid-stride,
launched on the current stream."""
import torch
import torch.nn as nn

KERNEL_SOURCE = r"""
extern "C" __global__ void silu_bias_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                            float* __restrict__ y, int n, int cols) {
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        y[i] = v / (1.0f + expf(-v)) + __ldg(&bias[i % cols]);
    }
}
"""

_kernel = torch.cuda._compile_kernel(KERNEL_SOURCE, "silu_bias_kernel")

THREADS = 256
MAX_BLOCKS = 132 * 16


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        if n >= 2**31:
            raise ValueError("silu_bias_kernel indexes with 32-bit ints")
        y = torch.empty_like(x)
        blocks = max(1, min((n + THREADS - 1) // THREADS, MAX_BLOCKS))
        _kernel(grid=(blocks, 1, 1), block=(THREADS, 1, 1), args=[x, self.bias, y, n, self.bias.numel()])
        return y
