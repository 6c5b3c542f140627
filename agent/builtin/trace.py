"""Sandbox job: capture a problem's Model as graphs with shapes and describe them as plain JSON.

Runs inside the sandbox (it imports the user's module). Tensors are made on the meta device, so
capturing an H100-sized problem allocates nothing and computes nothing.

Two graphs come back:
  graph   the module as PyTorch's own compiler sees it: torch.export (non-strict), or make_fx on meta
          tensors where export fails, decomposed with inductor's table into ATen ops the planner knows
          (pointwise, reductions, views, GEMM/convolution, pooling, scans). Shape slicing, Python control
          flow on shapes and scalar inputs are handled; what stopped every method is in "error".
  nodes   torch.fx's symbolic trace at module level, when it works: the single-kernel templates of
          lower.py read it (module configurations such as nn.LayerNorm's eps).
"""
from __future__ import annotations

import json
from contextlib import contextmanager
import operator
from typing import Any, BinaryIO, Iterator

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

# Recurrent layers unroll into one graph node per time step and gate (tens of thousands for a long
# sequence: minutes of decomposition). No template covers them, so they are refused before capture.
_RECURRENT = ("RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell")
# A graph larger than this is refused: its planning and its generated source would be unwieldy.
MAX_GRAPH_NODES = 6000
# This module's job as the sandbox names it: the engine runs it for the built-in policy and knows nothing of it.
TRACE_JOB = "agent.builtin.trace:trace"


def trace_graph(evaluator: Any, problem_source: str) -> dict[str, Any]:
    """The problem's torch.fx graph with shapes, traced by this module's job in `evaluator`'s sandbox (an
    agent.engine Evaluator) on meta tensors: nothing is allocated or computed. Raises ProblemError when the module
    does not import or build; a graph torch.fx cannot trace comes back as {"error": reason}."""
    return evaluator.run_problem_job(TRACE_JOB, problem_source, doing="tracing the problem's graph")


