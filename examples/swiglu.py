"""The SwiGLU gate of a LLaMA-style MLP: the fused up/gate projection's output is split in half and
combined as silu(gate) * up."""
import torch
import torch.nn as nn
import torch.nn.functional as F

# The input is 2 * FFN wide: 512 MB in and 256 MB out on a GPU.
TOKENS, FFN = (8192, 8192) if torch.cuda.is_available() else (512, 512)


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


def get_inputs():
    return [torch.randn(TOKENS, 2 * FFN)]


def get_init_inputs():
    return []
