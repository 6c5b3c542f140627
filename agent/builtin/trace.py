"""Sandbox job: trace a problem's Model with torch.fx and describe its graph as plain JSON.

Runs inside the sandbox (it imports the user's module). Tensors are made on the meta device, so
tracing an H100-sized problem allocates nothing and computes nothing; shapes come from running the
traced graph on those meta tensors.
"""
from __future__ import annotations

import json
import operator
from typing import Any, BinaryIO

# Module types whose configuration the planner needs, and the attributes it reads.
_MODULE_FIELDS = {
    "Linear": ("in_features", "out_features"),
    "Conv2d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "padding_mode"),
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine"),
    "RMSNorm": ("normalized_shape", "eps", "elementwise_affine"),
    "LeakyReLU": ("negative_slope",),
    "ELU": ("alpha",),
    "GELU": ("approximate",),
    "Softplus": ("beta", "threshold"),
    "Hardtanh": ("min_val", "max_val"),
    "Softmax": ("dim",),
    "LogSoftmax": ("dim",),
}


def trace(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    from agent.evaluate.loader import exec_module

    problem = exec_module(payload["problem_source"], "kstudio_problem", "problem.py")
    with torch.device("meta"):
        model = problem.Model(*problem.get_init_inputs())
        inputs = problem.get_inputs()
    try:
        graph_module = torch.fx.symbolic_trace(model)
    except Exception as exc:  # noqa: BLE001 - data-dependent control flow and the like: a plain "cannot"
        result.write(json.dumps({"error": f"torch.fx cannot trace the model: {type(exc).__name__}: {exc}"}).encode())
        return
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if len(tensors) != len(inputs):
        result.write(json.dumps({"error": "get_inputs() returns non-tensor values; the built-in policy needs "
                                          "tensors only"}).encode())
        return
    ShapeProp(graph_module).propagate(*inputs)
    modules = dict(graph_module.named_modules())
    nodes = []
    for node in graph_module.graph.nodes:
        meta = node.meta.get("tensor_meta")
        entry: dict[str, Any] = {"name": node.name, "op": node.op, "target": _target(node.target),
                                 "args": _encode(node.args), "kwargs": {k: _encode(v) for k, v in node.kwargs.items()},
                                 "shape": list(meta.shape) if hasattr(meta, "shape") else None,
                                 "dtype": str(meta.dtype).removeprefix("torch.") if hasattr(meta, "dtype") else None}
        if node.op == "call_module":
            module = modules[node.target]
            kind = type(module).__name__
            entry["module"] = {"type": kind, "has_bias": getattr(module, "bias", None) is not None,
                               **{f: _encode(getattr(module, f, None)) for f in _MODULE_FIELDS.get(kind, ())}}
        nodes.append(entry)
    state = [{"name": k, "shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch."),
              "parameter": k in dict(model.named_parameters())} for k, v in model.state_dict().items()]
    result.write(json.dumps({"nodes": nodes, "state": state, "training": model.training,
                             "inputs": [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                                        for t in tensors]}).encode())


def _target(target: Any) -> str:
    if isinstance(target, str):
        return target
    if target in _OPERATORS:
        return _OPERATORS[target]
    module = getattr(target, "__module__", "") or ""
    name = getattr(target, "__name__", repr(target))
    return f"{module}.{name}" if module else name


_OPERATORS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
              operator.neg: "neg", operator.pow: "pow", operator.matmul: "matmul", operator.getitem: "getitem",
              operator.iadd: "add", operator.imul: "mul", operator.isub: "sub", operator.itruediv: "div"}


def _encode(value: Any) -> Any:
    import torch
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else {"float": str(value)}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"dict": {str(k): _encode(v) for k, v in value.items()}}
    if isinstance(value, slice):
        return {"slice": [_encode(value.start), _encode(value.stop), _encode(value.step)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    return {"unknown": repr(value)[:200]}
