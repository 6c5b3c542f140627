"""C expressions of a whole-graph plan's values (graph.py) at given coordinates, for gcodegen's kernels.

A view's element is offset + sum(coordinate_d * stride_d) of its base tensor (`offset_expr`), so broadcasting,
slices, transposes, flips and reshapes that keep a layout cost index arithmetic, never a copy; a flat index is
split into coordinates by `decompose`. `Eval` writes one named C value per distinct (value, coordinates), in float32.
"""
from __future__ import annotations

import math
from typing import Any

from agent.builtin import ops
from agent.builtin.graph import RESHAPE, GraphPlan
from agent.builtin.lower import Expr, Leaf

INTEGER = {"int64", "int32", "int16", "int8", "uint8"}

_EXTRA_UNARY = {
    "expm1": "expm1f({a})", "log1p": "log1pf({a})", "log2": "log2f({a})", "log10": "log10f({a})",
    "exp2": "exp2f({a})", "erf": "erff({a})", "erfc": "erfcf({a})", "tan": "tanf({a})", "floor": "floorf({a})",
    "ceil": "ceilf({a})", "round": "rintf({a})", "trunc": "truncf({a})", "frac": "({a} - truncf({a}))",
    "sign": "(({a} > 0.0f) ? 1.0f : (({a} < 0.0f) ? -1.0f : {a}))",
    "sgn": "(({a} > 0.0f) ? 1.0f : (({a} < 0.0f) ? -1.0f : {a}))",
    "isnan": "(({a}) != ({a}) ? 1.0f : 0.0f)", "isinf": "(fabsf({a}) == INFINITY ? 1.0f : 0.0f)",
    "logical_not": "(({a}) == 0.0f ? 1.0f : 0.0f)", "bitwise_not": "(({a}) == 0.0f ? 1.0f : 0.0f)",
    "asin": "asinf({a})", "acos": "acosf({a})", "atan": "atanf({a})", "sinh": "sinhf({a})", "cosh": "coshf({a})",
}
_SELECTS = {"compare": "(({0}) {op} ({1}) ? 1.0f : 0.0f)",
            "logical": "((({0}) != 0.0f) {op} (({1}) != 0.0f) ? 1.0f : 0.0f)",
            "where": "(({0}) != 0.0f ? ({1}) : ({2}))"}
_EXTRA_BINARY = {
    "div_trunc": "truncf({a} / {b})", "div_floor": "floorf({a} / {b})", "floor_divide": "floorf({a} / {b})",
    "fmod": "fmodf({a}, {b})", "remainder": "({a} - floorf({a} / {b}) * {b})", "atan2": "atan2f({a}, {b})",
    "copysign": "copysignf({a}, {b})",
}

