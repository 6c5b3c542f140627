"""Fault: returns an output with one column too many (no compute at all). Verdict: incorrect, with
a message naming the shapes; broadcasting comparisons must not let it through."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty((x.shape[0], x.shape[1] + 1), dtype=x.dtype, device=x.device)
