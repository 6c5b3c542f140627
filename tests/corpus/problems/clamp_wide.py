"""clamp(x, -20, 20): the identity on the problem's own randn inputs (|x| < 20 always).

Returning the input itself (or a view of it) passes the problem's own distribution; only the
aliasing check (and a scaled-large distribution) catch it."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 1024
BOUND = 20.0


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -BOUND, BOUND)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