class Eval:
    """C statements computing a value at given coordinates (C expressions, one per dimension)."""

    def __init__(self, plan: GraphPlan, bases: list[str], prefix: str, types: dict[str, str]) -> None:
        self.plan, self.bases, self.prefix, self.types = plan, bases, prefix, types
        self.lines: list[str] = []
        self.names: dict[tuple[int, tuple[str, ...]], str] = {}
        self.keep: list[Any] = []  # the values named, alive so their ids stay unique
        # Buffer -> a C value already in a register (a fused reduction's result: see fused_steps).
        self.override: dict[str, str] = {}
        # A view -> its value already in a register (a lane of a float4 load: see _pointwise).
        self.leaf_override: dict[Leaf, str] = {}

    def at(self, v: Any, coords: tuple[str, ...]) -> str:
        if isinstance(v, float):
            return ops.literal(v)
        coords = coords[len(coords) - len(v.shape):] if v.shape else ()
        key = (id(v), coords)
        if key in self.names:
            return self.names[key]
        text = self._leaf(v, coords) if isinstance(v, Leaf) else self._expr(v, coords)
        name = f"{self.prefix}{len(self.names)}"
        self.lines.append(f"const float {name} = {text};")
        self.names[key] = name
        self.keep.append(v)
        return name

    def _leaf(self, leaf: Leaf, coords: tuple[str, ...]) -> str:
        kind = leaf.source.split(":")[0]
        if kind == "const":
            return ops.literal(float(leaf.source[6:]))
        if leaf.source in self.override:
            return self.override[leaf.source]
        if leaf in self.leaf_override:
            return self.leaf_override[leaf]
        index = offset_expr(leaf, coords)
        if kind == "iota":
            _, start, step = leaf.source.split(":")
            return f"(float)({start}LL + {step}LL * ({index}))"
        return f"ks_ld(p{self.bases.index(leaf.source)}[{index}])"

    def _expr(self, e: Expr, coords: tuple[str, ...]) -> str:
        params = dict(e.params)
        if e.op == "gather":
            src, index = e.operands
            i = self.at(index, coords)
            dim = params["dim"]
            size = src.shape[dim]
            picked = f"{self.prefix}g{len(self.names)}"
            self.lines.append(f"long long {picked} = (long long){i}; if ({picked} < 0) {picked} += {size}LL;")
            at = list(coords[len(coords) - len(src.shape):])
            at[dim] = picked
            return f"ks_ld(p{self.bases.index(src.source)}[{offset_expr(src, tuple(at))}])"
        if e.op == RESHAPE:
            source = e.operands[0]
            inner = coords[len(coords) - len(e.shape):] if e.shape else ()
            return self.at(source, self._reshaped(inner, e.shape, source.shape))
        if e.op == "tile":
            source = e.operands[0]
            if isinstance(source, float):
                return ops.literal(source)
            inner = coords[len(coords) - len(source.shape):] if source.shape else ()
            wrapped = tuple(c if c == "0" or size == 1 else f"({c} % {size}LL)" for c, size in zip(inner, source.shape))
            wrapped = tuple("0" if size == 1 else c for c, size in zip(wrapped, source.shape))
            return self.at(source, wrapped)
        args = [self.at(o, coords) for o in e.operands]
        if e.op == "convert":
            dtype = params["dtype"]
            if dtype == "bool":
                return f"({args[0]} != 0.0f ? 1.0f : 0.0f)"
            if dtype in INTEGER:
                return f"truncf({args[0]})"
            if dtype in ("float16", "bfloat16"):
                return f"ks_round_{dtype}({args[0]})"
            return args[0]
        if e.op in _SELECTS:
            return _SELECTS[e.op].format(*args, op=params.get("op"))
        if e.op == "pow_const":
            return ops.power(args[0], params["exponent"])
        if e.op in _EXTRA_BINARY:
            return _EXTRA_BINARY[e.op].format(a=args[0], b=args[1])
        if e.op in ops.BINARY:
            return ops.binary(e.op, args[0], args[1], params)
        if e.op in _EXTRA_UNARY:
            return _EXTRA_UNARY[e.op].format(a=args[0])
        if e.op == "clamp":
            return ops.UNARY["clamp"](args[0], params)
        return ops.UNARY[e.op](args[0], params)


    def _reshaped(self, coords: tuple[str, ...], shape: tuple[int, ...], old_shape: tuple[int, ...]) -> tuple[str, ...]:
        """The coordinates in `old_shape` of the element at `coords` in its reshape `shape` (size-1 dimensions
        broadcast: coordinate 0). The dimensions fall into groups of equal extent (reshape_groups); in each, the
        element's row-major index within the group, decomposed in the old group's shape. A group of one old dimension
        is that index itself, with no division, and one of one new dimension divides only that coordinate: a
        GroupNorm's (N, C, H, W) through (N, G, C/G * H * W) divides the channel, which is constant along a row,
        where one flat index decomposed whole divided every element's (docs/benchmarks.md §14, session 37)."""
        found = ["0"] * len(old_shape)
        for new_dims, old_dims in reshape_groups(shape, old_shape):
            terms, step = [], 1
            for d in reversed(new_dims):
                if coords[d] != "0":
                    terms.append(coords[d] if step == 1 else f"{coords[d]} * {step}LL")
                step *= shape[d]
            if len(old_dims) == 1:
                index = " + ".join(terms) or "0"
                found[old_dims[0]] = f"({index})" if " " in index else index  # an operand of any operator after
                continue
            flat = f"{self.prefix}f{len(self.names)}_{len(self.lines)}"
            self.lines.append(f"const long long {flat} = {' + '.join(terms) or '0'};")
            lines, parts = decompose(flat, tuple(old_shape[k] for k in old_dims), f"{flat}_")
            self.lines += lines
            for k, part in zip(old_dims, parts):
                found[k] = part
        return tuple(found)


