"""y = silu(x) + bias at a size that fills an H100 (256 MiB per tensor). GPU only: slow on a small CPU."""
import torch
import torch.nn as nn

BATCH = 8192
FEATURES = 8192


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
