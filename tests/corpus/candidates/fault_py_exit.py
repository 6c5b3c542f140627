"""Fault: forward calls os._exit(0): the child vanishes with exit status 0 and no result. Verdict:
runtime_error ("exited without a verdict"), never accepted because the status was 0."""
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os._exit(0)
