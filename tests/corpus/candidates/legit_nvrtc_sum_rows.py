"""Legitimate NVRTC kernel: row sums, one block per row, warp shuffles then shared memory."""
import torch
import torch.nn as nn

KERNEL_SOURCE = r"""
extern "C" __global__ void sum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + (long long)row * cols;
        float acc = 0.0f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += xr[c];
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (lane == 0) part[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            float t = lane < warps ? part[lane] : 0.0f;
            for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
            if (lane == 0) y[row] = t;
        }
        __syncthreads();
    }
}
"""

_kernel = torch.cuda._compile_kernel(KERNEL_SOURCE, "sum_rows_kernel")

THREADS = 256


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        grid = max(1, min(rows, 65535))
        _kernel(grid=(grid, 1, 1), block=(THREADS, 1, 1), args=[x, y, rows, cols])
        return y
