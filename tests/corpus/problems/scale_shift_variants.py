"""y = 2x + 1 on the main shape and on two other shapes the module must serve (get_input_variants): a kernel
that hard-codes the main shape is caught on the variants, one that serves any shape is accepted and each variant
is timed."""
import torch
import torch.nn as nn

ROWS = 256
COLS = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_input_variants():
    return [[torch.randn(2 * ROWS, COLS)], [torch.randn(300, 700)]]


def get_init_inputs():
    return []
