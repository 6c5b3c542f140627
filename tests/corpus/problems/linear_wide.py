"""x @ W^T + b with an nn.Linear of few inputs and many outputs: 1 Mi output elements, small enough for a 2-core CPU.

Large outputs are where a timed call's check (one keyed projection per output) must stay as strict as a checked
call's elementwise tolerance: an output wrong by a little in every element moves a projection only like the square
root of its size."""
import torch
import torch.nn as nn

BATCH = 1024
IN_FEATURES = 64
OUT_FEATURES = 1024


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
