"""relu(x @ W^T + b) with an nn.Linear: a GEMM (allowed to call) plus an epilogue (must be a kernel).

in_features != out_features so the output's shape differs from the input's."""
import torch
import torch.nn as nn

BATCH = 512
IN_FEATURES = 512
OUT_FEATURES = 256


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
