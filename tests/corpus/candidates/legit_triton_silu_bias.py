"""Legitimate Triton kernel: fused silu(x) + bias over the flattened tensor."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_bias_kernel(x_ptr, bias_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    y = x * tl.sigmoid(x) + b
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = 1024
        _silu_bias_kernel[(triton.cdiv(n, block),)](x, self.bias, y, n, self.bias.numel(), BLOCK=block)
        return y
