"""Fault: forward raises SystemExit(0) through sys.exit. SystemExit is not an Exception, so an
`except Exception` in the child misses it and the interpreter exits with status 0. Verdict:
runtime_error."""
import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.exit(0)
