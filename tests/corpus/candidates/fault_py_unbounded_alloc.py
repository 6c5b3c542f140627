"""Fault: forward allocates host memory without bound, touching every page (so overcommit does not
hide it), and keeps it all reachable. Must be stopped by the child's memory limit (MemoryError or
a kill: runtime_error) or by the time limit (timeout), without harming the host.
WARNING: only evaluate this through an engine that applies a memory limit."""
import torch
import torch.nn as nn

_HOARD: list = []
_CHUNK = 256 << 20   # 256 MiB a step


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            _HOARD.append(bytearray(b"\x01") * _CHUNK)   # repetition writes every byte
