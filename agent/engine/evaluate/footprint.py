"""Sandbox job: the problem's footprint, traced on meta tensors (shapes and dtypes only; nothing is allocated or
computed), and the device's memory. The parent plans the evaluation from it (memory.py) before either of the
evaluation's jobs starts.

It runs the problem's code (its owner's, as the reference's job does), never a candidate's: a problem that lies
about its own size changes only its own evaluations' plan, and a plan that is too small ends in the reference's
job running out of memory, which is reported as the engine's (capacity), never as the candidate's failure.
"""
from __future__ import annotations

import json
from typing import Any, BinaryIO

import torch

from agent.engine.evaluate.batch import as_list
from agent.engine.evaluate.loader import exec_module

from agent.engine.evaluate.plan import VARIANTS


def footprint(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    names = payload["names"]
    out: dict[str, Any] = {}
    if payload["device"] == "cuda":
        free, total = torch.cuda.mem_get_info()
        out["device_free_bytes"], out["device_total_bytes"] = int(free), int(total)
    try:
        problem = exec_module(payload["problem_source"], "kstudio_problem", "problem.py")
        with torch.device("meta"):
            model = getattr(problem, names["model"])(*getattr(problem, names["get_init_inputs"])())
            sets = [list(getattr(problem, names["get_inputs"])())]
            if callable(getattr(problem, VARIANTS, None)):
                sets += [list(s) for s in getattr(problem, VARIANTS)()]
        if hasattr(model, "eval"):
            model.eval()
        weights = sum(_bytes(t) for t in model.state_dict().values()) if hasattr(model, "state_dict") else 0
        found = []
        with torch.no_grad():
            for values in sets:
                outputs = [o for o in as_list(model(*values)) if isinstance(o, torch.Tensor)]
                tensors = [v for v in values if isinstance(v, torch.Tensor)]
                found.append({"input_bytes": sum(_bytes(t) for t in tensors), "weight_bytes": weights,
                              "output_bytes": sum(_bytes(o) for o in outputs),
                              "input_elements": sum(t.numel() for t in tensors),
                              "output_elements": sum(o.numel() for o in outputs)})
        out["footprints"] = found
    except Exception as exc:  # noqa: BLE001 - forward read a value a meta tensor has not (.item(), data-dependent shapes)
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
    result.write(json.dumps(out).encode())


def _bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()
