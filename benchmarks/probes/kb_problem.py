"""A KernelBench-style problem file as the GPU probes use it: its module, its Model built at seed 0 on the device in
eval mode, and get_inputs()'s tensors moved there. Public benchmark problems, run on the GPU box only; never a
verdict's evidence."""
from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import torch

from agent.engine.evaluate.loader import exec_module


def load_problem(path: Path, name: str, device: str = "cuda") -> tuple[types.ModuleType, torch.nn.Module, list[Any]]:
    problem = exec_module(path.read_text(), name, path.name)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).to(device).eval()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    return problem, model, inputs
