"""A transformer's LayerNorm over the hidden size, with a learned weight and bias."""
import torch
import torch.nn as nn

TOKENS, HIDDEN = (32768, 4096) if torch.cuda.is_available() else (512, 1024)


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
