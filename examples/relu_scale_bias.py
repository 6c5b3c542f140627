"""A scaled, biased ReLU over a batch of feature vectors: relu(x * scale + bias), as after a
quantisation-aware rescale in an MLP."""
import torch
import torch.nn as nn

# 512 MB per tensor on a GPU; a few milliseconds on a small CPU.
ROWS, FEATURES = (16384, 8192) if torch.cuda.is_available() else (512, 1024)


class Model(nn.Module):
    def __init__(self, scale: float, features: int):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + self.bias)


def get_inputs():
    return [torch.randn(ROWS, FEATURES)]


def get_init_inputs():
    return [0.5, FEATURES]
