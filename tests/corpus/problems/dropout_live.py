"""A live dropout after relu(x @ W^T + b), in the functional form (whose `training` defaults to True, so the dropout
is live even under model.eval(): a common slip in hand-written problems). The outputs are a random draw."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256
IN_FEATURES = 1024
OUT_FEATURES = 1024


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(torch.relu(self.linear(x)), p=0.1)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
