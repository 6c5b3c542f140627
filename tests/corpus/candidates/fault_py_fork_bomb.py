"""Fault: forward forks without end (each child becomes a small `sleep`, as a shell fork bomb's do),
retrying when a fork fails. Verdict: runtime_error, the job's tree killed for starting too many
processes (or, where the kernel enforces RLIMIT_NPROC for this user, the fork failures it reports)."""
import os
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            try:
                if os.fork() == 0:
                    os.execv("/bin/sleep", ["sleep", "600"])
            except OSError:
                time.sleep(0.01)
