"""y = silu(x) + bias, broadcast over rows. Memory-bound elementwise op with one parameter."""
import torch
import torch.nn as nn

BATCH = 1024
FEATURES = 1024


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) + self.bias


def get_inputs():
    return [torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return [FEATURES]
