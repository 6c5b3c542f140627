"""Whole-graph planning: a captured ATen graph (trace.py's "graph") as a sequence of steps.

The graph is split at its library anchors (mm, addmm, bmm, baddbmm, convolution of any dimensionality,
transposed too: they stay cuBLAS/cuDNN calls, as the engine's allow-list permits) and at the ops that
need their input whole (reductions, pooling, scans, concatenation). Everything between them is
pointwise and stays lazy: an expression tree over views of whole tensors (lower.py's Leaf and Expr),
fused into the kernel that consumes it. So a module becomes a list of steps:

  Library   one anchor call on materialized tensors (views are passed as as_strided views);
  Kernel    one generated kernel: "pointwise" (an expression written into a view of a buffer),
            "reduce" (sum/prod/amax/amin/argmax/argmin/any/var_mean over any set of dimensions, its
            input expression fused in), "pool" (max/avg, 1-3D, adaptive too) or "scan" (cumsum/cumprod).

Softmax, the norms (layer/group/instance/batch, training or eval), logsumexp, the losses and the
rest arrive here already decomposed by PyTorch's own tables into these pieces. Anything else raises
Unsupported naming the ATen op that stopped the plan.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Union

from agent.builtin.lower import (Expr, Leaf, Unsupported, broadcast, broadcast_leaf, contiguous, conv_bias_view,
                                 decode)

# Library anchors: ATen op -> the positions of its tensor arguments.
LIBRARY = {"mm": (0, 1), "addmm": (0, 1, 2), "bmm": (0, 1), "baddbmm": (0, 1, 2), "convolution": (0, 1, 2)}
REDUCTIONS = {"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "any", "all", "max", "min",
              "var_mean", "var", "std"}
POOLS = {"avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
         "max_pool2d_with_indices", "max_pool3d_with_indices", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
         "adaptive_avg_pool1d", "_adaptive_avg_pool1d", "adaptive_max_pool2d", "adaptive_max_pool1d"}
# Pointwise ATen ops that map onto ops.py by name.
UNARY_ATEN = {"relu", "sigmoid", "tanh", "silu", "mish", "hardsigmoid", "hardswish", "abs", "neg", "exp", "log",
              "sqrt", "rsqrt", "reciprocal", "sin", "cos"}
EXTRA_UNARY = {"expm1", "log1p", "log2", "log10", "exp2", "erf", "erfc", "tan", "floor", "ceil", "round", "trunc",
               "sign", "isnan", "isinf", "logical_not", "bitwise_not", "asin", "acos", "atan", "sinh", "cosh", "frac",
               "sgn"}
COMPARE = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
LOGICAL = {"logical_and": "&&", "logical_or": "||", "bitwise_and": "&&", "bitwise_or": "||", "logical_xor": "!="}
IDENTITY = {"clone", "alias", "lift_fresh_copy", "detach", "contiguous", "_assert_tensor_metadata"}
RANDOM = {"rand", "randn", "rand_like", "randn_like", "bernoulli", "native_dropout", "randint", "normal", "uniform"}
# An expression seen in another shape of the same elements (row-major), where no view of its leaves can say it.
RESHAPE = "reshape"
REMAPPING = (RESHAPE, "tile", "gather")  # ops that evaluate their operand at other coordinates than their own
MAX_EXPR_NODES = 300  # a larger pointwise tree is written to a buffer first (bounded source size)
FLOAT_TYPES = {"float32", "float16", "bfloat16", "float64"}


@dataclass
class Kernel:
    kind: str  # "pointwise", "reduce", "pool", "scan"
    source: Any  # the value it reads (Leaf or Expr), evaluated per element of its iteration space
    outputs: list[tuple[str, Leaf]]  # (what, where): "value", "index", "var", "mean" into a view of a buffer
    shape: tuple[int, ...]  # the iteration space (pointwise), or the source's shape
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Library:
    op: str
    args: list[Any]  # Leaf (a whole buffer or a view of one) or plain values
    output: str  # buffer name


Step = Union[Kernel, Library]


@dataclass
class GraphPlan:
    steps: list[Step]
    buffers: dict[str, tuple[tuple[int, ...], str]]  # "tmp:<k>" -> (shape, dtype)
    outputs: list[str]  # buffers returned, in order
    single: bool  # forward returns a tensor (not a tuple)
    inputs: list[dict[str, Any]]  # trace's inputs: {"shape", "dtype"} or {"scalar"}
    state: list[dict[str, Any]]
    ops: list[str]
    capture: str
    # An output that is a whole buffer in another shape (a GEMM's rows returned as a 4D tensor): returned as a view of
    # the buffer, never copied. Buffer name -> the shape returned.
    views: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Buffers held in another memory layout than row-major (layout.py's channels-last convolution outputs): buffer
    # name -> torch.memory_format name. Views of them already address that layout.
    layouts: dict[str, str] = field(default_factory=dict)

    kind = "graph"

    def output_shape(self, name: str) -> tuple[int, ...]:
        return self.views.get(name, self.buffers[name][0])

    def base_shape(self, base: str) -> tuple[int, ...]:
        return self.base_info(base)[0]

    def base_info(self, base: str) -> tuple[tuple[int, ...], str]:
        if base.startswith("tmp:"):
            return self.buffers[base]
        if base.startswith("state:"):
            entry = next(s for s in self.state if s["name"] == base[6:])
            return tuple(entry["shape"]), entry["dtype"]
        entry = self.inputs[int(base.split(":")[1])]
        return tuple(entry["shape"]), entry["dtype"]

    def kernels(self) -> list[Kernel]:
        return [s for s in self.steps if isinstance(s, Kernel)]


def plan_graph(traced: dict[str, Any]) -> GraphPlan:
    if "graph" not in traced:
        raise Unsupported(traced.get("error") or "the model could not be captured")
    return _Planner(traced).run()


def _shape(v: Any) -> tuple[int, ...]:
    return v.shape if isinstance(v, (Leaf, Expr)) else ()


def _size(v: Any, seen: set[int] | None = None) -> int:
    seen = set() if seen is None else seen
    if not isinstance(v, Expr) or id(v) in seen:
        return 0
    seen.add(id(v))
    return 1 + sum(_size(o, seen) for o in v.operands)


def is_data(leaf: Leaf) -> bool:
    """A leaf backed by memory (not a constant or an index ramp made up in the kernel)."""
    return leaf.source.split(":")[0] in ("input", "state", "tmp")


def op_name(target: str) -> tuple[str, str]:
    """"aten.add.Tensor" -> ("add", "Tensor"); "prims.iota.default" -> ("iota", "default")."""
    parts = target.split(".")
    if len(parts) >= 3:
        return parts[1], parts[2]
    return parts[-1], ""


class _Planner:
    def __init__(self, traced: dict[str, Any]) -> None:
        self.traced = traced
        self.nodes = traced["graph"]["nodes"]
        self.values: dict[str, Any] = {}
        self.dtypes: dict[str, Any] = {}
        self.steps: list[Step] = []
        self.buffers: dict[str, tuple[tuple[int, ...], str]] = {}
        self.views: dict[str, tuple[int, ...]] = {}
        self.ops: list[str] = []
        used: dict[str, int] = {}
        for node in self.nodes:
            for name in node_names(node.get("args")) + node_names(node.get("kwargs")):
                used[name] = used.get(name, 0) + 1
        self.used = used
        self.getitems: dict[str, set[int]] = {}
        for node in self.nodes:
            if node.get("target") == "getitem":
                self.getitems.setdefault(node["args"][0]["node"], set()).add(node["args"][1])

    def run(self) -> GraphPlan:
        outputs: list[Any] = []
        for node in self.nodes:
            if node["op"] == "output":
                outputs = [self.values[a["node"]] for a in node["args"]]
                out_dtypes = [self.dtypes[a["node"]] for a in node["args"]]
                continue
            val = node.get("val")
            self.dtypes[node["name"]] = val.get("dtype") if isinstance(val, dict) else \
                [v.get("dtype") for v in val] if isinstance(val, list) else None
            self.values[node["name"]] = self._node(node)
        if not outputs:
            raise Unsupported("the model returns no tensor")
        names = []
        for value, dtype in zip(outputs, out_dtypes):
            if not isinstance(value, (Leaf, Expr)):
                raise Unsupported("the model returns a value that is not a tensor")
            names.append(self._output(value, dtype, names))
        _pieces_in_place(self.steps, self.buffers, names)
        if not any(isinstance(s, Kernel) for s in self.steps) and not any(isinstance(s, Library) for s in self.steps):
            raise Unsupported("the model computes nothing (it returns an input or a view of one)")
        if any(0 in self.buffers[n][0] for n in names):
            raise Unsupported("an empty output tensor")
        return GraphPlan(self.steps, self.buffers, names, len(outputs) == 1 and not self._tuple_output(),
                         self.traced["inputs"], self.traced["state"], self.ops, self.traced["graph"]["capture"],
                         self.views)

    def _tuple_output(self) -> bool:
        return False  # export flattens outputs; a single tensor is returned bare

    def _output(self, value: Any, dtype: str, taken: list[str]) -> str:
        if (isinstance(value, Leaf) and value.source.startswith("tmp:") and value.source not in taken
                and value.offset == 0 and math.prod(value.shape) == math.prod(self.buffers[value.source][0])
                and value.strides == contiguous(value.shape) and self.buffers[value.source][1] == dtype):
            # The whole of a buffer of ours, in order: returned as it is, or as a view in the output's shape (a
            # copy kernel here would move every byte twice more: 0.82x on KernelBench's 4D tensor-matrix product).
            if value.shape != self.buffers[value.source][0]:
                self.views[value.source] = value.shape
            return value.source
        # An input, a weight, a view or a lazy expression: written into a fresh buffer (never an alias).
        return self._materialize(value, dtype).source

    # ------------------------------------------------------------------------------ helpers

    def _buffer(self, shape: tuple[int, ...], dtype: str) -> Leaf:
        name = f"tmp:{len(self.buffers)}"
        self.buffers[name] = (tuple(shape), dtype)
        return Leaf(name, tuple(shape), contiguous(tuple(shape)))

    def _materialize(self, value: Any, dtype: str) -> Leaf:
        out = self._buffer(_shape(value), dtype)
        self.steps.append(Kernel("pointwise", value, [("value", out)], out.shape))
        return out

    def _data(self, value: Any, dtype: str) -> Leaf:
        """A value backed by memory (what a library call or a gather needs); flipped views are copied
        (as_strided takes no negative strides)."""
        if isinstance(value, Leaf) and is_data(value) and all(s >= 0 for s in value.strides):
            return value
        return self._materialize(value, dtype)

    def _arg(self, a: Any) -> Any:
        value = decode(a, self.values)
        return value["dtype"] if isinstance(value, dict) and "dtype" in value else value

    def _dtype_of(self, a: Any) -> str:
        if isinstance(a, dict) and "node" in a:
            d = self.dtypes.get(a["node"])
            if isinstance(d, str):
                return d
        return "float32"

    # -------------------------------------------------------------------------------- nodes

    def _node(self, node: dict[str, Any]) -> Any:
        op = node["op"]
        val = node.get("val")
        if op == "placeholder":
            source = node["source"]
            if source.startswith("constant:") and "=" in source and isinstance(val, dict) and "shape" in val:
                values = json.loads(source.split("=", 1)[1])
                if len(set(values)) == 1:  # one value, however it is shaped
                    return _const(float(values[0]), tuple(val["shape"]))
            if source.startswith("constant:"):
                raise Unsupported(f"a tensor constant made in forward ({source[9:]}); its values are not known "
                                  "when planning")
            if not isinstance(val, dict) or "shape" not in val:
                return val.get("value") if isinstance(val, dict) else None  # a scalar input, specialized
            if source == "unused":
                return None
            shape = tuple(val["shape"])
            return Leaf(source, shape, contiguous(shape))
        if op == "get_attr":
            raise Unsupported(f"graph attribute {node['target']}")
        target = node["target"]
        if target == "getitem":
            base = self.values[node["args"][0]["node"]]
            return base[node["args"][1]] if isinstance(base, (list, tuple)) else None
        name, overload = op_name(target)
        args = [self._arg(a) for a in node["args"]]
        kwargs = {k: self._arg(v) for k, v in node["kwargs"].items()}
        out_dtype = self.dtypes[node["name"]]
        shape = tuple(val["shape"]) if isinstance(val, dict) and "shape" in val else None
        if name in RANDOM:
            raise Unsupported(f"random numbers ({target}): a kernel cannot reproduce PyTorch's generator")
        if name in IDENTITY:
            return args[0] if args else None
        if name in LIBRARY:
            return self._library(name, node, args, shape, out_dtype)
        if name in REDUCTIONS:
            return self._reduce(name, overload, node, args, kwargs, out_dtype)
        if name in POOLS:
            return self._pool(name, node, args, out_dtype)
        if name in ("cumsum", "cumprod"):
            return self._scan(name, node, args, kwargs, shape, out_dtype)
        view = self._view(name, overload, args, kwargs, shape, node)
        if view is not NotImplemented:
            return view
        return self._pointwise(name, overload, node, args, kwargs, shape, out_dtype)

    # ----------------------------------------------------------------------------- library

    def _library(self, name: str, node: dict[str, Any], args: list[Any], shape: Any, dtype: str) -> Leaf:
        if dtype not in FLOAT_TYPES:
            raise Unsupported(f"{name} on {dtype} tensors")
        call = list(args)
        for i in LIBRARY[name]:
            if i < len(call) and call[i] is not None:
                call[i] = self._data(call[i], self._dtype_of(node["args"][i]))
        if name in ("addmm", "baddbmm"):
            beta = node["kwargs"].get("beta", 1)
            alpha = node["kwargs"].get("alpha", 1)
            call += [beta, alpha]
        bias = call[2] if name == "convolution" else None
        if isinstance(bias, Leaf):
            call[2] = None  # added in the consumer's kernel instead (lower.conv_bias_view)
        self.ops.append("conv" if name == "convolution" else name)
        out = self._buffer(shape, dtype)
        self.steps.append(Library(name, call, out.source))
        if isinstance(bias, Leaf):
            return self._expr("add", [out, conv_bias_view(bias, len(_shape(call[1])) - 2)], (), tuple(shape))
        return out

    # -------------------------------------------------------------------------- reductions

    def _reduce(self, name: str, overload: str, node: dict[str, Any], args: list[Any], kwargs: dict[str, Any],
                dtype: Any) -> Any:
        x = args[0]
        if name in ("max", "min") and overload == "other":  # torch.max(a, b): elementwise
            return self._expr("max2" if name == "max" else "min2", args[:2], (), tuple(node["val"]["shape"]))
        if not isinstance(x, (Leaf, Expr)):
            raise Unsupported(f"{name} of a constant")
        if name not in ("view", "_unsafe_view", "reshape", "_reshape_alias", "unsqueeze", "squeeze") \
                and _through_reshape(x):
            # A view's strides mean nothing inside a reshape's operand (other coordinates): written out first.
            x = self._materialize(x, self._dtype_of(node["args"][0]))
        ndim = len(_shape(x))
        dims: Any
        keepdim = False
        correction = 1.0
        if name in ("var_mean", "var", "std"):
            dims = kwargs.get("dim", args[1] if len(args) > 1 else None)
            correction = kwargs.get("correction", 1)
            correction = 1.0 if correction is None else float(correction)
            keepdim = bool(kwargs.get("keepdim", False))
        elif name in ("argmax", "argmin") or (name in ("max", "min") and overload == "dim"):
            dims = kwargs.get("dim", args[1] if len(args) > 1 else None)
            keepdim = bool(kwargs.get("keepdim", args[2] if len(args) > 2 else False))
            if dims is None:  # over the flattened tensor
                dims = list(range(ndim))
        else:
            dims = kwargs.get("dim", args[1] if len(args) > 1 else None)
            keepdim = bool(kwargs.get("keepdim", args[2] if len(args) > 2 else False))
        if dims is None or dims == []:
            dims = list(range(ndim))
        if isinstance(dims, int):
            dims = [dims]
        dims = sorted({d + ndim if d < 0 else d for d in dims}) if ndim else []
        src_dtype = self._dtype_of(node["args"][0])
        reduced = math.prod(_shape(x)[d] for d in dims) if dims else 1
        kept = tuple(s for d, s in enumerate(_shape(x)) if d not in dims)
        if reduced == 0:
            raise Unsupported(f"{name} over an empty dimension")
        self.ops.append(name)
        if name in ("max", "min") and overload == "dim":
            parts = [("value", dtype[0]), ("index", dtype[1])]
            kind = "argmax" if name == "max" else "argmin"
        elif name in ("max", "min"):
            parts, kind = [("value", dtype)], "amax" if name == "max" else "amin"
        elif name in ("argmax", "argmin"):
            parts, kind = [("index", dtype)], name
        elif name == "var_mean":
            parts, kind = [("var", dtype[0]), ("mean", dtype[1])], "var_mean"
        elif name in ("var", "std"):
            parts, kind = [(name, dtype)], "var_mean"
        else:
            parts, kind = [("value", dtype)], name
        wanted = self.getitems.get(node["name"]) if len(parts) > 1 else None
        out_shape = tuple(1 if d in dims else s for d, s in enumerate(_shape(x))) if keepdim else kept
        outputs, results = [], []
        for k, (what, dt) in enumerate(parts):
            if wanted is not None and k not in wanted:
                results.append(None)
                continue
            buf = self._buffer(out_shape, dt)
            outputs.append((what, buf))
            results.append(buf)
        if not outputs:
            return [None] * len(parts)
        self.steps.append(Kernel("reduce", x, outputs, _shape(x), {"kind": kind, "dims": dims, "correction": correction,
                                                                    "source_dtype": src_dtype}))
        return results if len(parts) > 1 else results[0]

    # ------------------------------------------------------------------------------ pooling

    def _pool(self, name: str, node: dict[str, Any], args: list[Any], dtype: Any) -> Any:
        x = args[0]
        if not isinstance(x, (Leaf, Expr)):
            raise Unsupported(f"{name} of a constant")
        val = node["val"]
        adaptive = "adaptive" in name
        spatial = {"1d": 1, "2d": 2, "3d": 3}[next(s for s in ("1d", "2d", "3d") if s in name)]
        in_shape = _shape(x)
        maxing = "max" in name
        first = val[0] if isinstance(val, list) else val
        out_shape = tuple(first["shape"])

        def triple(v: Any, default: Any) -> list[int]:
            v = default if v in (None, []) else v
            v = v if isinstance(v, list) else [v]
            return [int(a) for a in (v * spatial if len(v) == 1 else v)]
        if adaptive:
            params = {"adaptive": True}
        else:
            kernel = triple(args[1], None)
            stride = triple(args[2] if len(args) > 2 else None, kernel)
            padding = triple(args[3] if len(args) > 3 else 0, 0)
            if maxing:
                dilation = triple(args[4] if len(args) > 4 else 1, 1)
                params = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}
            else:
                include = args[5] if len(args) > 5 else True
                divisor = args[6] if len(args) > 6 else None
                params = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": [1] * spatial,
                          "count_include_pad": bool(include), "divisor": divisor}
            params["adaptive"] = False
        params.update({"kind": "max" if maxing else "avg", "spatial": spatial, "in_shape": in_shape})
        self.ops.append(("max" if maxing else "avg") + f"_pool{spatial}d")
        with_indices = isinstance(val, list)
        wanted = self.getitems.get(node["name"], {0}) if with_indices else {0}
        dtypes = dtype if isinstance(dtype, list) else [dtype]
        outputs, results = [], []
        for k, what in enumerate(["value", "index"][:len(dtypes)]):
            if k in wanted:
                buf = self._buffer(out_shape, dtypes[k])
                outputs.append((what, buf))
                results.append(buf)
            else:
                results.append(None)
        self.steps.append(Kernel("pool", x, outputs, in_shape, params))
        return results if with_indices else results[0]

    # -------------------------------------------------------------------------------- scans

    def _scan(self, name: str, node: dict[str, Any], args: list[Any], kwargs: dict[str, Any], shape: Any,
              dtype: str) -> Leaf:
        x = args[0]
        if not isinstance(x, (Leaf, Expr)):
            raise Unsupported(f"{name} of a constant")
        if name not in ("view", "_unsafe_view", "reshape", "_reshape_alias", "unsqueeze", "squeeze") \
                and _through_reshape(x):
            # A view's strides mean nothing inside a reshape's operand (other coordinates): written out first.
            x = self._materialize(x, self._dtype_of(node["args"][0]))
        ndim = len(_shape(x))
        dim = args[1] if len(args) > 1 else kwargs["dim"]
        dim = dim + ndim if dim < 0 else dim
        if ndim == 0:
            return x
        self.ops.append(name)
        out = self._buffer(shape, dtype)
        self.steps.append(Kernel("scan", x, [("value", out)], _shape(x), {"kind": name[3:], "dim": dim}))
        return out

    # -------------------------------------------------------------------------------- views

    def _view(self, name: str, overload: str, args: list[Any], kwargs: dict[str, Any], shape: Any,
              node: dict[str, Any]) -> Any:
        if name in ("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "permute", "expand", "slice",
                    "select", "transpose", "t", "rev", "flip", "as_strided", "split", "split_with_sizes", "unbind",
                    "narrow", "unfold", "chunk", "movedim", "cat", "constant_pad_nd", "squeeze_copy", "view_copy",
                    "_reshape_alias", "expand_copy", "permute_copy", "unsqueeze_copy", "slice_copy"):
            name = name.removesuffix("_copy")
        else:
            return NotImplemented
        x = args[0]
        if name == "cat":
            return self._cat(args, kwargs, shape, node)
        if name == "constant_pad_nd":
            return self._pad(args, shape, node)
        if not isinstance(x, (Leaf, Expr)):
            raise Unsupported(f"{name} of a constant")
        if name not in ("view", "_unsafe_view", "reshape", "_reshape_alias", "unsqueeze", "squeeze") \
                and _through_reshape(x):
            # A view's strides mean nothing inside a reshape's operand (other coordinates): written out first.
            x = self._materialize(x, self._dtype_of(node["args"][0]))
        ndim = len(_shape(x))

        def axis(d: int) -> int:
            return d + ndim if d < 0 else d
        if name in ("view", "_unsafe_view", "reshape", "_reshape_alias"):
            return self._reshape(x, tuple(shape), node)
        if name in ("unsqueeze", "squeeze", "expand"):
            return self._reshape(x, tuple(shape), node) if name != "expand" else transform(
                x, lambda leaf: broadcast_leaf(leaf, tuple(shape)), tuple(shape))
        if name in ("permute", "transpose", "t", "movedim"):
            order = list(range(ndim))
            if name == "permute":
                order = [axis(d) for d in args[1]]
            elif name == "movedim":
                raise Unsupported("movedim")
            elif ndim >= 2:
                a, b = (0, 1) if name == "t" else (axis(args[1]), axis(args[2]))
                order[a], order[b] = order[b], order[a]
            return transform(x, lambda leaf: Leaf(leaf.source, tuple(leaf.shape[d] for d in order),
                                                  tuple(leaf.strides[d] for d in order), leaf.offset), tuple(shape))
        if name in ("slice", "narrow"):
            if name == "narrow":
                dim, start = axis(args[1]), args[2]
                step = 1
                start = start + _shape(x)[dim] if start < 0 else start
            else:
                dim = axis(args[1] if len(args) > 1 else 0)
                start = args[2] if len(args) > 2 and args[2] is not None else 0
                end = args[3] if len(args) > 3 and args[3] is not None else _shape(x)[dim]
                step = args[4] if len(args) > 4 else 1
                start, end, step = slice(start, end, step).indices(_shape(x)[dim])
            return transform(x, lambda leaf: _narrow(leaf, dim, start, step, shape[dim]), tuple(shape))
        if name == "select":
            dim, index = axis(args[1]), args[2]
            index = index + _shape(x)[dim] if index < 0 else index
            return transform(x, lambda leaf: _select(leaf, dim, index), tuple(shape))
        if name in ("rev", "flip"):
            dims = [axis(d) for d in args[1]]
            return transform(x, lambda leaf: _flip(leaf, dims), tuple(shape))
        if name in ("split", "split_with_sizes", "chunk", "unbind"):
            shapes = [tuple(v["shape"]) for v in node["val"]]
            dim = axis(args[2] if len(args) > 2 else kwargs.get("dim", 0)) if name != "unbind" else axis(
                args[1] if len(args) > 1 else 0)
            pieces, start = [], 0
            for s in shapes:
                if name == "unbind":
                    pieces.append(transform(x, lambda leaf, i=start: _select(leaf, dim, i), s))
                    start += 1
                else:
                    pieces.append(transform(x, lambda leaf, a=start, n=s[dim]: _narrow(leaf, dim, a, 1, n), s))
                    start += s[dim]
            return pieces
        if name == "as_strided":
            if not isinstance(x, Leaf) or not is_data(x):
                x = self._materialize(x, self._dtype_of(node["args"][0]))
            offset = args[3] if len(args) > 3 and args[3] is not None else x.offset
            return Leaf(x.source, tuple(args[1]), tuple(args[2]), offset)
        if name == "unfold":
            dim, step = axis(args[1]), args[3]

            def unfold(leaf: Leaf) -> Leaf:
                strides = list(leaf.strides)
                strides[dim] = leaf.strides[dim] * step
                return Leaf(leaf.source, tuple(shape), tuple(strides) + (leaf.strides[dim],), leaf.offset)
            return transform(x, unfold, tuple(shape), full=True)
        raise Unsupported(name)

    def _reshape(self, x: Any, shape: tuple[int, ...], node: dict[str, Any]) -> Any:
        if _shape(x) == shape:
            return x
        moved = transform(x, lambda leaf: _reshaped(leaf, shape), shape, full=True)
        if moved is not None:
            return moved
        if isinstance(x, Expr):
            # Some leaf's strides cannot express the new shape (GroupNorm's per-group statistics, broadcast over a
            # group's channels, seen per channel): the expression is evaluated through the reshape instead (each
            # element's row-major index in the new shape, decomposed in the old one), so its consumer still fuses it
            # rather than writing it out and reading it back (KernelBench's 35_GroupNorm_ did: a pass over 7.5 GB).
            return Expr(RESHAPE, (x,), (), shape)
        # A leaf that is no view of the new shape: written out and viewed.
        buf = self._materialize(x, self._dtype_of(node["args"][0]))
        return Leaf(buf.source, shape, contiguous(shape))

    def _cat(self, args: list[Any], kwargs: dict[str, Any], shape: Any, node: dict[str, Any]) -> Leaf:
        pieces = args[0]
        ndim = len(shape)
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        dim = dim + ndim if dim < 0 else dim
        out = self._buffer(tuple(shape), self.dtypes[node["name"]])
        start = 0
        self.ops.append("cat")
        for piece in pieces:
            if not isinstance(piece, (Leaf, Expr)) or len(_shape(piece)) != ndim:
                continue  # torch.cat skips empty 1-D tensors
            size = _shape(piece)[dim]
            if size:
                view = _narrow(out, dim, start, 1, size)
                self.steps.append(Kernel("pointwise", piece, [("value", view)], view.shape))
            start += size
        return out

    def _pad(self, args: list[Any], shape: Any, node: dict[str, Any]) -> Leaf:
        x, pad = args[0], args[1]
        value = float(args[2]) if len(args) > 2 and args[2] is not None else 0.0
        if any(p < 0 for p in pad):
            raise Unsupported("constant_pad_nd with negative padding")
        out = self._buffer(tuple(shape), self.dtypes[node["name"]])
        self.steps.append(Kernel("pointwise", _const(value, tuple(shape)), [("value", out)], tuple(shape)))
        view = out
        ndim = len(shape)
        for k in range(len(pad) // 2):
            dim = ndim - 1 - k
            view = _narrow(view, dim, pad[2 * k], 1, _shape(x)[dim])
        self.steps.append(Kernel("pointwise", x, [("value", view)], view.shape))
        self.ops.append("pad")
        return out

    # ----------------------------------------------------------------------------- pointwise

    def _pointwise(self, name: str, overload: str, node: dict[str, Any], args: list[Any], kwargs: dict[str, Any],
                   shape: Any, dtype: Any) -> Any:
        if shape is None:
            raise Unsupported(f"operation {node['target']}")
        if name == "scalar_tensor":
            return _const(float(args[0]), ())
        if name in ("full", "full_like", "zeros", "ones", "zeros_like", "ones_like"):
            value = {"zeros": 0.0, "ones": 1.0, "zeros_like": 0.0, "ones_like": 1.0}.get(name)
            value = float(args[1]) if value is None else value
            return _const(value, tuple(shape))
        if name == "iota":
            start = kwargs.get("start", args[1] if len(args) > 1 else 0)
            step = kwargs.get("step", args[2] if len(args) > 2 else 1)
            return Leaf(f"iota:{start}:{step}", tuple(shape), (1,))
        if name == "arange":
            raise Unsupported("arange")
        if name in ("convert_element_type", "_to_copy", "to", "type_as"):
            target = args[1] if name == "convert_element_type" else kwargs.get("dtype", dtype)
            return self._expr("convert", [args[0]], (("dtype", target),), tuple(shape))
        if name == "gather":
            # Written out at once: a gathered value's coordinates are not its source's, so no view may be
            # pushed through it.
            src = self._data(args[0], self._dtype_of(node["args"][0]))
            dim = args[1] + len(src.shape) if args[1] < 0 else args[1]
            self.ops.append("gather")
            value = Expr("gather", (src, args[2]), (("dim", dim),), tuple(shape))
            return self._materialize(value, dtype)
        if name == "repeat":
            # Tiling is no strided view: the tiles are written out (their coordinates wrap around).
            x = args[0]
            self.ops.append("repeat")
            return self._materialize(Expr("tile", (x,), (), tuple(shape)), dtype)
        if name == "where":
            return self._expr("where", args[:3], (), tuple(shape))
        if name in COMPARE:
            return self._expr("compare", args[:2], (("op", COMPARE[name]),), tuple(shape))
        if name in LOGICAL:
            return self._expr("logical", args[:2], (("op", LOGICAL[name]),), tuple(shape))
        if name in ("clamp", "clamp_min", "clamp_max", "hardtanh"):
            lo = args[1] if len(args) > 1 and name != "clamp_max" else kwargs.get("min")
            hi = (args[1] if name == "clamp_max" else args[2] if len(args) > 2 else kwargs.get("max"))
            if name == "hardtanh":
                lo, hi = (args[1] if len(args) > 1 else -1.0), (args[2] if len(args) > 2 else 1.0)
            out = args[0]
            if isinstance(lo, (Leaf, Expr)):
                out = self._expr("max2", [out, lo], (), tuple(shape))
                lo = None
            if isinstance(hi, (Leaf, Expr)):
                out = self._expr("min2", [out, hi], (), tuple(shape))
                hi = None
            if lo is None and hi is None:
                return out
            return self._expr("clamp", [out], (("max", hi), ("min", lo)), tuple(shape))
        if name in ("add", "sub", "rsub", "mul", "div", "maximum", "minimum", "pow", "fmod", "remainder", "atan2",
                    "floor_divide", "true_divide", "copysign"):
            a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other")
            alpha = kwargs.get("alpha", args[2] if len(args) > 2 and name in ("add", "sub", "rsub") else None)
            params: tuple = ()
            if alpha not in (None, 1):
                params = (("alpha", float(alpha)),)
            rounding = kwargs.get("rounding_mode")
            op = {"maximum": "max2", "minimum": "min2", "true_divide": "div"}.get(name, name)
            if op == "div" and rounding:
                op = "div_" + rounding
            if op == "pow" and not isinstance(b, (Leaf, Expr)):
                return self._expr("pow_const", [a], (("exponent", float(b)),), tuple(shape))
            if op == "pow" and not isinstance(a, (Leaf, Expr)):
                return self._expr("pow", [float(a), b], (), tuple(shape))
            return self._expr(op, [a, b], params, tuple(shape))
        if name in UNARY_ATEN or name in EXTRA_UNARY:
            return self._expr(name, [args[0]], (), tuple(shape))
        if name == "gelu":
            return self._expr("gelu", [args[0]], (("approximate", kwargs.get("approximate", "none")),), tuple(shape))
        if name == "leaky_relu":
            return self._expr("leaky_relu", [args[0]], (("negative_slope", float(args[1] if len(args) > 1 else 0.01)),),
                              tuple(shape))
        if name == "elu":
            alpha = float(args[1] if len(args) > 1 else 1.0)
            scale = float(args[2] if len(args) > 2 else 1.0)
            input_scale = float(args[3] if len(args) > 3 else 1.0)
            if scale != 1.0 or input_scale != 1.0:
                inner = self._expr("mul", [args[0], input_scale], (), tuple(shape)) if input_scale != 1.0 else args[0]
                out = self._expr("elu", [inner], (("alpha", alpha),), tuple(shape))
                return self._expr("mul", [out, scale], (), tuple(shape))
            return self._expr("elu", [args[0]], (("alpha", alpha),), tuple(shape))
        if name == "softplus":
            return self._expr("softplus", [args[0]], (("beta", float(args[1] if len(args) > 1 else 1.0)),
                                                      ("threshold", float(args[2] if len(args) > 2 else 20.0))), tuple(shape))
        if name == "relu6":
            return self._expr("relu6", [args[0]], (), tuple(shape))
        if name == "lerp":
            a, b, w = args[:3]
            diff = self._expr("sub", [b, a], (), tuple(shape))
            return self._expr("add", [a, self._expr("mul", [w, diff], (), tuple(shape))], (), tuple(shape))
        if name in ("addcmul", "addcdiv"):
            a, b, c = args[:3]
            value = float(kwargs.get("value", args[3] if len(args) > 3 else 1.0))
            prod = self._expr("mul" if name == "addcmul" else "div", [b, c], (), tuple(shape))
            if value != 1.0:
                prod = self._expr("mul", [prod, value], (), tuple(shape))
            return self._expr("add", [a, prod], (), tuple(shape))
        raise Unsupported(f"operation {node['target']}")

    def _expr(self, op: str, operands: list[Any], params: tuple, shape: tuple[int, ...]) -> Any:
        values = []
        for o in operands:
            if isinstance(o, bool):
                o = 1.0 if o else 0.0
            if isinstance(o, (int, float)):
                values.append(float(o))
            elif isinstance(o, (Leaf, Expr)):
                values.append(o)
            else:
                raise Unsupported(f"{op} with an argument of type {type(o).__name__}")
        if not any(isinstance(v, (Leaf, Expr)) for v in values):
            raise Unsupported(f"{op} of constants only")
        broadcast(*[_shape(v) for v in values if isinstance(v, (Leaf, Expr))], shape)
        if op not in ("compare", "logical", "where", "convert", "gather", "clamp", "max2", "min2"):
            self.ops.append(op)
        expr = Expr(op, tuple(values), tuple(sorted(params, key=lambda p: p[0])), tuple(shape))
        if _size(expr) > MAX_EXPR_NODES:
            return self._materialize(expr, "float32")
        return expr


# ----------------------------------------------------------------------------------- views

# Producers that address their output through its view (offset and strides) on every path, so that they can write
# straight into a slice of a concatenation.
_IN_PLACE_KINDS = ("pointwise", "scan")


def _pieces_in_place(steps: list[Step], buffers: dict[str, tuple[tuple[int, ...], str]], outputs: list[str]) -> None:
    """A concatenation's piece that a kernel of ours computed into a buffer of its own, read by nothing else, is
    computed straight into its slice of the concatenation: the copy goes, and the bytes move once (KernelBench's
    92_cumsum_exclusive scans 32767 of each 32768 elements and prepends a zero: scan, copy and zero column moved 16 GB
    where 8 suffice, at 0.54x of torch.compile on the H200). Who writes and who names each buffer is indexed once:
    DenseNet201's hundreds of concatenations took a second to plan when every copy walked every step."""
    named: dict[str, list[int]] = {}  # buffer -> the steps naming it anywhere (read, written, in a parameter)
    writers: dict[str, list[int]] = {}
    for i, step in enumerate(steps):
        for buffer in _buffers_named(step, set()):
            named.setdefault(buffer, []).append(i)
        if isinstance(step, Kernel):
            for buffer in {leaf.source for _, leaf in step.outputs}:
                writers.setdefault(buffer, []).append(i)
    gone: set[int] = set()
    for c, copy in enumerate(steps):
        if not (isinstance(copy, Kernel) and copy.kind == "pointwise" and isinstance(copy.source, Leaf)):
            continue
        piece, view = copy.source, copy.outputs[0][1]
        written = writers.get(piece.source, [])
        p = written[0] if len(written) == 1 else None  # a buffer written in parts is another concatenation
        producer = steps[p] if p is not None else None
        if (producer is None or p == c or not isinstance(producer, Kernel) or producer.kind not in _IN_PLACE_KINDS
                or len(producer.outputs) != 1 or "then" in producer.params or piece.source in outputs
                or view.source == piece.source or piece.offset != 0 or piece.strides != contiguous(piece.shape)
                or math.prod(piece.shape) != math.prod(buffers[piece.source][0])
                or buffers[piece.source][1] != buffers[view.source][1]
                or any(i not in (p, c) for i in named.get(piece.source, []))):
            continue
        # The piece is the whole buffer in order, perhaps flattened: the producer writes the slice seen in its shape.
        target = _reshaped(view, producer.outputs[0][1].shape)
        if target is None:
            continue
        producer.outputs = [(producer.outputs[0][0], target)]
        gone.add(c)
        del buffers[piece.source]
        writers[view.source] = [p if i == c else i for i in writers[view.source]]
        named[view.source] = [p if i == c else i for i in named[view.source]]
    steps[:] = [step for i, step in enumerate(steps) if i not in gone]


