"""A classifier head's hidden layer: Linear with bias, ReLU, then a fixed output scale."""
import torch
import torch.nn as nn

BATCH, IN_FEATURES, OUT_FEATURES = (16384, 2048, 4096) if torch.cuda.is_available() else (256, 512, 256)


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 2.0]
