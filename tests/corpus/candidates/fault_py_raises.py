"""Fault: forward raises. Verdict: runtime_error, with the traceback in the log."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("fault_py_raises: this candidate always fails in forward")
