"""Row sum at an H100-sized input (16384 x 8192, 512 MiB). GPU only: slow on a small CPU."""
import torch
import torch.nn as nn

ROWS = 16384
COLS = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
