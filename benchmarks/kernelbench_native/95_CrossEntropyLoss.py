"""KernelBench level 1 95_CrossEntropyLoss, a plain hand-written CUDA candidate: the mean over the batch of
logsumexp(row) - row[target]. One block per row writes its loss (the sum of exp in double); one block then sums the
losses in a fixed order (deterministic) and divides by the batch size."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>

__global__ void row_loss_kernel(const float* __restrict__ x, const int64_t* __restrict__ target,
                                double* __restrict__ loss, long long cols) {
    __shared__ float part_max[32];
    __shared__ double part_sum[32];
    const float* xr = x + blockIdx.x * cols;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float m = -INFINITY;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) part_max[warp] = m;
    __syncthreads();
    m = part_max[0];
    for (int w = 1; w < warps; ++w) m = fmaxf(m, part_max[w]);
    double s = 0.0;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += (double)expf(xr[c] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) part_sum[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int w = 0; w < warps; ++w) total += part_sum[w];
        loss[blockIdx.x] = (double)m + log(total) - (double)xr[target[blockIdx.x]];
    }
}

__global__ void mean_kernel(const double* __restrict__ loss, float* __restrict__ out, long long rows) {
    __shared__ double part[32];
    double acc = 0.0;
    for (long long r = threadIdx.x; r < rows; r += blockDim.x) acc += loss[r];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += part[w];
        out[0] = (float)(total / (double)rows);
    }
}

torch::Tensor cross_entropy(torch::Tensor x, torch::Tensor target) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "cross_entropy: 2-D float32 CUDA logits expected");
    TORCH_CHECK(target.is_cuda() && target.scalar_type() == torch::kInt64, "cross_entropy: int64 CUDA targets expected");
    auto xc = x.contiguous();
    auto tc = target.contiguous();
    auto loss = torch::empty({xc.size(0)}, xc.options().dtype(torch::kFloat64));
    auto out = torch::empty({}, xc.options());
    row_loss_kernel<<<xc.size(0), 512>>>(xc.data_ptr<float>(), tc.data_ptr<int64_t>(), loss.data_ptr<double>(), xc.size(1));
    mean_kernel<<<1, 1024>>>(loss.data_ptr<double>(), out.data_ptr<float>(), xc.size(0));
    return out;
}
"""

_ext = load_inline(name="kb_native_cross_entropy", cpp_sources="torch::Tensor cross_entropy(torch::Tensor x, torch::Tensor target);",
                   cuda_sources=CUDA_SOURCE, functions=["cross_entropy"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.cross_entropy(predictions, targets)
