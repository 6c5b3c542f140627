"""From a traced graph (trace.py's JSON) to a kernel plan the templates can write.

What a plan can hold, in order of dataflow:
  anchor    at most one GEMM or convolution, on the module's own inputs and weights; it stays a
            PyTorch call (the engine allows it) and its output feeds the kernel;
  prologue  a pointwise expression (any tree of the ops in ops.py over inputs, weights, the anchor's
            output and constants, with broadcasting and views: chunk, split, narrow, slices,
            unsqueeze, view, expand, transpose);
  row op    at most one operation over the last dimension: softmax, log_softmax, layer_norm,
            rms_norm, sum, mean, amax;
  epilogue  a pointwise expression over the row op's result (and other tensors).
Anything else raises Unsupported, naming what it met, so the policy can say so honestly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Union

from agent.builtin import ops

FLOAT32_EPS = 1.1920928955078125e-07  # torch.finfo(torch.float32).eps: nn.RMSNorm's eps=None
ROW_OPS = {"softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "mean", "amax", "cross_entropy"}
NORM_MODULES = {"LayerNorm": "layer_norm", "RMSNorm": "rms_norm"}
ACTIVATION_MODULES = {"ReLU": "relu", "ReLU6": "relu6", "Sigmoid": "sigmoid", "Tanh": "tanh", "SiLU": "silu",
                      "GELU": "gelu", "LeakyReLU": "leaky_relu", "ELU": "elu", "Softplus": "softplus", "Mish": "mish",
                      "Hardtanh": "hardtanh", "Hardsigmoid": "hardsigmoid", "Hardswish": "hardswish",
                      "Identity": "identity"}
NO_OPS = {"contiguous", "clone", "float", "to", "type_as", "detach", "identity", "dropout"}


class Unsupported(Exception):
    """The module needs something the templates do not cover; the message names it."""


@dataclass(frozen=True)
class Leaf:
    """A view of a whole tensor: element (i0, i1, ...) lives at offset + sum(i_d * strides[d])."""

    source: str  # "input:<i>", "state:<key>" or "anchor"
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0


@dataclass(frozen=True)
class Expr:
    op: str
    operands: tuple[Any, ...]  # Leaf, Expr, RowResult or float
    params: tuple[tuple[str, Any], ...]
    shape: tuple[int, ...]


@dataclass(frozen=True)
class RowResult:
    """The row op's output, as a value in the epilogue."""

    shape: tuple[int, ...]


Value = Union[Leaf, Expr, RowResult, float]


@dataclass
class Anchor:
    kind: str  # "linear", "matmul", "conv2d"
    args: list[Any]  # Leaf (whole tensors) or plain values, in the torch call's order
    shape: tuple[int, ...]


@dataclass
class RowOp:
    kind: str
    source: Value  # the prologue: what the row op reads, per element, shape [..., C]
    weight: Leaf | None = None
    bias: Leaf | None = None
    eps: float = 1e-5
    keepdim: bool = False
    target: Leaf | None = None  # cross_entropy: the class index of each row (int64)
    reduction: str = "mean"  # cross_entropy: "mean", "sum" or "none"
    ignore_index: int = -100

    @property
    def columns(self) -> int:
        return _shape(self.source)[-1]


def leaves_of(*values: Any) -> list[Leaf]:
    """The distinct tensor views the values read, in order of first appearance."""
    found: list[Leaf] = []

    def walk(v: Any) -> None:
        if isinstance(v, Leaf) and v not in found:
            found.append(v)
        elif isinstance(v, Expr):
            for o in v.operands:
                walk(o)
    for value in values:
        walk(value)
    return found


