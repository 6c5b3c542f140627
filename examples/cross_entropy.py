"""A language model's training loss: mean cross-entropy of token logits against integer targets."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS, VOCAB = (4096, 32768) if torch.cuda.is_available() else (128, 4096)


class Model(nn.Module):
    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(TOKENS, VOCAB), torch.randint(0, VOCAB, (TOKENS,))]


def get_init_inputs():
    return []
