"""Row softmax at a size that fills an H100 (8192 x 8192). GPU only: slow on a small CPU."""
import torch
import torch.nn as nn

ROWS = 8192
COLS = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
