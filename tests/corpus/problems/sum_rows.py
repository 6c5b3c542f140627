"""Row sum: (rows, cols) -> (rows,). Output shape differs from the input's."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