def _buffers_named(value: Any, found: set[str]) -> set[str]:
    """The buffers whose Leaves appear anywhere in `value` (a step, its source, outputs and parameters)."""
    if isinstance(value, Leaf):
        found.add(value.source)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _buffers_named(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _buffers_named(v, found)
    elif hasattr(value, "__dataclass_fields__"):
        for f in value.__dataclass_fields__:
            _buffers_named(getattr(value, f), found)
    return found


def _const(value: float, shape: tuple[int, ...]) -> Leaf:
    return Leaf(f"const:{value!r}", shape, (0,) * len(shape))


def _through_reshape(value: Any, seen: set[int] | None = None) -> bool:
    """Whether a value's expression holds a reshape (RESHAPE), whose operand lies in other coordinates."""
    seen = set() if seen is None else seen
    if not isinstance(value, Expr) or id(value) in seen:
        return False
    seen.add(id(value))
    return value.op == RESHAPE or any(_through_reshape(o, seen) for o in value.operands)


def transform(x: Any, fn: Any, shape: tuple[int, ...], full: bool = False) -> Any:
    """Apply a view (fn: Leaf -> Leaf) to every leaf of a value, each first broadcast to the value's
    shape, so the view means the same coordinates for all of them. Floats pass through. Returns None
    when a leaf cannot take the view (fn returned None), or where the value holds a reshape (its operand's
    coordinates are not the value's)."""
    memo: dict[int, tuple[Any, Any]] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, float):
            return v
        if isinstance(v, Expr) and v.op == RESHAPE:
            return None
        key = id(v)
        if key in memo:
            return memo[key][1]
        if isinstance(v, Leaf):
            out = fn(broadcast_leaf(v, _shape(x)) if v.shape != _shape(x) else v)
        else:
            operands = []
            for o in v.operands:
                if isinstance(o, (Leaf, Expr)) and o.shape != _shape(x):
                    o = _broadcast_value(o, _shape(x))
                operands.append(walk(o))
            out = None if any(o is None for o in operands) else Expr(v.op, tuple(operands), v.params, tuple(shape))
        memo[key] = (v, out)  # v kept alive: a freed temporary's id could be reused by the next one
        return out
    if isinstance(x, Leaf):
        return fn(x)
    return walk(x)


