"""Fault: forward loops forever in Python after ignoring SIGTERM, SIGINT, SIGALRM, SIGHUP and
SIGUSR1/2, so a polite terminate is not enough: the engine must escalate to SIGKILL. Verdict:
timeout."""
import signal
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (ValueError, OSError):   # not the main thread, or not allowed
                pass
        while True:
            try:
                time.sleep(0.01)
            except BaseException:   # KeyboardInterrupt, SystemExit from a handler: keep going
                pass
