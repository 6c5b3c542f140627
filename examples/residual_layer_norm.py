"""A post-norm transformer's "add & norm": LayerNorm(x + residual) over the hidden size."""
import torch
import torch.nn as nn

TOKENS, HIDDEN = (32768, 4096) if torch.cuda.is_available() else (512, 1024)


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


def get_inputs():
    shape = (TOKENS, HIDDEN)
    return [torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [HIDDEN]