def _broadcast_value(v: Any, shape: tuple[int, ...]) -> Any:
    if isinstance(v, Leaf):
        return broadcast_leaf(v, shape)
    if isinstance(v, Expr):
        return Expr(v.op, tuple(_broadcast_value(o, shape) if isinstance(o, (Leaf, Expr)) else o for o in v.operands),
                    v.params, shape)
    return v


def _narrow(leaf: Leaf, dim: int, start: int, step: int, length: int) -> Leaf:
    shape = list(leaf.shape)
    strides = list(leaf.strides)
    shape[dim] = length
    offset = leaf.offset + start * leaf.strides[dim]
    strides[dim] = leaf.strides[dim] * step
    return Leaf(leaf.source, tuple(shape), tuple(strides), offset)


def _select(leaf: Leaf, dim: int, index: int) -> Leaf:
    return Leaf(leaf.source, leaf.shape[:dim] + leaf.shape[dim + 1:], leaf.strides[:dim] + leaf.strides[dim + 1:],
                leaf.offset + index * leaf.strides[dim])


def _flip(leaf: Leaf, dims: list[int]) -> Leaf:
    strides, offset = list(leaf.strides), leaf.offset
    for d in dims:
        offset += (leaf.shape[d] - 1) * leaf.strides[d]
        strides[d] = -leaf.strides[d]
    return Leaf(leaf.source, leaf.shape, tuple(strides), offset)