def reshape_groups(shape: tuple[int, ...], old_shape: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """The dimensions of a reshape from `old_shape` to `shape` (same number of elements) in groups of equal extent,
    from the last: each a list of new dimensions and a list of old ones, size-1 dimensions in none."""
    new = [d for d, size in enumerate(shape) if size != 1]
    old = [k for k, size in enumerate(old_shape) if size != 1]
    groups: list[tuple[list[int], list[int]]] = []
    while new and old:
        new_dims, old_dims = [new.pop()], [old.pop()]
        extent, old_extent = shape[new_dims[0]], old_shape[old_dims[0]]
        while extent != old_extent:
            if extent < old_extent and new:
                new_dims.insert(0, new.pop())
                extent *= shape[new_dims[0]]
            elif old_extent < extent and old:
                old_dims.insert(0, old.pop())
                old_extent *= old_shape[old_dims[0]]
            else:
                raise ValueError(f"a reshape from {old_shape} to {shape} changes the number of elements")
        groups.append((new_dims, old_dims))
    if new or old:
        raise ValueError(f"a reshape from {old_shape} to {shape} changes the number of elements")
    return groups


def offset_expr(leaf: Leaf, coords: tuple[str, ...]) -> str:
    terms = [str(leaf.offset)] if leaf.offset else []
    for size, stride, c in zip(leaf.shape, leaf.strides, coords):
        if size != 1 and stride != 0 and c != "0":
            terms.append(f"{c} * {stride}LL" if stride != 1 else c)
    return " + ".join(terms) or "0"


def trailing_offset_expr(leaf: Leaf, coords: tuple[str, ...]) -> str:
    """offset_expr of a leaf read under broadcasting: a leaf of fewer dimensions than the kernel's coordinates takes
    the trailing ones (a LayerNorm's [C, H, W] weight in an [N, C, H, W] kernel is read at (c, h, w), not (n, c, h))."""
    return offset_expr(leaf, coords[len(coords) - len(leaf.shape):] if leaf.shape else ())


def decompose(flat: str, shape: tuple[int, ...], prefix: str) -> tuple[list[str], tuple[str, ...]]:
    """Statements naming each coordinate of flat index `flat` (in [0, prod(shape))) in `shape` (row-major). Where
    every index fits in 32 bits the divisions are 32-bit: a 64-bit division by a constant is several multiplies, and a
    4D broadcast pays six per element (KernelBench's 36_RMSNorm_ at 1.9 G elements)."""
    lines, names = [], []
    narrow = math.prod(shape) < 2**32
    if narrow:
        flat = f"(unsigned)({flat})"
    step = 1
    steps = []
    for size in reversed(shape):
        steps.append(step)
        step *= size
    steps.reverse()
    for d, (size, st) in enumerate(zip(shape, steps)):
        if size == 1:
            names.append("0")
            continue
        name = f"{prefix}{d}"
        suffix = "u" if narrow else "LL"
        div = flat if st == 1 else f"({flat} / {st}{suffix})"
        mod = div if d == 0 else f"({div} % {size}{suffix})"
        lines.append(f"const long long {name} = {mod};")
        names.append(name)
    return lines, tuple(names)
