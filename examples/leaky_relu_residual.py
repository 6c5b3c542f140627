"""A residual block's tail: leaky_relu(x, 0.01) plus the skip connection, two inputs of one shape."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS, COLS = (16384, 8192) if torch.cuda.is_available() else (512, 1024)


class Model(nn.Module):
    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=0.01) + residual


def get_inputs():
    return [torch.randn(ROWS, COLS), torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
