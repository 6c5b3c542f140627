"""A CNN stage: a 3x3 same-padded convolution, ReLU, then a learned per-channel bias (c_out, 1, 1)."""
import torch
import torch.nn as nn

if torch.cuda.is_available():
    BATCH, C_IN, C_OUT, SIZE = 32, 64, 128, 128  # 128 MB in, 256 MB out
else:
    BATCH, C_IN, C_OUT, SIZE = 2, 8, 16, 32


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)
        self.bias = nn.Parameter(torch.randn(c_out, 1, 1) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn(BATCH, C_IN, SIZE, SIZE)]


def get_init_inputs():
    return [C_IN, C_OUT]
