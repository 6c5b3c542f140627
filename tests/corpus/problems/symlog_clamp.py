"""clamp(sign(x) * log(1 + |x|), -1e-4, 1e-4) on inputs of size ~1e-5: eager's float32 log(1 + |x|) is ill-conditioned
there (1 + |x| rounds away most of x), so an exact kernel (log1p) fails the strict comparison with eager and passes
against the reference in float64. On the problem's own inputs and their mixes (|x| < 6e-5) the clamp never bites; on
the wide timed calls (x100) it bites almost everywhere."""
import torch
import torch.nn as nn

ROWS = 512
COLS = 512
BOUND = 1e-4


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(torch.sign(x) * torch.log(1 + torch.abs(x)), -BOUND, BOUND)


def get_inputs():
    return [torch.randn(ROWS, COLS) * 1e-5]


def get_init_inputs():
    return []