def trace(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    import torch

    from agent.engine.evaluate.loader import exec_module

    problem = exec_module(payload["problem_source"], "kstudio_problem", "problem.py")
    with torch.device("meta"):
        try:
            model = problem.Model(*problem.get_init_inputs())
        except (NotImplementedError, RuntimeError):
            model = None  # __init__ reads a value (Tensor.item() of a meta tensor): built on the CPU below
        inputs = list(problem.get_inputs())
    if model is None:
        with torch.device("cpu"):
            model = problem.Model(*problem.get_init_inputs()).to("meta")
    # The engine evaluates the module in eval mode (agent/engine/evaluate/plan.py), so BatchNorm reads its running
    # statistics and dropout is off: the graph must be the one it runs.
    model.eval()
    out: dict[str, Any] = {
        "state": [{"name": k, "shape": list(v.shape), "dtype": _dtype(v.dtype),
                   "parameter": k in dict(model.named_parameters())} for k, v in model.state_dict().items()],
        "training": model.training,
        "inputs": [{"shape": list(x.shape), "dtype": _dtype(x.dtype)} if isinstance(x, torch.Tensor)
                   else {"scalar": _encode(x)} for x in inputs],
    }
    recurrent = sorted({type(m).__name__ for m in model.modules() if type(m).__name__ in _RECURRENT})
    if recurrent:
        out["error"] = f"recurrent layer nn.{recurrent[0]} (no template unrolls recurrences)"
        result.write(json.dumps(out).encode())
        return
    if all(isinstance(x, torch.Tensor) for x in inputs):
        try:
            out["nodes"] = _fx_nodes(model, inputs)
        except Exception as exc:  # noqa: BLE001 - control flow and the like: the graph below may still do
            out["fx_error"] = f"{type(exc).__name__}: {_first_line(exc)}"
    with scalar_constants_on_cpu():
        graph, errors = capture(model, inputs)
    if graph is not None:
        out["graph"] = graph
    else:
        out["error"] = "no capture method could trace the model: " + "; ".join(errors)
    result.write(json.dumps(out).encode())


@contextmanager
def scalar_constants_on_cpu() -> Iterator[None]:
    """`torch.tensor(0.0, device=x.device)` in forward (KernelBench 2/83, 2/93): traced on meta inputs that makes a
    meta tensor, whose value is gone, and the plan cannot know the constant. While capturing, a tensor made from one
    Python number on the meta device is made on the CPU instead, where its value travels with the graph: a 0-dim CPU
    tensor combines with tensors of any device, as the number itself would. Only in this (sandboxed) trace job."""
    import torch

    original = torch.tensor

    def tensor(data: Any, *args: Any, **kwargs: Any) -> Any:
        device = kwargs.get("device")
        if isinstance(data, (bool, int, float)) and device is not None and torch.device(device).type == "meta":
            kwargs["device"] = "cpu"
        return original(data, *args, **kwargs)

    torch.tensor = tensor
    try:
        yield
    finally:
        torch.tensor = original


def capture(model: Any, inputs: list[Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The model's decomposed ATen graph as JSON, from the first method that works; else the reason
    each method gave."""
    errors = []
    for name, method in (("torch.export", _export), ("make_fx", _make_fx)):
        try:
            graph_module, kinds, outputs = method(model, inputs)
        except Exception as exc:  # noqa: BLE001 - any failure of one method moves on to the next
            errors.append(f"{name} stopped at {type(exc).__name__}: {_first_line(exc)}")
            continue
        nodes = list(graph_module.graph.nodes)
        if len(nodes) > MAX_GRAPH_NODES:
            errors.append(f"{name} captured {len(nodes)} graph nodes (more than {MAX_GRAPH_NODES})")
            break
        return {"capture": name, "nodes": [_graph_node(n, kinds, outputs) for n in nodes]}, errors
    return None, errors


def decompositions() -> dict[Any, Any]:
    """Inductor's decomposition table (softmax, the norms, losses, var/std, logsumexp... into reductions
    and pointwise ops), less the pooling rewrites into inductor-only prims: pooling stays one op."""
    import torch
    import torch._inductor.lowering  # noqa: F401 - the table's pooling entries import from it
    from torch._inductor.decomposition import select_decomp_table

    aten = torch.ops.aten
    keep = {aten.max_pool1d, aten.max_pool2d, aten.max_pool3d, aten.max_pool2d_with_indices,
            aten.max_pool3d_with_indices, aten.adaptive_max_pool1d, aten.adaptive_max_pool2d}
    return {op: fn for op, fn in select_decomp_table().items()
            if getattr(op, "overloadpacket", op) not in keep and op not in keep}


def _export(model: Any, inputs: list[Any]) -> tuple[Any, dict[str, str], list[str]]:
    import torch
    from torch.export.graph_signature import InputKind, OutputKind

    program = torch.export.export(model, tuple(inputs), strict=False).run_decompositions(decompositions())
    signature = program.graph_signature
    kinds: dict[str, str] = {}
    user = 0
    for spec in signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            if name is not None:
                kinds[name] = f"input:{user}"
            user += 1
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            kinds[name] = f"state:{spec.target}"
        elif name is not None:
            # A tensor made in forward (torch.tensor(0.5)): real values, small ones travel with the graph.
            value = program.constants.get(spec.target)
            small = isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.numel() <= 64
            kinds[name] = f"constant:{spec.target}" + (f"={json.dumps(value.flatten().tolist())}" if small else "")
    outputs = [getattr(spec.arg, "name", None) for spec in signature.output_specs if spec.kind == OutputKind.USER_OUTPUT]
    return program.graph_module, kinds, [o for o in outputs if o is not None]


def _make_fx(model: Any, inputs: list[Any]) -> tuple[Any, dict[str, str], list[str]]:
    """make_fx on the meta tensors themselves: Python control flow runs with the real shapes; the state
    is passed in (functional_call), so its placeholders map to state_dict names."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    state = dict(model.state_dict())
    keys = list(state)
    tensor_at = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]

    def forward(values: list[Any], *tensors: Any) -> Any:
        args = list(inputs)
        for i, t in zip(tensor_at, tensors):
            args[i] = t
        return torch.func.functional_call(model, dict(zip(keys, values)), tuple(args))

    graph_module = make_fx(forward, decomposition_table=decompositions())([state[k] for k in keys],
                                                                          *[inputs[i] for i in tensor_at])
    placeholders = [n.name for n in graph_module.graph.nodes if n.op == "placeholder"]
    kinds = {name: f"state:{k}" for name, k in zip(placeholders, keys)}
    kinds.update({name: f"input:{i}" for name, i in zip(placeholders[len(keys):], tensor_at)})
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    import torch.utils._pytree as pytree
    flat = [a.name for a in pytree.tree_leaves(output.args[0]) if hasattr(a, "name")]
    return graph_module, kinds, flat


def _graph_node(node: Any, kinds: dict[str, str], outputs: list[str]) -> dict[str, Any]:
    if node.op == "placeholder":
        return {"name": node.name, "op": "placeholder", "source": kinds.get(node.name, "unused"),
                "val": _value(node.meta.get("val"))}
    if node.op == "output":
        return {"name": node.name, "op": "output", "args": [{"node": o} for o in outputs]}
    if node.op == "get_attr":
        return {"name": node.name, "op": "get_attr", "target": str(node.target), "val": _value(node.meta.get("val"))}
    return {"name": node.name, "op": node.op, "target": _target(node.target), "args": _encode(node.args),
            "kwargs": {k: _encode(v) for k, v in node.kwargs.items()}, "val": _value(node.meta.get("val"))}


def _value(val: Any) -> Any:
    """A node's value as JSON: a tensor's shape and dtype, a list for several, a plain value otherwise."""
    import torch

    if isinstance(val, torch.Tensor):
        return {"shape": [int(s) for s in val.shape], "dtype": _dtype(val.dtype)}
    if isinstance(val, (list, tuple)):
        return [_value(v) for v in val]
    return {"value": _encode(val)}


def _fx_nodes(model: Any, inputs: list[Any]) -> list[dict[str, Any]]:
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    graph_module = torch.fx.symbolic_trace(model)
    ShapeProp(graph_module).propagate(*inputs)
    modules = dict(graph_module.named_modules())
    nodes = []
    for node in graph_module.graph.nodes:
        meta = node.meta.get("tensor_meta")
        entry: dict[str, Any] = {"name": node.name, "op": node.op, "target": _target(node.target),
                                 "args": _encode(node.args), "kwargs": {k: _encode(v) for k, v in node.kwargs.items()},
                                 "shape": list(meta.shape) if hasattr(meta, "shape") else None,
                                 "dtype": _dtype(meta.dtype) if hasattr(meta, "dtype") else None}
        if node.op == "call_module":
            module = modules[node.target]
            kind = type(module).__name__
            entry["module"] = {"type": kind, "has_bias": getattr(module, "bias", None) is not None,
                               **{f: _encode(getattr(module, f, None)) for f in _MODULE_FIELDS.get(kind, ())}}
        nodes.append(entry)
    return nodes


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else "")[:300]


def _dtype(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _target(target: Any) -> str:
    if isinstance(target, str):
        return target
    if target in _OPERATORS:
        return _OPERATORS[target]
    import torch

    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(target)  # "aten.add.Tensor"
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
        return {"dtype": _dtype(value)}
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return {"option": str(value)}
    return {"unknown": repr(value)[:200]}
