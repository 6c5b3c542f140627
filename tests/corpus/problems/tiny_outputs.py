"""y = 1e-6 * tanh(x): every output is at most 1e-6 in magnitude.

Returning zeros passes any absolute tolerance of 1e-6 or more; a checker must scale its tolerance to
the reference's magnitude (and may flag the near-zero reference)."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 1024
SCALE = 1e-6


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * SCALE


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
