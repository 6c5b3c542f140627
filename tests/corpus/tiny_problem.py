"""A tiny problem module with room for a statement before the model: the tests of the upload check
(engine and studio) put a crash, a hang or nothing there."""

TEMPLATE = """import torch
import torch.nn as nn
{body}

class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""

FAILING_INPUTS = TEMPLATE.replace("torch.randn(8, 8)]", "torch.randn(8, 8) @ torch.randn(7, 7)]")
"""get_inputs raises when it runs (mismatched shapes), though the module imports fine."""
