"""Imported by the sandbox zygote: pays once, in the warm parent, for what every job would
otherwise pay on first use. Measured on the CPU box: the first custom-op call under a dispatch
mode imports torch._dynamo (~1.5 s), and FlopCounterMode's first run imports sympy and friends
(~1 s). Everything here runs on the CPU only and never touches CUDA (the zygote checks)."""
from __future__ import annotations

import torch
import torch._dynamo  # noqa: F401 - the import is the point
from torch.utils.flop_counter import FlopCounterMode

import agent.engine.evaluate.guards as guards


def _warm_up() -> None:
    model = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)
    with torch.no_grad():
        with FlopCounterMode(display=False):
            model(x)
        with guards.OpRecorder(frozenset()):
            model(x)


_warm_up()