@dataclass
class Plan:
    output: Value  # the final value (an Expr, a Leaf, or something over RowResult)
    shape: tuple[int, ...]
    inputs: list[str]  # forward's argument names, in order
    state: list[dict[str, Any]]  # the module's state_dict entries: name, shape, parameter
    input_shapes: list[tuple[int, ...]]
    anchor: Anchor | None = None
    row: RowOp | None = None
    ops: list[str] = field(default_factory=list)  # what the module computes, for the policy's words
    input_dtypes: list[str] = field(default_factory=list)

    def base_dtype(self, base: str) -> str:
        if base.startswith("input:") and self.input_dtypes:
            return self.input_dtypes[int(base.split(":")[1])]
        return "float32"

    def base_shape(self, base: str) -> tuple[int, ...]:
        """The shape of a whole tensor the kernel takes ("input:<i>", "state:<key>", "anchor")."""
        if base == "anchor":
            assert self.anchor is not None
            return self.anchor.shape
        if base.startswith("state:"):
            return tuple(next(s["shape"] for s in self.state if s["name"] == base[6:]))
        return self.input_shapes[int(base.split(":")[1])]

    @property
    def kind(self) -> str:
        if self.row is not None:
            return "row"
        return "pointwise"

    def leaves(self) -> list[Leaf]:
        """Every distinct tensor view the kernel reads, in a stable order."""
        row = (self.row.source, self.row.weight, self.row.bias, self.row.target) if self.row is not None else ()
        return leaves_of(*row, self.output)

    def bases(self) -> list[str]:
        """The whole tensors behind the leaves (what the kernel function takes), in a stable order."""
        out: list[str] = []
        for leaf in self.leaves():
            if leaf.source not in out:
                out.append(leaf.source)
        return out


def decode(a: Any, values: dict[str, Any]) -> Any:
    """A traced argument with graph nodes replaced by their values; slices, dtypes and other options
    stay as their JSON for the op that reads them."""
    if isinstance(a, dict):
        if "node" in a:
            return values[a["node"]]
        if "float" in a:
            return float(a["float"])
        return a
    if isinstance(a, list):
        return [decode(x, values) for x in a]
    return a


def lower(traced: dict[str, Any]) -> Plan:
    if "error" in traced:
        raise Unsupported(traced["error"])
    if "nodes" not in traced:
        raise Unsupported(f"torch.fx cannot trace the model: {traced.get('fx_error', 'scalar inputs')}")
    if any("scalar" in i for i in traced["inputs"]):
        raise Unsupported("get_inputs() returns non-tensor values; the single-kernel templates take tensors only")
    return _Lowering(traced).run()


def contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _shape(v: Any) -> tuple[int, ...]:
    return () if isinstance(v, float) else v.shape


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max(len(s) for s in shapes)
    out = []
    for d in range(ndim):
        sizes = {s[d - ndim + len(s)] for s in shapes if d - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise Unsupported(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_leaf(leaf: Leaf, shape: tuple[int, ...]) -> Leaf:
    """The leaf seen through broadcasting to `shape`: missing and size-1 dimensions get stride 0."""
    pad = len(shape) - len(leaf.shape)
    strides = [0] * pad + [0 if size == 1 and want != 1 else st
                           for size, st, want in zip(leaf.shape, leaf.strides, shape[pad:])]
    return Leaf(leaf.source, shape, tuple(strides), leaf.offset)


def conv_bias_view(bias: Leaf, spatial: int) -> Leaf:
    """A convolution's bias (C,) seen as (C, 1, ...) against its output ((N,) C, `spatial` dims), for the epilogue to
    add.

    On the GPU PyTorch adds a convolution's bias in a broadcast kernel of its own over the whole output, a slow one
    (no vector loads): on an H200 eager's two broadcast adds in KernelBench level 2's Conv2D_ReLU_BiasAdd took 1.6 ms
    of its 4.0 ms, the convolution 1.55 ms (docs/benchmarks.md §14, session 26). The fused kernel after the
    convolution does the add for the price of one load per element, and the sum is the one eager rounds: the
    convolution, then + bias."""
    return Leaf(bias.source, (bias.shape[0],) + (1,) * spatial, (bias.strides[0],) + (0,) * spatial, bias.offset)


class _Lowering:
    def __init__(self, traced: dict[str, Any]) -> None:
        self.nodes = traced["nodes"]
        self.state = {s["name"]: s for s in traced["state"]}
        self.values: dict[str, Any] = {}
        self.inputs: list[str] = []
        self.anchor: Anchor | None = None
        self.row: RowOp | None = None
        self.ops: list[str] = []
        self.dtypes = {s["dtype"] for s in traced["state"]} | {i["dtype"] for i in traced["inputs"]}
        self.input_shapes = [tuple(i["shape"]) for i in traced["inputs"]]
        self.input_dtypes = [i["dtype"] for i in traced["inputs"]]

    def run(self) -> Plan:
        if self.dtypes - {"float32", "int64"}:
            raise Unsupported(f"dtypes {sorted(self.dtypes - {'float32'})}: the templates handle float32 only")
        output = None
        for node in self.nodes:
            if node["op"] == "output":
                output = self._arg(node["args"][0])
                continue
            if node["dtype"] not in (None, "float32") and not (node["op"] == "placeholder" and node["dtype"] == "int64"):
                raise Unsupported(f"dtype {node['dtype']} (at {node['target']}): the templates handle float32 only")
            self.values[node["name"]] = self._node(node)
        if isinstance(output, (list, tuple)):
            raise Unsupported("the model returns several tensors; the templates write one output")
        if isinstance(output, float) or output is None:
            raise Unsupported("the model returns no tensor")
        if isinstance(output, Leaf) and self.row is None:
            if self.anchor is not None and output.source == "anchor":
                raise Unsupported(f"the module is a single {self.anchor.kind} with nothing to fuse after it; "
                                  "a cuBLAS/cuDNN call is already as fast as a template would be")
            raise Unsupported("the model computes nothing (it returns an input or a view of one)")
        if self.row is not None and self.row.kind == "cross_entropy" and not isinstance(output, RowResult):
            raise Unsupported("arithmetic after cross_entropy (the template returns the loss itself)")
        integer = {f"input:{i}" for i, t in enumerate(self.input_dtypes) if t == "int64"}
        target = self.row.target.source if self.row is not None and self.row.target is not None else None
        used = {leaf.source for leaf in Plan(output, (), [], [], [], None, self.row).leaves()}
        if (used & integer) - {target}:
            raise Unsupported("integer tensors in arithmetic (the templates take them only as cross_entropy targets)")
        shape = _shape(output)
        if 0 in shape or (not shape and not (self.row is not None and self.row.kind == "cross_entropy")):
            raise Unsupported(f"output shape {list(shape)}: the templates need a non-empty tensor with dimensions")
        return Plan(output, shape, self.inputs, list(self.state.values()), self.input_shapes, self.anchor, self.row,
                    self.ops, self.input_dtypes)

    # -------------------------------------------------------------------------------- nodes

    def _arg(self, a: Any) -> Any:
        return decode(a, self.values)

    def _node(self, node: dict[str, Any]) -> Any:
        op, target = node["op"], node["target"]
        shape = tuple(node["shape"]) if node["shape"] is not None else None
        if op == "placeholder":
            self.inputs.append(target)
            return Leaf(f"input:{len(self.inputs) - 1}", shape, contiguous(shape))
        if op == "get_attr":
            if target not in self.state:
                raise Unsupported(f"attribute {target} is not a parameter or buffer")
            return Leaf(f"state:{target}", shape, contiguous(shape))
        args = [self._arg(a) for a in node["args"]]
        kwargs = {k: self._arg(v) for k, v in node["kwargs"].items()}
        if op == "call_module":
            return self._module(node, args, shape)
        name = target.rsplit(".", 1)[-1]
        name = ops.ALIASES.get(name, name)
        if op == "call_method" or op == "call_function":
            return self._call(name, args, kwargs, shape, node)
        raise Unsupported(f"graph node {op} {target}")

    def _module(self, node: dict[str, Any], args: list[Any], shape: tuple[int, ...]) -> Any:
        m = node["module"]
        kind, prefix = m["type"], node["target"]
        if kind in ACTIVATION_MODULES:
            params = {k: v for k, v in m.items() if k not in ("type", "has_bias")}
            return self._call(ACTIVATION_MODULES[kind], args, params, shape, node)
        if kind == "Dropout":
            raise Unsupported("nn.Dropout in training mode is random; the templates compute deterministic functions")
        if kind in ("Softmax", "LogSoftmax"):
            return self._call(kind.lower().replace("logsoftmax", "log_softmax"), args, {"dim": m["dim"]}, shape, node)
        if kind in NORM_MODULES:
            weight = self._state(f"{prefix}.weight") if m["elementwise_affine"] else None
            bias = self._state(f"{prefix}.bias") if m["elementwise_affine"] and m["has_bias"] else None
            eps = m["eps"] if m["eps"] is not None else FLOAT32_EPS
            return self._row(NORM_MODULES[kind], args[0], shape, weight=weight, bias=bias, eps=float(eps),
                             normalized=m["normalized_shape"])
        if kind == "Linear":
            bias = self._state(f"{prefix}.bias") if m["has_bias"] else None
            return self._anchor("linear", [args[0], self._state(f"{prefix}.weight"), bias], shape)
        if kind == "Conv2d":
            if m["padding_mode"] != "zeros":
                raise Unsupported(f"Conv2d with padding_mode={m['padding_mode']!r}")
            bias = self._state(f"{prefix}.bias") if m["has_bias"] else None
            return self._anchor("conv2d", [args[0], self._state(f"{prefix}.weight"), bias, m["stride"], m["padding"],
                                           m["dilation"], m["groups"]], shape)
        raise Unsupported(f"module nn.{kind}")

    def _state(self, key: str) -> Leaf:
        entry = self.state[key]
        return Leaf(f"state:{key}", tuple(entry["shape"]), contiguous(tuple(entry["shape"])))

    def _call(self, name: str, args: list[Any], kwargs: dict[str, Any], shape: Any, node: dict[str, Any]) -> Any:
        if name in NO_OPS:
            if name == "to" and any(isinstance(a, dict) and "dtype" in a for a in [*args[1:], *kwargs.values()]):
                raise Unsupported("dtype conversions inside forward")
            return args[0]
        if name in ("linear", "matmul", "mm", "bmm", "conv2d"):
            return self._anchor("matmul" if name in ("mm", "bmm") else name, args + [kwargs.get(k) for k in
                                ("bias",) if name == "linear" and len(args) < 3], shape)
        if name in ROW_OPS:
            return self._row_call(name, args, kwargs, shape)
        if name in ("chunk", "split", "narrow", "getitem", "unsqueeze", "view", "reshape", "expand", "transpose",
                    "permute", "t", "flatten", "squeeze"):
            return self._view(name, args, kwargs, shape)
        if name in ops.UNARY or name in ops.BINARY or name in ("identity",):
            self.ops.append(name)
            return self._pointwise(name, args, kwargs, shape)
        raise Unsupported(f"operation {node['target']}")

    # ------------------------------------------------------------------------ pointwise

    def _pointwise(self, name: str, args: list[Any], kwargs: dict[str, Any], shape: tuple[int, ...]) -> Any:
        operands = [float(a) if isinstance(a, (int, float)) and not isinstance(a, bool) else a for a in args]
        for o in operands:
            if not isinstance(o, (Leaf, Expr, RowResult, float)):
                raise Unsupported(f"{name} with an argument of type {type(o).__name__}")
        if name in ops.BINARY:
            if len(operands) != 2:
                raise Unsupported(f"{name} with {len(operands)} arguments")
            if name == "pow" and isinstance(operands[1], float):
                return Expr("pow_const", (operands[0],), (("exponent", operands[1]),), _shape(operands[0]))
            if all(isinstance(o, float) for o in operands):
                raise Unsupported(f"{name} of two constants")
        elif name == "clamp":
            lo = kwargs.get("min", operands[1] if len(operands) > 1 else None)
            hi = kwargs.get("max", operands[2] if len(operands) > 2 else None)
            if isinstance(lo, (Leaf, Expr)) or isinstance(hi, (Leaf, Expr)):
                raise Unsupported("clamp with tensor bounds")
            operands, kwargs = operands[:1], {"min": lo, "max": hi}
        elif name == "gelu":
            kwargs = {"approximate": kwargs.get("approximate", "none")}
        elif name in ("leaky_relu", "elu", "softplus", "hardtanh") and len(operands) > 1:
            names = {"leaky_relu": ["negative_slope"], "elu": ["alpha"], "softplus": ["beta", "threshold"],
                     "hardtanh": ["min_val", "max_val"]}[name]
            kwargs = {**dict(zip(names, operands[1:])), **kwargs}
            operands = operands[:1]
        params = tuple(sorted((k, v) for k, v in kwargs.items() if k not in ("inplace", "out") and v is not None))
        if any(isinstance(v, (Leaf, Expr)) for _, v in params):
            raise Unsupported(f"{name} with a tensor keyword argument")
        out_shape = broadcast(*[_shape(o) for o in operands])
        if name == "identity":
            return operands[0]
        return Expr(name, tuple(operands), params, out_shape)

    # ------------------------------------------------------------------------- row ops

    def _row_call(self, name: str, args: list[Any], kwargs: dict[str, Any], shape: tuple[int, ...]) -> Any:
        x = args[0]
        if name in ("softmax", "log_softmax", "sum", "mean", "amax"):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if isinstance(dim, list):
                dim = dim[0] if len(dim) == 1 else None
            if dim is None or not isinstance(dim, int):
                raise Unsupported(f"{name} over all dimensions or several at once (the templates reduce the last one)")
            if kwargs.get("dtype") is not None:
                raise Unsupported(f"{name} with dtype=")
            ndim = len(_shape(x))
            if dim not in (-1, ndim - 1):
                raise Unsupported(f"{name} over dimension {dim} (the templates reduce the last one)")
            keepdim = bool(kwargs.get("keepdim", args[2] if len(args) > 2 and name in ("sum", "mean", "amax") else False))
            return self._row(name, x, shape, keepdim=keepdim)
        if name == "layer_norm":
            normalized = kwargs.get("normalized_shape", args[1] if len(args) > 1 else None)
            weight = kwargs.get("weight", args[2] if len(args) > 2 else None)
            bias = kwargs.get("bias", args[3] if len(args) > 3 else None)
            eps = kwargs.get("eps", args[4] if len(args) > 4 else 1e-5)
            return self._row("layer_norm", x, shape, weight=weight, bias=bias, eps=float(eps), normalized=normalized)
        if name == "rms_norm":
            normalized = kwargs.get("normalized_shape", args[1] if len(args) > 1 else None)
            weight = kwargs.get("weight", args[2] if len(args) > 2 else None)
            eps = kwargs.get("eps", args[3] if len(args) > 3 else None)
            return self._row("rms_norm", x, shape, weight=weight, eps=float(eps if eps is not None else FLOAT32_EPS),
                             normalized=normalized)
        if name == "cross_entropy":
            target = kwargs.get("target", args[1] if len(args) > 1 else None)
            extras = dict(zip(["weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"], args[2:]))
            extras.update(kwargs)
            if extras.get("weight") is not None or extras.get("label_smoothing", 0.0) not in (0, 0.0):
                raise Unsupported("cross_entropy with class weights or label smoothing")
            if extras.get("size_average") is not None or extras.get("reduce") is not None:
                raise Unsupported("cross_entropy with the deprecated size_average/reduce arguments")
            reduction = extras.get("reduction", "mean")
            if not isinstance(target, Leaf) or len(_shape(x)) != 2 or target.shape != _shape(x)[:1]:
                raise Unsupported("cross_entropy other than logits (N, C) with class indices (N,)")
            result = self._row("cross_entropy", x, shape)
            assert self.row is not None
            self.row.target, self.row.reduction = target, reduction
            self.row.ignore_index = int(extras.get("ignore_index", -100))
            if reduction not in ("mean", "sum", "none"):
                raise Unsupported(f"cross_entropy reduction {reduction!r}")
            return result
        raise Unsupported(name)

    def _row(self, kind: str, x: Any, shape: tuple[int, ...], weight: Any = None, bias: Any = None, eps: float = 1e-5,
             keepdim: bool = False, normalized: Any = None) -> RowResult:
        if self.row is not None:
            raise Unsupported(f"a second row operation ({self.row.kind}, then {kind}); the templates fuse one")
        if not isinstance(x, (Leaf, Expr)) or _contains(x, RowResult):
            raise Unsupported(f"{kind} of a constant")
        columns = _shape(x)[-1] if _shape(x) else 0
        if normalized is not None and list(normalized if isinstance(normalized, list) else [normalized]) != [columns]:
            raise Unsupported(f"{kind} over the last {len(normalized)} dimensions (the templates normalise the last one)")
        for extra, what in ((weight, "weight"), (bias, "bias")):
            if extra is not None and (not isinstance(extra, Leaf) or extra.shape != (columns,)):
                raise Unsupported(f"{kind} with a {what} that is not a vector of the row length")
        self.ops.append(kind)
        self.row = RowOp(kind, x, weight, bias, eps, keepdim)
        return RowResult(tuple(shape))

    # ------------------------------------------------------------------------- anchors

    def _anchor(self, kind: str, args: list[Any], shape: tuple[int, ...]) -> Leaf:
        if self.anchor is not None:
            raise Unsupported(f"a second GEMM/convolution ({self.anchor.kind}, then {kind}); the templates fuse "
                              "after one")
        tensors = [a for a in args if isinstance(a, (Leaf, Expr, RowResult))]
        if any(not isinstance(a, Leaf) or a.source == "anchor" for a in tensors):
            raise Unsupported(f"{kind} of a computed value (the templates fuse after a GEMM/convolution, not before)")
        if any(a.strides != contiguous(a.shape) or a.offset for a in tensors):
            raise Unsupported(f"{kind} of a view of a tensor")
        bias = args[2] if kind == "conv2d" and len(args) > 2 else None
        if isinstance(bias, Leaf):  # added in the epilogue instead (conv_bias_view says why)
            args = [*args[:2], None, *args[3:]]
        self.ops.append(kind)
        self.anchor = Anchor(kind, args, tuple(shape))
        out = Leaf("anchor", tuple(shape), contiguous(tuple(shape)))
        if isinstance(bias, Leaf):
            self.ops.append("add")
            return self._pointwise("add", [out, conv_bias_view(bias, len(args[1].shape) - 2)], {}, tuple(shape))
        return out

    # --------------------------------------------------------------------------- views

    def _view(self, name: str, args: list[Any], kwargs: dict[str, Any], shape: Any) -> Any:
        x = args[0]
        if name == "getitem" and isinstance(x, (list, tuple)):
            return x[args[1]]
        if not isinstance(x, Leaf):
            if name in ("view", "reshape", "flatten", "squeeze", "unsqueeze") and tuple(shape) == _shape(x):
                return x  # a no-op reshape of a computed value
            raise Unsupported(f"{name} of a computed value (views are fused on inputs and weights only)")
        ndim = len(x.shape)

        def axis(d: int) -> int:
            return d + ndim if d < 0 else d
        if name in ("chunk", "split"):
            dim = axis(kwargs.get("dim", args[2] if len(args) > 2 else 0))
            size = x.shape[dim]
            if name == "chunk":
                piece = -(-size // args[1])
            elif isinstance(args[1], int):
                piece = args[1]
            else:
                raise Unsupported("split into unequal sizes")
            return [self._narrow(x, dim, start, min(piece, size - start)) for start in range(0, size, piece)]
        if name == "narrow":
            return self._narrow(x, axis(args[1]), args[2], args[3])
        if name == "getitem":
            return self._index(x, args[1] if isinstance(args[1], list) else [args[1]])
        if name in ("unsqueeze", "view", "reshape", "flatten", "squeeze"):
            if x.strides != contiguous(x.shape):
                raise Unsupported(f"{name} of a non-contiguous view")
            return Leaf(x.source, tuple(shape), contiguous(tuple(shape)), x.offset)
        if name == "expand":
            return broadcast_leaf(x, tuple(shape))
        if name in ("transpose", "permute", "t"):
            order = list(range(ndim))
            if name == "t" or name == "transpose":
                a, b = (0, 1) if name == "t" else (axis(args[1]), axis(args[2]))
                order[a], order[b] = order[b], order[a]
            else:
                order = [axis(d) for d in (args[1] if isinstance(args[1], list) else args[1:])]
            return Leaf(x.source, tuple(x.shape[d] for d in order), tuple(x.strides[d] for d in order), x.offset)
        raise Unsupported(name)

    @staticmethod
    def _narrow(x: Leaf, dim: int, start: int, length: int) -> Leaf:
        shape = list(x.shape)
        shape[dim] = length
        return Leaf(x.source, tuple(shape), x.strides, x.offset + start * x.strides[dim])

    def _index(self, x: Leaf, index: list[Any]) -> Leaf:
        if any(isinstance(i, dict) and "ellipsis" in i for i in index):
            at = next(k for k, i in enumerate(index) if isinstance(i, dict) and "ellipsis" in i)
            fill = [{"slice": [None, None, None]}] * (len(x.shape) - (len(index) - 1))
            index = index[:at] + fill + index[at + 1:]
        shape, strides, offset = [], [], x.offset
        for d, size in enumerate(x.shape):
            i = index[d] if d < len(index) else {"slice": [None, None, None]}
            if isinstance(i, int):
                offset += (i + size if i < 0 else i) * x.strides[d]
                continue
            if not (isinstance(i, dict) and "slice" in i):
                raise Unsupported("indexing with tensors or None")
            start, stop, step = slice(*i["slice"]).indices(size)
            if step != 1:
                raise Unsupported("slices with a step")
            shape.append(max(0, stop - start))
            strides.append(x.strides[d])
            offset += start * x.strides[d]
        return Leaf(x.source, tuple(shape), tuple(strides), offset)


def _contains(v: Any, kind: type) -> bool:
    if isinstance(v, kind):
        return True
    return isinstance(v, Expr) and any(_contains(o, kind) for o in v.operands)


def describe(plan: Plan) -> str:
    """What the module computes and how the kernel will do it, in words for the policy's message."""
    shape = "x".join(map(str, plan.shape))
    parts = []
    if plan.anchor is not None:
        parts.append(f"a {plan.anchor.kind} left to cuBLAS/cuDNN (or MKL/oneDNN on the CPU)")
    if plan.row is not None:
        parts.append(f"a {plan.row.kind} over rows of {plan.row.columns}")
    chain = [o for o in plan.ops if o not in ROW_OPS and o not in ("linear", "matmul", "conv2d")]
    if chain:
        parts.append("pointwise " + ", ".join(dict.fromkeys(chain)))
    bytes_moved = 4 * (sum(math.prod(plan.base_shape(b)) for b in plan.bases()) + math.prod(plan.shape))
    return (f"{' then '.join(parts)}; output {shape} float32. One fused kernel reads {len(plan.bases())} tensor(s) once "
            f"and writes the output once (~{bytes_moved / 1e6:.1f} MB of memory traffic).")