def _reshaped(leaf: Leaf, shape: tuple[int, ...]) -> Leaf | None:
    """The leaf seen with a new shape of the same number of elements, if its strides allow it without a
    copy (torch's view rule: merged dimensions must be laid out as one; split ones always can be)."""
    return _split_dims(leaf, shape)


def _split_dims(leaf: Leaf, shape: tuple[int, ...]) -> Leaf | None:
    """General case: walk both shapes, merging and splitting where the strides allow."""
    old = [(s, st) for s, st in zip(leaf.shape, leaf.strides) if s != 1]
    out: list[int] = []
    j = 0
    new = list(shape)
    k = 0
    while k < len(new):
        if new[k] == 1:
            out.append(0)
            k += 1
            continue
        if j >= len(old):
            return None
        size, stride = old[j]
        # the new dims k.. that split old dim j, or merge several old dims into new dim k
        if new[k] <= size and size % new[k] == 0:
            rest = size
            while rest > 1 and k < len(new):
                if new[k] == 1:
                    out.append(0)
                    k += 1
                    continue
                if rest % new[k]:
                    return None
                rest //= new[k]
                out.append(stride * rest)
                k += 1
            if rest != 1:
                return None
            j += 1
        else:
            product, group = 1, []
            while product < new[k] and j < len(old):
                group.append(old[j])
                product *= old[j][0]
                j += 1
            if product != new[k]:
                return None
            for (s0, st0), (s1, st1) in zip(group, group[1:]):
                if st0 != s1 * st1:
                    return None
            out.append(group[-1][1])
            k += 1
    if j != len(old):
        return None
    return Leaf(leaf.source, tuple(shape), tuple(out), leaf.offset)


def node_names(value: Any) -> list[str]:
    """The names of the graph nodes a captured node's args (or kwargs) refer to, in order."""
    if isinstance(value, dict):
        if "node" in value:
            return [value["node"]]
        return [n for v in value.values() for n in node_names(v)]
    if isinstance(value, list):
        return [n for v in value for n in node_names(v)]
    return []


def describe_graph(plan: GraphPlan) -> str:
    kernels = plan.kernels()
    library = [s for s in plan.steps if isinstance(s, Library)]
    kinds = ", ".join(f"{sum(1 for k in kernels if k.kind == kind)} {kind}" for kind in
                      ("pointwise", "reduce", "pool", "scan") if any(k.kind == kind for k in kernels))
    shapes = "; ".join("x".join(map(str, plan.output_shape(o))) + " " + plan.buffers[o][1] for o in plan.outputs)
    lib = f"{len(library)} library call(s) ({', '.join(dict.fromkeys(s.op for s in library))}) left to cuBLAS/cuDNN, " \
        if library else ""
    return (f"the whole graph ({plan.capture}) as a sequence: {lib}{len(kernels)} generated kernel(s)"
            f"{' (' + kinds + ')' if kinds else ''}; output {shapes}.")
