"""Candidate modules from a plan: our own templates, C++ on PyTorch's (OpenMP) thread pool for the
CPU and CUDA for GPUs.

The kernel sees every tensor it reads as (base pointer, offset, strides) with the sizes fixed at
generation time, so broadcasting, chunk/narrow/slices and transposes cost index arithmetic and no
copies. ModelNew registers the same parameters and buffers as Model (so the evaluator copies Model's
weights into it), leaves the one GEMM/convolution to PyTorch, and calls the generated kernel.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from agent.builtin import ops
from agent.builtin.lower import Expr, Leaf, Plan, RowResult, broadcast_leaf, contiguous, leaves_of


@dataclass(frozen=True)
class Variant:
    """One point of the search. CUDA: threads per block and elements per thread (4: float4 loads and
    stores where every operand allows them). CPU: how the loop nest is parallelised."""

    label: str
    block: int = 256
    vec: int = 1
    cpu_loop: str = "rows"  # "rows": parallel rows, SIMD columns; "flat": one parallel SIMD loop
    registers: bool = False  # CUDA row ops: each thread keeps its part of the row in registers
    layout: str = "default"  # whole-graph plans: "channels_last" runs 2D/3D convolutions channels-last (layout.py)
    fallback: bool = False  # measured only where a variant before it was not accepted (policy.py)
    tf32: bool = True  # convolutions may use TF32 tensor cores (PyTorch's default); False: full float32 (gcodegen.py)
    rewritten: bool = False  # a variant of the module's exact rewrites (rewrite.py), not of the module as written


def variants(plan: Plan, device: str) -> list[Variant]:
    if device == "cpu":
        if plan.row is not None:
            return [Variant("rows across threads, one row buffer per task")]
        return [Variant("rows across threads, SIMD over columns", cpu_loop="rows"),
                Variant("one flat SIMD loop split across threads", cpu_loop="flat")]
    if plan.row is not None:
        return _cuda_row_variants(plan)
    found = [Variant("256 threads, float4 per thread", 256, 4), Variant("512 threads, float4 per thread", 512, 4),
             Variant("128 threads, float4 per thread", 128, 4), Variant("256 threads, one element per thread", 256, 1)]
    if plan.shape[-1] % 4 == 0:
        return found
    scalar = [Variant(f"{b} threads, one element per thread", b, 1) for b in (256, 512, 128)]
    if math.prod(plan.shape) % 4:
        return scalar
    # Rows not a multiple of four long (a convolution's 126 x 126 map) still take float4 groups of the flat index.
    return [Variant("256 threads, float4 groups of the flat index", 256, 4),
            Variant("512 threads, float4 groups of the flat index", 512, 4), *scalar[:2]]


def _cuda_row_variants(plan: Plan) -> list[Variant]:
    """Rows held in registers where the row splits evenly over the threads (one read of the row, float4
    where the row length allows), best guesses first; then the streaming template, which takes any row
    length and re-reads the row (from shared memory where it fits) for each statistic."""
    columns = _row_shapes(plan)[0][-1]
    vec = 4 if columns % 4 == 0 else 1
    access = "float4 loads and stores" if vec == 4 else "one float per access"
    held = [Variant(f"the row in registers, {b} threads per row, {columns // b} values per thread, {access}",
                    block=b, vec=vec, registers=True)
            for b in (256, 512, 1024, 128, 64, 32) if register_fit(columns, b, vec)][:4]
    if spread_over_row(plan):
        held = []  # the register template writes a reduction once per row; the streaming one spreads it over the row
    streamed = [Variant(f"one block of {b} threads per row, streaming the row", block=b) for b in (256, 1024)]
    if (plan.row is not None and plan.row.kind in STREAMED_GROUP_KINDS and columns % 4 == 0
            and columns * 4 > _ROW_CACHE_BYTES):  # a row that fits in shared memory is read once there already
        streamed = [Variant(f"one block of {b} threads per row, streaming the row in float4 groups", block=b, vec=4)
                    for b in (256, 1024)] + streamed[:1]
    return held + streamed[:6 - len(held)]


def candidate_source(plan: Plan, variant: Variant, device: str) -> str:
    kernel = _cuda(plan, variant) if device == "cuda" else _cpp(plan, variant)
    name = "ks_builtin_" + hashlib.sha256(kernel.encode()).hexdigest()[:16]
    if device == "cuda":
        build = (f'_ext = load_inline(name="{name}", cpp_sources="torch::Tensor run(std::vector<torch::Tensor> ts, int64_t stream);",\n'
                 f'                   cuda_sources=KERNEL, functions=["run"], extra_cuda_cflags=["-O3"])')
    else:
        build = (f'_ext = load_inline(name="{name}", cpp_sources=KERNEL, functions=["run"],\n'
                 f'                   extra_cflags={cpu_cflags()})')
    return MODULE.format(variant=variant.label, kernel=kernel, build=build, init=state_init(plan.state),
                         forward=_forward(plan, device))


# Static shared memory a block may use (48 KiB) less the reduction scratch: the row cache's limit.
_ROW_CACHE_BYTES = 48 * 1024 - 32 * 4

MODULE = '''"""Written by Kernel Studio's built-in policy ({variant})."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

KERNEL = r"""
{kernel}
"""

{build}


def _place(root, key, shape, dtype, parameter, memory_format=torch.contiguous_format):
    *path, leaf = key.split(".")
    module = root
    for part in path:
        if not hasattr(module, part):
            module.add_module(part, nn.Module())
        module = getattr(module, part)
    value = torch.zeros(shape, dtype=dtype).contiguous(memory_format=memory_format)  # values copied in keep the layout
    if parameter:
        module.register_parameter(leaf, nn.Parameter(value))
    else:
        module.register_buffer(leaf, value)


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        # The same parameters and buffers as Model: the evaluator copies Model's values into them.
{init}

{forward}
'''


def state_init(state: list[dict[str, Any]], formats: dict[str, str] | None = None) -> str:
    """ModelNew.__init__'s lines: the problem's parameters and buffers, same names, shapes and dtypes; `formats` names
    those held in another memory layout (a channels-last convolution's weight: the evaluator's copy of Model's values
    keeps it, so forward converts nothing per call)."""
    formats = formats or {}
    lines = [f"        _place(self, {s['name']!r}, {tuple(s['shape'])!r}, torch.{s.get('dtype', 'float32')}, {s['parameter']!r}"
             + (f", torch.{formats[s['name']]})" if s["name"] in formats else ")") for s in state]
    return "\n".join(lines) or "        pass"


def tensor_expr(plan: Any, base: str) -> str:
    """The Python expression of a whole tensor in forward: "anchor", "tmp:<k>" (a whole-graph plan's
    buffer), "state:<key>" or "input:<i>"."""
    if base == "anchor":
        return "anchor"
    if base.startswith("tmp:"):
        return f"t{base[4:]}"
    if base.startswith("state:"):
        key = base[6:]
        parameter = next(s["parameter"] for s in plan.state if s["name"] == key)
        return f"self.get_parameter({key!r})" if parameter else f"self.get_buffer({key!r})"
    return f"arg{base.split(':')[1]}"


def _forward(plan: Plan, device: str) -> str:
    args = ", ".join(f"arg{i}" for i in range(len(plan.inputs)))
    lines = [f"    def forward(self, {args}):"]
    if plan.anchor is not None:
        a = plan.anchor
        tensors = [tensor_expr(plan, x.source) if isinstance(x, Leaf) else repr(x) for x in a.args]
        if a.kind == "linear":
            call = f"F.linear({', '.join(tensors[:3])})"
        elif a.kind == "matmul":
            call = f"torch.matmul({tensors[0]}, {tensors[1]})"
        else:
            x, w, b, stride, padding, dilation, groups = (tensors + [None] * 7)[:7]
            call = f"F.conv2d({x}, {w}, {b}, {stride}, {padding}, {dilation}, {groups})"
        lines.append(f"        anchor = {call}")
    tensors = ", ".join(tensor_expr(plan, b) for b in plan.bases())
    if device == "cuda":
        # PyTorch's current stream, passed as a handle: the kernel needs no ATen CUDA headers to find it.
        lines.append(f"        return _ext.run([{tensors}], torch.cuda.current_stream().cuda_stream)")
    else:
        lines.append(f"        return _ext.run([{tensors}])")
    return "\n".join(lines)


# --------------------------------------------------------------------------------- expressions

class _Emitter:
    """C statements computing a value per element of `shape`, at row `r`, column `c`, flat index `i`."""

    def __init__(self, plan: Plan, shape: tuple[int, ...], prefix: str, row_value: str = "y") -> None:
        self.plan, self.shape, self.prefix, self.row_value = plan, shape, prefix, row_value
        self.bases = plan.bases()
        self.lines: list[str] = []
        self.names: dict[Any, str] = {}

    def leaf_index(self, leaf: Leaf) -> str:
        view = broadcast_leaf(leaf, self.shape)
        return index_expr(view, self.shape)

    def value(self, v: Any) -> str:
        if isinstance(v, float):
            return ops.literal(v)
        if isinstance(v, RowResult):
            return self.row_value
        if v in self.names:
            return self.names[v]
        if isinstance(v, Leaf):
            text = f"p{self.bases.index(v.source)}[{self.leaf_index(v)}]"
        else:
            text = self._expr(v)  # names the operands first
        name = f"{self.prefix}{len(self.names)}"
        self.lines.append(f"const float {name} = {text};")
        self.names[v] = name
        return name

    def _expr(self, e: Expr) -> str:
        params = dict(e.params)
        args = [self.value(o) for o in e.operands]
        if e.op == "pow_const":
            return ops.power(args[0], params["exponent"])
        if e.op in ops.BINARY:
            return ops.binary(e.op, args[0], args[1], params)
        return ops.UNARY[e.op](args[0], params)


def index_expr(view: Leaf, shape: tuple[int, ...], narrow: bool = False) -> str:
    """The element offset of a view broadcast to `shape`, from row r (all but the last dimension),
    column c and flat index i (= r * columns + c). `narrow`: r is a 32-bit unsigned (every flat index of `shape` fits
    in 32 bits), so that the divisions splitting it into coordinates are 32-bit: a 64-bit division by a constant is
    several multiplies, and a per-channel broadcast pays two per element (measured on the H200: KernelBench 2/57's
    conv-bias epilogue at a third of the memory roof with 64-bit divisions)."""
    if view.strides == contiguous(shape):
        return f"{view.offset}LL + i" if view.offset else "i"
    terms = [str(view.offset)] if view.offset else []
    lead = shape[:-1]
    k = "u" if narrow else "LL"
    step = 1
    for d in range(len(lead) - 1, -1, -1):
        size, stride = lead[d], view.strides[d]
        if stride and size > 1:
            coord = "r" if step == 1 and d == 0 else (f"(r / {step}{k})" if d == 0 else
                                                     (f"(r % {size}{k})" if step == 1 else f"((r / {step}{k}) % {size}{k})"))
            terms.append(f"{coord} * {stride}LL")
        step *= size
    if view.strides and view.strides[-1]:
        terms.append("c" if view.strides[-1] == 1 else f"c * {view.strides[-1]}LL")
    return " + ".join(terms) or "0"


_C_TYPES = {"float32": ("float", "torch::kFloat32"), "int64": ("int64_t", "torch::kInt64")}


def _checks(plan: Plan, cuda: bool) -> str:
    device = "is_cuda()" if cuda else "is_cpu()"
    lines = [f'TORCH_CHECK(ts.size() == {len(plan.bases())}, "run: expected {len(plan.bases())} tensors");']
    for k, base in enumerate(plan.bases()):
        shape = plan.base_shape(base)
        ctype, scalar = _C_TYPES[plan.base_dtype(base)]
        lines += [f"auto t{k} = ts[{k}].contiguous();",
                  f'TORCH_CHECK(t{k}.{device} && t{k}.scalar_type() == {scalar} && t{k}.numel() == {math.prod(shape)}LL, '
                  f'"run: tensor {k} ({base}) must be {plan.base_dtype(base)} with shape {list(shape)} on this device");',
                  f"const {ctype}* __restrict__ p{k} = t{k}.data_ptr<{ctype}>();"]
    float_base = next(k for k, b in enumerate(plan.bases()) if plan.base_dtype(b) == "float32")
    lines.append(f"auto out = torch::empty({{{', '.join(map(str, plan.shape))}}}, t{float_base}.options());")
    lines.append("float* __restrict__ o = out.data_ptr<float>();")
    return "\n    ".join(lines)


def _params(plan: Plan) -> str:
    return ", ".join(f"const {_C_TYPES[plan.base_dtype(b)][0]}* __restrict__ p{k}"
                     for k, b in enumerate(plan.bases())) + ", float* __restrict__ o"


def _pointers(plan: Plan) -> str:
    return ", ".join(f"p{k}" for k in range(len(plan.bases()))) + ", o"


def _row_shapes(plan: Plan) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The row op's input shape and the shape its epilogue runs over ((rows..., 1) for reductions)."""
    assert plan.row is not None
    source_shape = plan.row.source.shape if not isinstance(plan.row.source, float) else ()
    if plan.row.kind in ("sum", "mean", "amax") and not spread_over_row(plan):
        return source_shape, source_shape[:-1] + (1,)
    return source_shape, source_shape


def spread_over_row(plan: Plan) -> bool:
    """A reduction whose result the epilogue broadcasts back over its whole row (x / mean(|x|, -1, keepdim)): the
    epilogue then runs per element, after the statistic, instead of once per row."""
    assert plan.row is not None
    source = plan.row.source
    return plan.row.kind in ("sum", "mean", "amax") and not isinstance(source, float) \
        and tuple(plan.shape) == tuple(source.shape) and source.shape[-1] > 1


def _epilogue(plan: Plan, shape: tuple[int, ...]) -> _Emitter:
    """The epilogue emitter; for a reduction without keepdim its leaves are seen with a trailing 1."""
    emitter = _Emitter(plan, shape, "e")
    if plan.row is not None and plan.row.kind in ("sum", "mean", "amax") and not plan.row.keepdim:
        def reduced(leaf: Leaf) -> str:
            view = broadcast_leaf(leaf, shape[:-1])
            return index_expr(Leaf(view.source, shape, view.strides + (0,), view.offset), shape)
        emitter.leaf_index = reduced  # type: ignore[method-assign]
    return emitter


# ----------------------------------------------------------------------------------------- CPU

def _cpp(plan: Plan, variant: Variant) -> str:
    head = ("#include <torch/extension.h>\n#include <ATen/Parallel.h>\n#include <cmath>\n#include <vector>\n"
            "#include <algorithm>\n" + ops.CPU_MATH)
    if plan.row is not None:
        body = _cpp_row(plan)
    else:
        body = _cpp_pointwise(plan, variant)
    return f"{head}\n\n{_run_function(plan, body, cuda=False)}"


# CPU kernels run on PyTorch's own thread pool (at::parallel_for), not a second OpenMP runtime: two pools
# of spinning threads on the same cores slow each other down. at::parallel_for with PyTorch's OpenMP backend is a header
# whose `omp parallel` exists only where _OPENMP is defined: without -fopenmp at compile time every "parallel" loop ran
# on one thread (GroupNorm's two kernels took the same time with one thread as with two). -fopenmp is a compile flag
# only: the link adds no libgomp of its own, so GOMP_parallel resolves to the runtime PyTorch ships, through
# libtorch_cpu (test_codegen.py checks both). `omp simd` needs only -fopenmp-simd.
CPU_CFLAGS = ("-O3", "-march=native", "-fopenmp", "-fopenmp-simd", "-fno-trapping-math")


def cpu_cflags(*more: str) -> str:
    """The CPU extension's extra_cflags as a Python list literal, for the generated source."""
    return "[" + ", ".join(f'"{flag}"' for flag in (*CPU_CFLAGS, *more)) + "]"


GRAIN = 32768  # elements per task: below this, splitting costs more than it saves


def _grain(columns: int) -> int:
    return max(1, GRAIN // max(1, columns))


def _cpp_pointwise(plan: Plan, variant: Variant) -> str:
    shape = plan.shape
    columns, rows = shape[-1], math.prod(shape[:-1])
    e = _Emitter(plan, shape, "v")
    result = e.value(plan.output)
    inner = "\n".join(f"            {line}" for line in e.lines)
    if variant.cpu_loop == "flat":
        return (f"    at::parallel_for(0, {rows * columns}LL, {GRAIN}, [&](int64_t begin, int64_t end) {{\n#pragma omp simd\n"
                f"    for (long long i = begin; i < end; ++i) {{\n        const long long r = i / {columns}LL, c = i % {columns}LL;\n"
                f"        (void)r; (void)c;\n{inner}\n            o[i] = {result};\n    }}\n    }});")
    return (f"    at::parallel_for(0, {rows}LL, {_grain(columns)}, [&](int64_t begin, int64_t end) {{\n"
            f"    for (long long r = begin; r < end; ++r) {{\n"
            f"#pragma omp simd\n        for (long long c = 0; c < {columns}LL; ++c) {{\n"
            f"            const long long i = r * {columns}LL + c; (void)i;\n{inner}\n            o[i] = {result};\n        }}\n    }}\n    }});")


def _cross_entropy_parts(plan: Plan) -> tuple[int, int, str, str]:
    """(rows, columns, C expression of logit (r, c), C expression of row r's target)."""
    row = plan.row
    assert row is not None and row.target is not None
    rows, columns = row.source.shape  # type: ignore[union-attr]
    pro = _Emitter(plan, (rows, columns), "x")
    assert isinstance(row.source, Leaf), "cross_entropy reads its logits directly"
    logit = f"p{plan.bases().index(row.source.source)}[{pro.leaf_index(row.source)}]"
    # The targets are one per row: in their own 1-D shape, the "column" and the flat index are both r.
    target = f"p{plan.bases().index(row.target.source)}[{_index_at(broadcast_leaf(row.target, (rows,)), (rows,), 'r', 'r')}]"
    return rows, columns, logit, target


def _cpp_cross_entropy(plan: Plan) -> str:
    row = plan.row
    assert row is not None
    rows, columns, logit, target = _cross_entropy_parts(plan)
    ignore = f"{row.ignore_index}LL"
    store = f"o[r] = t == {ignore} ? 0.0f : loss;" if row.reduction == "none" else "losses[r] = loss;"
    # Summed in row order after the parallel part, so the result does not depend on the thread count;
    # ignored rows are skipped there by their target.
    final = "" if row.reduction == "none" else (
        f"    double total = 0.0; long long count = 0;\n"
        f"    for (long long r = 0; r < {rows}LL; ++r) {{ const long long t = {target}; if (t != {ignore}) {{ total += losses[r]; count += 1; }} }}\n"
        + ("    o[0] = (float)total;" if row.reduction == "sum" else
           "    o[0] = (float)(total / (double)count);  // 0/0: NaN when every target is ignored, as in PyTorch"))
    at = "const long long i = r * C + c; (void)i;"
    return (f"    const long long C = {columns}LL;\n    std::vector<float> losses({rows});\n"
            f"    at::parallel_for(0, {rows}LL, {_grain(columns)}, [&](int64_t begin, int64_t end) {{\n"
            f"    for (long long r = begin; r < end; ++r) {{\n"
            # A NaN logit is skipped by the max but still makes its row's sum, and so its loss, NaN.
            f"        float m = -INFINITY;\n#pragma omp simd reduction(max:m)\n"
            f"        for (long long c = 0; c < C; ++c) {{ {at} m = std::max(m, {logit}); }}\n"
            f"        float s = 0.0f;\n#pragma omp simd reduction(+:s)\n"
            f"        for (long long c = 0; c < C; ++c) {{ {at} s += ks_exp({logit} - m); }}\n"
            f"        const long long t = {target};\n        float picked = 0.0f;\n"
            f"        if (t >= 0 && t < C) {{ const long long c = t; {at} picked = {logit}; }}\n"
            f"        const float loss = m + (float)std::log(s) - picked;\n        {store}\n    }}\n    }});\n{final}")


SIMD_SUM = "#pragma omp simd reduction(+:s)\n"
SIMD_Q = "#pragma omp simd reduction(+:q)\n"
SIMD_MAX = "#pragma omp simd reduction(max:m)\n"


def _cpp_row(plan: Plan) -> str:
    row = plan.row
    assert row is not None
    if row.kind == "cross_entropy":
        return _cpp_cross_entropy(plan)
    in_shape, out_shape = _row_shapes(plan)
    columns, rows = in_shape[-1], math.prod(in_shape[:-1])
    pro = _Emitter(plan, in_shape, "x")
    source = pro.value(row.source)
    load = "\n".join(f"            {line}" for line in pro.lines)
    weight = _vector(plan, row.weight, in_shape)
    bias = _vector(plan, row.bias, in_shape)
    epi = _epilogue(plan, out_shape)
    result = epi.value(plan.output)
    write = "\n".join(f"                {line}" for line in epi.lines)
    kind = row.kind
    if kind in ("sum", "mean", "amax"):
        reduce = ("float acc = 0.0f;\n#pragma omp simd reduction(+:acc)\n            for (long long c = 0; c < C; ++c) acc += buf[c];\n"
                  f"            const float y = {'acc' if kind == 'sum' else 'acc / C'};"
                  if kind != "amax" else
                  # max ignoring NaN plus a NaN flag: both vectorise, and any NaN still makes the result NaN.
                  "float acc = -INFINITY; int nan = 0;\n#pragma omp simd reduction(max:acc) reduction(|:nan)\n"
                  "            for (long long c = 0; c < C; ++c) { const float v = buf[c]; acc = std::max(acc, v); nan |= (v != v); }\n"
                  "            const float y = nan ? NAN : acc;")
        if spread_over_row(plan):
            tail = (f"            {reduce}\n            for (long long c = 0; c < C; ++c) {{\n"
                    f"                const long long i = r * C + c; (void)i;\n{write}\n                o[i] = {result};\n            }}")
        else:
            tail = (f"            {reduce}\n            {{\n                const long long c = 0, i = r; (void)c; (void)i;\n"
                    f"{write}\n                o[r] = {result};\n            }}")
    else:
        stats = {
            # Reductions carry `omp simd reduction` so they vectorise (a plain float sum must keep its order).
            "softmax": f"float m = -INFINITY;\n{SIMD_MAX}            for (long long c = 0; c < C; ++c) m = std::max(m, buf[c]);\n"
                       f"            float s = 0.0f;\n{SIMD_SUM}            for (long long c = 0; c < C; ++c) {{ buf[c] = ks_exp(buf[c] - m); s += buf[c]; }}\n"
                       "            const float inv = 1.0f / s;",
            "log_softmax": f"float m = -INFINITY;\n{SIMD_MAX}            for (long long c = 0; c < C; ++c) m = std::max(m, buf[c]);\n"
                           f"            float s = 0.0f;\n{SIMD_SUM}            for (long long c = 0; c < C; ++c) s += ks_exp(buf[c] - m);\n"
                           "            const float shift = m + std::log(s);",
            "layer_norm": f"float s = 0.0f;\n{SIMD_SUM}            for (long long c = 0; c < C; ++c) s += buf[c];\n"
                          "            const float mean = s / C; float q = 0.0f;\n"
                          f"{SIMD_Q}            for (long long c = 0; c < C; ++c) {{ const float d = buf[c] - mean; q += d * d; }}\n"
                          f"            const float rstd = 1.0f / std::sqrt(q / C + {ops.literal(row.eps)}); const float fm = mean;",
            "rms_norm": f"float q = 0.0f;\n{SIMD_Q}            for (long long c = 0; c < C; ++c) q += buf[c] * buf[c];\n"
                        f"            const float rstd = 1.0f / std::sqrt(q / C + {ops.literal(row.eps)});",
        }[kind]
        y = {"softmax": "buf[c] * inv", "log_softmax": "buf[c] - shift",
             "layer_norm": f"(buf[c] - fm) * rstd{weight}{bias}", "rms_norm": f"buf[c] * rstd{weight}"}[kind]
        tail = (f"            {stats}\n            for (long long c = 0; c < C; ++c) {{\n"
                f"                const long long i = r * C + c; (void)i;\n                const float y = {y};\n"
                f"{write}\n                o[i] = {result};\n            }}")
    return (f"    const long long C = {columns}LL;\n"
            f"    at::parallel_for(0, {rows}LL, {_grain(columns)}, [&](int64_t begin, int64_t end) {{\n"
            f"        std::vector<float> buf(C);\n        for (long long r = begin; r < end; ++r) {{\n"
            f"            for (long long c = 0; c < C; ++c) {{\n                const long long i = r * C + c; (void)i;\n"
            f"{_indent(load, 4)}\n                buf[c] = {source};\n            }}\n{tail}\n        }}\n    }});")


def _vector(plan: Plan, leaf: Leaf | None, shape: tuple[int, ...]) -> str:
    """` * p3[c]` for a norm's weight (` + p4[c]` is written by the caller's template), or nothing."""
    if leaf is None:
        return ""
    index = index_expr(broadcast_leaf(leaf, shape), shape)
    sign = " + " if leaf is plan.row.bias else " * "  # type: ignore[union-attr]
    return f"{sign}p{plan.bases().index(leaf.source)}[{index}]"


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


# ---------------------------------------------------------------------------------------- CUDA

_CUDA_HEAD = """#include <torch/extension.h>
#include <cuda_runtime.h>
#include <vector>

#define KS_LAUNCH_CHECK() do { const cudaError_t e = cudaGetLastError(); \\
    TORCH_CHECK(e == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(e)); } while (0)

// Block-wide reductions: warp shuffles, then one value per warp through shared memory.
__device__ __forceinline__ float warp_sum(float v) {
    for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int s = 16; s > 0; s >>= 1) { const float o = __shfl_xor_sync(0xffffffffu, v, s); v = (o != o || o > v) ? o : v; }
    return v;
}
// Max propagates NaN like torch.amax; the identity is 0 for sums and -inf for maxima.
template <bool Max>
__device__ float block_reduce(float v, float* red) {
    v = Max ? warp_max(v) : warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    __syncthreads();  // every thread has read red[0] of the previous reduction
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = threadIdx.x < warps ? red[threadIdx.x] : (Max ? -INFINITY : 0.0f);
    if (warp == 0) v = Max ? warp_max(v) : warp_sum(v);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    return red[0];
}
__device__ __forceinline__ float block_sum(float v, float* red) { return block_reduce<false>(v, red); }
__device__ __forceinline__ float block_max(float v, float* red) { return block_reduce<true>(v, red); }
"""


def cuda_head() -> str:
    """What every CUDA source of these templates starts with (the includes and the shared device functions)."""
    return f"{_CUDA_HEAD}{ops.CUDA_MATH}\n"


def _cuda(plan: Plan, variant: Variant) -> str:
    body = _cuda_row(plan, variant) if plan.row is not None else _cuda_pointwise(plan, variant)
    return f"{cuda_head()}{body}".replace(
        "torch::Tensor run(std::vector<torch::Tensor> ts) {", "torch::Tensor run(std::vector<torch::Tensor> ts, int64_t stream) {")


_MAX_GRID = 2**31 - 1  # gridDim.x's limit


def _narrow(n: int) -> bool:
    """Every flat index of an n-element output fits in a 32-bit unsigned (index_expr's `narrow`)."""
    return n < 2**32


def _row_and_column(flat: str, columns: int, n: int, r: str = "r", c: str = "c") -> str:
    """The statement naming flat index `flat`'s row and column (32-bit where every index fits)."""
    if _narrow(n):
        return f"const unsigned {r} = (unsigned)({flat}) / {columns}u, {c} = (unsigned)({flat}) - {r} * {columns}u;"
    return f"const long long {r} = {flat} / {columns}LL, {c} = {flat} - {r} * {columns}LL;"


def _cuda_pointwise(plan: Plan, variant: Variant) -> str:
    shape = plan.shape
    columns, n = shape[-1], math.prod(shape)
    e = _Emitter(plan, shape, "v")
    e.leaf_index = lambda leaf: index_expr(broadcast_leaf(leaf, shape), shape, _narrow(n))  # type: ignore[method-assign]
    result = e.value(plan.output)
    scalar_body = "\n".join(f"        {line}" for line in e.lines)
    kernels = [f"__global__ void pointwise(const {_params(plan)[6:]}) {{\n"
               f"    const long long stride = (long long)gridDim.x * blockDim.x;\n"
               f"    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < {n}LL; i += stride) {{\n"
               f"        {_row_and_column('i', columns, n)} (void)r; (void)c;\n"
               f"{scalar_body}\n        o[i] = {result};\n    }}\n}}"]
    launch = (f"    const int threads = {variant.block};\n"
              f"    auto cu_stream = reinterpret_cast<cudaStream_t>(stream);\n")
    # One element (or one float4) per thread and as many blocks as that takes, not a grid-stride loop over 16 blocks
    # per SM: on the H100 at KernelBench's 4096 x 393216 the capped grid ran ReLU at 2.73 TB/s against eager's 3.01,
    # the full grid at 2.98 (benchmarks/probes/pointwise_roof_probe.py, docs/benchmarks.md §14). The loop stays for
    # grids past gridDim.x's limit.
    scalar_launch = (f"pointwise<<<(int)std::min<long long>(({n}LL + threads - 1) / threads, {_MAX_GRID}LL), "
                     f"threads, 0, cu_stream>>>({_pointers(plan)});")
    if variant.vec == 4 and n % 4 == 0:
        kernels.append(_cuda_vec4(plan, flat=columns % 4 != 0))
        launch += (f"    if ((({_addresses(plan)} | reinterpret_cast<uintptr_t>(o)) % 16) == 0) {{\n"
                   f"        pointwise4<<<(int)std::min<long long>(({n // 4}LL + threads - 1) / threads, "
                   f"{_MAX_GRID}LL), threads, 0, cu_stream>>>({_pointers(plan)});\n"
                   f"    }} else {{\n        {scalar_launch}\n    }}\n")
    else:
        launch += f"    {scalar_launch}\n"
    launch += "    KS_LAUNCH_CHECK();"
    return "\n\n".join([*kernels, _run_function(plan, launch)])


def _vec4_kernel(plan: Plan, body: str) -> str:
    """The float4 kernel around `body`, which fills out4 from group q (elements 4q .. 4q + 3)."""
    n = math.prod(plan.shape)
    return (f"__global__ void pointwise4(const {_params(plan)[6:]}) {{\n"
            f"    const long long stride = (long long)gridDim.x * blockDim.x;\n"
            f"    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < {n // 4}LL; q += stride) {{\n"
            f"        float4 out4;\n{body}\n        *reinterpret_cast<float4*>(&o[q * 4]) = out4;\n    }}\n}}")


def _cuda_vec4(plan: Plan, flat: bool = False) -> str:
    """Four consecutive elements per thread. Rows a multiple of four long: the four share one row, so operands read
    along the row with stride 1 and 16-byte-aligned rows are one float4 load and operands constant along the row one
    load. Otherwise (`flat`: a convolution's 126 x 126 maps) the four may straddle rows: operands laid out exactly as
    the output (contiguous, 16-byte-aligned offset) are one float4 load, every other operand is read per element at
    that element's own row and column. Only float32 operands are loaded as float4; the base pointers' alignment is
    checked at launch."""
    shape = plan.shape
    columns, n = shape[-1], math.prod(shape)
    narrow = _narrow(n)
    lines = ["        const long long i0 = q * 4;" +
             ("" if flat else f" {_row_and_column('i0', columns, n, 'r', 'c0')} (void)r;")]
    vec_loads: dict[Leaf, str] = {}
    for k, leaf in enumerate(plan.leaves()):
        view = broadcast_leaf(leaf, shape)
        if flat:
            fits = view.strides == contiguous(shape) and view.offset % 4 == 0
        else:
            fits = view.strides[-1] == 1 and view.offset % 4 == 0 and all(s % 4 == 0 for s in view.strides[:-1])
        if fits and plan.base_dtype(leaf.source) == "float32":
            index = f"{view.offset}LL + i0" if flat else _index_at(view, shape, "c0", "i0", narrow=narrow)
            lines.append(f"        const float4 w{k} = *reinterpret_cast<const float4*>(&p{plan.bases().index(leaf.source)}[{index}]);")
            vec_loads[leaf] = f"w{k}"
    for j, comp in enumerate("xyzw"):
        e = _Emitter(plan, shape, f"v{j}_")
        for leaf, name in vec_loads.items():
            e.names[leaf] = f"{name}.{comp}"
        r, c = (f"r{j}", f"c{j}") if flat else ("r", f"(c0 + {j})")
        e.leaf_index = lambda leaf, r=r, c=c, j=j: _index_at(  # type: ignore[method-assign]
            broadcast_leaf(leaf, shape), shape, c, f"(i0 + {j})", r, narrow=narrow)
        value = e.value(plan.output)
        body = ([_row_and_column(f"i0 + {j}", columns, n, r, c) + f" (void){r}; (void){c};"] if flat else []) + e.lines
        lines.append("        {\n" + "\n".join(f"            {line}" for line in body) + f"\n            out4.{comp} = {value};\n        }}")
    return _vec4_kernel(plan, "\n".join(lines))


def _index_at(view: Leaf, shape: tuple[int, ...], c: str, i: str, r: str = "r", narrow: bool = False) -> str:
    """index_expr with the row, column and flat index given as expressions."""
    text = index_expr(view, shape, narrow)
    # index_expr names only r, c and i; rename them as whole words, all at once.
    return re.sub(r"\b[rci]\b", lambda m: {"r": r, "c": c, "i": i}[m.group(0)], text)


def _cuda_cross_entropy(plan: Plan, variant: Variant) -> str:
    """One block per row writes the row's loss (0 for an ignored target); for a reduced loss, one block
    then adds them in a fixed tree order (float atomics would make the sum differ from run to run)."""
    rows, columns, logit, _ = _cross_entropy_parts(plan)
    per_row = (f"__global__ void ce_rows(const {_params(plan)[6:]}) {{\n    __shared__ float red[32];\n"
               f"    const long long r = blockIdx.x, C = {columns}LL;\n    float m = -INFINITY;\n"
               f"    for (long long c = threadIdx.x; c < C; c += blockDim.x) {{ const long long i = r * C + c; (void)i; "
               f"const float v = {logit}; m = (v != v || v > m) ? v : m; }}\n    m = block_max(m, red);\n    float s = 0.0f;\n"
               f"    for (long long c = threadIdx.x; c < C; c += blockDim.x) {{ const long long i = r * C + c; (void)i; "
               f"s += expf({logit} - m); }}\n    s = block_sum(s, red);\n{_ce_row_loss(plan)}}}")
    stream = "reinterpret_cast<cudaStream_t>(stream)"
    extra, launch = _row_launch(plan, lambda pointers: f"    ce_rows<<<{rows}, {variant.block}, 0, {stream}>>>({pointers});\n")
    return "\n\n".join([per_row, *extra, _run_function(plan, launch)])


def _ce_row_loss(plan: Plan) -> str:
    """Thread 0 writes the row's loss from its max m and sum s of exp(x - m): 0 for an ignored target."""
    row = plan.row
    assert row is not None
    _, _, logit, target = _cross_entropy_parts(plan)
    return (f"    if (threadIdx.x == 0) {{\n        const long long t = {target};\n        float picked = 0.0f;\n"
            f"        if (t >= 0 && t < C) {{ const long long c = t, i = r * C + c; (void)i; picked = {logit}; }}\n"
            f"        o[r] = t == {row.ignore_index}LL ? 0.0f : m + logf(s) - picked;\n    }}\n")


def _row_launch(plan: Plan, launch_rows: Callable[[str], str]) -> tuple[list[str], str]:
    """The launch of a row kernel (`launch_rows` of its pointer arguments) and the kernels it needs besides:
    a reduced cross-entropy's rows write their losses into a temporary, which ce_total then adds up."""
    row = plan.row
    assert row is not None
    if row.kind != "cross_entropy" or row.reduction == "none":
        return [], launch_rows(_pointers(plan)) + "    KS_LAUNCH_CHECK();"
    assert row.target is not None
    rows = _cross_entropy_parts(plan)[0]
    k = plan.bases().index(row.target.source)
    stream = "reinterpret_cast<cudaStream_t>(stream)"
    return [_ce_total(plan)], (f"    auto losses = torch::empty({{{rows}}}, out.options());\n"
                               + launch_rows(_pointers(plan).replace(", o", ", losses.data_ptr<float>()"))
                               + f"    KS_LAUNCH_CHECK();\n    ce_total<<<1, 1024, 0, {stream}>>>(losses.data_ptr<float>(), p{k}, o);\n"
                               "    KS_LAUNCH_CHECK();")


def _ce_total(plan: Plan) -> str:
    """The reduced loss from the per-row losses, in a fixed tree order (float atomics would make the sum
    differ from run to run); ignored rows are skipped by their target."""
    row = plan.row
    assert row is not None and row.target is not None
    rows, _, _, target = _cross_entropy_parts(plan)
    k = plan.bases().index(row.target.source)
    return (f"__global__ void ce_total(const float* __restrict__ losses, const int64_t* __restrict__ p{k}, "
            f"float* __restrict__ o) {{\n    __shared__ float red[32];\n    float s = 0.0f, n = 0.0f;\n"
            f"    for (long long r = threadIdx.x; r < {rows}LL; r += blockDim.x) {{\n"
            f"        if ({target} != {row.ignore_index}LL) {{ s += losses[r]; n += 1.0f; }}\n    }}\n"
            f"    s = block_sum(s, red);\n    n = block_sum(n, red);\n"
            f"    if (threadIdx.x == 0) o[0] = {'s / n' if row.reduction == 'mean' else 's'};\n}}")


def _cuda_row(plan: Plan, variant: Variant) -> str:
    row = plan.row
    assert row is not None
    if variant.registers:
        return _cuda_row_regs(plan, variant)
    if variant.vec == 4:
        return _cuda_row_stream(plan, variant)
    if row.kind == "cross_entropy":
        return _cuda_cross_entropy(plan, variant)
    in_shape, out_shape = _row_shapes(plan)
    columns, rows = in_shape[-1], math.prod(in_shape[:-1])
    kind = row.kind
    pro = _Emitter(plan, in_shape, "x")
    source = pro.value(row.source)
    load = "\n".join(f"        {line}" for line in pro.lines)
    loop = f"for (long long c = threadIdx.x; c < C; c += blockDim.x) {{\n        const long long i = r * C + c; (void)i;\n{load}\n"

    # A row that fits in shared memory is read from global memory once: the first pass keeps each
    # thread's values there and the later passes (the second statistic, the write) read them back. Each
    # thread reads only the columns it wrote, so no barrier is needed between passes. Without it, softmax
    # and the norms move their input three times.
    cached = kind not in ("sum", "mean", "amax") and columns * 4 <= _ROW_CACHE_BYTES  # one-pass kinds need none

    def pass_(body: str, first: bool = False) -> str:
        if cached and not first:
            return (f"    for (long long c = threadIdx.x; c < C; c += blockDim.x) {{\n"
                    f"        const long long i = r * C + c; (void)i;\n        const float xv = rowbuf[c];\n"
                    f"        {body}\n    }}\n")
        keep = "        rowbuf[c] = xv;\n" if cached else ""
        # Four iterations' loads in flight per thread: one row per block leaves at most 2048 threads on an SM, too few
        # single loads to keep the memory busy (KernelBench's 23_Softmax ran at 36% of the roof without).
        return f"    #pragma unroll 4\n    {loop}        const float xv = {source};\n{keep}        {body}\n    }}\n"

    weight, bias = _vector(plan, row.weight, in_shape), _vector(plan, row.bias, in_shape)
    epi = _epilogue(plan, out_shape)
    result = epi.value(plan.output)
    write = "\n".join(f"        {line}" for line in epi.lines)
    if kind in ("sum", "mean", "amax"):
        if kind == "amax":
            body = pass_("acc = (xv != xv || xv > acc) ? xv : acc;", first=True) + "    const float y = block_max(acc, red);\n"
            init = "float acc = -INFINITY;"
        else:
            body = pass_("acc += xv;", first=True) + f"    const float y = block_sum(acc, red){' / (float)C' if kind == 'mean' else ''};\n"
            init = "float acc = 0.0f;"
        if spread_over_row(plan):  # a second pass writes every element of the row
            tail = (f"    {loop}{write}\n        o[i] = {result};\n    }}\n")
        else:
            tail = (f"    if (threadIdx.x == 0) {{\n        const long long c = 0, i = r; (void)c; (void)i;\n{write}\n"
                    f"        o[r] = {result};\n    }}")
        main = f"    {init}\n{body}{tail}"
    else:
        # A row read from global memory (too long for shared memory) gets its max and sum of exponentials in one pass
        # (the online softmax: the running sum is rescaled when the max grows), then the write: two reads of the row
        # instead of three. -inf elements add nothing (a masked row's first -inf must not make the sum NaN); NaN
        # propagates as torch's does; a row of -inf only is NaN, as torch's is.
        online = ("float m = -INFINITY, s = 0.0f;\n"
                  + pass_("if (xv != xv || xv > m) { s = s * expf(m - xv) + 1.0f; m = xv; } "
                          "else if (xv != -INFINITY) { s += expf(xv - m); }", first=True)
                  + "    const float row_max = block_max(m, red);\n"
                    "    const float row_sum = block_sum(m == -INFINITY ? 0.0f : s * expf(m - row_max), red);\n"
                    "    m = row_max;\n")
        stats = {
            "softmax": online + "    const float inv = 1.0f / row_sum;\n" if not cached else
                       "float m = -INFINITY;\n" + pass_("m = (xv != xv || xv > m) ? xv : m;", first=True) + "    m = block_max(m, red);\n"
                       "    float s = 0.0f;\n" + pass_("s += expf(xv - m);") + "    const float inv = 1.0f / block_sum(s, red);\n",
            "log_softmax": online + "    const float shift = m + logf(row_sum);\n" if not cached else
                           "float m = -INFINITY;\n" + pass_("m = (xv != xv || xv > m) ? xv : m;", first=True) + "    m = block_max(m, red);\n"
                           "    float s = 0.0f;\n" + pass_("s += expf(xv - m);") + "    const float shift = m + logf(block_sum(s, red));\n",
            "layer_norm": "float s = 0.0f;\n" + pass_("s += xv;", first=True) + "    const float mean = block_sum(s, red) / (float)C;\n"
                          "    float q = 0.0f;\n" + pass_("const float d = xv - mean; q += d * d;") +
                          f"    const float rstd = rsqrtf(block_sum(q, red) / (float)C + {ops.literal(row.eps)});\n",
            "rms_norm": "float q = 0.0f;\n" + pass_("q += xv * xv;", first=True) +
                        f"    const float rstd = rsqrtf(block_sum(q, red) / (float)C + {ops.literal(row.eps)});\n",
        }[kind]
        y = {"softmax": "expf(xv - m) * inv", "log_softmax": "xv - shift",
             "layer_norm": f"(xv - mean) * rstd{weight}{bias}", "rms_norm": f"xv * rstd{weight}"}[kind]
        main = "    " + stats + pass_(f"const float y = {y};\n{write}\n        o[i] = {result};")
    cache = f"    __shared__ float rowbuf[{columns}];\n" if cached else ""
    kernel = (f"__global__ void row_kernel(const {_params(plan)[6:]}) {{\n    __shared__ float red[32];\n{cache}"
              f"    const long long r = blockIdx.x;\n    const long long C = {columns}LL;\n{main}}}")
    launch = (f"    row_kernel<<<{rows}, {variant.block}, 0, reinterpret_cast<cudaStream_t>(stream)>>>({_pointers(plan)});\n"
              "    KS_LAUNCH_CHECK();")
    return f"{kernel}\n\n{_run_function(plan, launch)}"


# ------------------------------------------------------------------------ CUDA rows in registers

# A thread keeps at most this many values of its row in registers (more with fewer threads per block,
# since __launch_bounds__ then leaves more registers to each thread).
def _register_budget(block: int) -> int:
    return 32 if block >= 1024 else 64


def register_fit(columns: int, block: int, vec: int) -> bool:
    """Whether a row of `columns` splits evenly over `block` threads of `vec`-wide groups, within the
    register budget: then every thread holds its part of the row and no element needs a bounds check."""
    return (block % 32 == 0 and columns % (block * vec) == 0
            and columns // block <= _register_budget(block))


def _vector_loads(plan: Plan, leaves: list[Leaf], shape: tuple[int, ...], lines: list[str], vec: int) -> dict[Leaf, str]:
    """float4 loads at columns c0..c0+3 (when vec is 4) for the leaves read along the row with stride 1
    from 16-byte aligned positions; the others are read element by element."""
    names: dict[Leaf, str] = {}
    if vec != 4:
        return names
    for leaf in leaves:
        view = broadcast_leaf(leaf, shape)
        if view.strides[-1] == 1 and view.offset % 4 == 0 and all(s % 4 == 0 for s in view.strides[:-1]):
            name = f"w{len(names)}"
            lines.append(f"const float4 {name} = *reinterpret_cast<const float4*>("
                         f"&p{plan.bases().index(leaf.source)}[{_index_at(view, shape, 'c0', 'i0')}]);")
            names[leaf] = name
    return names


def _element(plan: Plan, value: Any, shape: tuple[int, ...], prefix: str, j: int, vec: int,
             loaded: dict[Leaf, str], row_value: str = "y") -> tuple[list[str], str]:
    """Statements and the C value of `value` at element j of the group starting at column c0."""
    e = _Emitter(plan, shape, prefix, row_value)
    for leaf, name in loaded.items():
        e.names[leaf] = f"{name}.{'xyzw'[j]}" if vec == 4 else name
    c, i = (f"(c0 + {j})", f"(i0 + {j})") if j else ("c0", "i0")
    e.leaf_index = lambda leaf: _index_at(broadcast_leaf(leaf, shape), shape, c, i)  # type: ignore[method-assign]
    result = e.value(value)
    return e.lines, result


def _group_loop(body: list[str]) -> str:
    """A loop over this thread's groups of the row, unrolled so every register index is a constant."""
    inner = "\n".join(f"        {line}" for line in body)
    return ("    #pragma unroll\n    for (int k = 0; k < ITEMS; ++k) {\n"
            "        const long long c0 = ((long long)k * BLOCK + threadIdx.x) * VEC, i0 = r * C + c0; (void)i0;\n"
            f"{inner}\n    }}\n")


def _row_regs_kernel(plan: Plan, name: str, block: int, vec: int) -> str:
    """One block per row; each thread loads its ITEMS groups of VEC columns once into registers, and
    every statistic and the write work from there: the row moves through memory once in and once out."""
    row = plan.row
    assert row is not None
    in_shape, out_shape = _row_shapes(plan)
    columns = in_shape[-1]
    kind = row.kind
    source = row.source
    load: list[str] = []
    loaded = _vector_loads(plan, leaves_of(source), in_shape, load, vec)
    for j in range(vec):
        lines, value = _element(plan, source, in_shape, f"x{j}_", j, vec, loaded)
        load += lines + [f"xs[k * VEC + {j}] = {value};"]

    def over(statement: str) -> str:
        return f"    #pragma unroll\n    for (int e = 0; e < ITEMS * VEC; ++e) {{ const float xv = xs[e]; {statement} }}\n"

    maxed = "float m = -INFINITY;\n" + over("m = (xv != xv || xv > m) ? xv : m;") + "    m = block_max(m, red);\n"
    stats = {
        "sum": "float acc = 0.0f;\n" + over("acc += xv;") + "    const float y = block_sum(acc, red);\n",
        "mean": "float acc = 0.0f;\n" + over("acc += xv;") + "    const float y = block_sum(acc, red) / (float)C;\n",
        "amax": "float acc = -INFINITY;\n" + over("acc = (xv != xv || xv > acc) ? xv : acc;")
                + "    const float y = block_max(acc, red);\n",
        # exp(x - m) is kept in place of x: the write multiplies it by 1/sum.
        "softmax": maxed + "    float s = 0.0f;\n" + over("xs[e] = expf(xv - m); s += xs[e];")
                   + "    const float inv = 1.0f / block_sum(s, red);\n",
        "log_softmax": maxed + "    float s = 0.0f;\n" + over("s += expf(xv - m);")
                       + "    const float shift = m + logf(block_sum(s, red));\n",
        "cross_entropy": maxed + "    float s = 0.0f;\n" + over("s += expf(xv - m);") + "    s = block_sum(s, red);\n",
        "layer_norm": "float s = 0.0f;\n" + over("s += xv;") + "    const float mean = block_sum(s, red) / (float)C;\n"
                      "    float q = 0.0f;\n" + over("const float d = xv - mean; q += d * d;")
                      + f"    const float rstd = rsqrtf(block_sum(q, red) / (float)C + {ops.literal(row.eps)});\n",
        "rms_norm": "float q = 0.0f;\n" + over("q += xv * xv;")
                    + f"    const float rstd = rsqrtf(block_sum(q, red) / (float)C + {ops.literal(row.eps)});\n",
    }[kind]
    if kind in ("sum", "mean", "amax"):
        epi = _epilogue(plan, out_shape)
        result = epi.value(plan.output)
        lines = "\n".join(f"        {line}" for line in epi.lines)
        tail = (f"    if (threadIdx.x == 0) {{\n        const long long c = 0, i = r; (void)c; (void)i;\n{lines}\n"
                f"        o[r] = {result};\n    }}\n")
    elif kind == "cross_entropy":
        tail = _ce_row_loss(plan)
    else:
        write = _row_write(plan, in_shape, vec, lambda j: f"xs[k * VEC + {j}]",
                           {"softmax": "{x} * inv", "log_softmax": "{x} - shift", "layer_norm": "({x} - mean) * rstd",
                            "rms_norm": "{x} * rstd"}[kind])
        tail = _group_loop(write)
    return (f"namespace {name} {{\nconstexpr int BLOCK = {block}, VEC = {vec}, ITEMS = {columns // (block * vec)};\n"
            f"constexpr long long C = {columns}LL;\n"
            f"__global__ void __launch_bounds__(BLOCK) kernel(const {_params(plan)[6:]}) {{\n"
            f"    __shared__ float red[32];\n    const long long r = blockIdx.x;\n    float xs[ITEMS * VEC];\n"
            f"{_group_loop(load)}    {stats}{tail}}}\n}}  // namespace {name}")


def _row_write(plan: Plan, in_shape: tuple[int, ...], vec: int, x_of: Callable[[int], str], y: str) -> list[str]:
    """Statements writing a group of `vec` columns at c0: the row value y (its C form, of the element's input x),
    times the weight and plus the bias where the row has them, through the epilogue, into o (float4 where vec is 4)."""
    row = plan.row
    assert row is not None
    weight = [leaf for leaf in (row.weight, row.bias) if leaf is not None]
    write: list[str] = []
    loaded = _vector_loads(plan, weight + [x for x in leaves_of(plan.output) if x not in weight], in_shape, write, vec)
    outs = []
    for j in range(vec):
        value_y = y.format(x=x_of(j))
        for leaf, sign, prefix in ((row.weight, " * ", f"w{j}_"), (row.bias, " + ", f"b{j}_")):
            if leaf is not None:
                lines, term = _element(plan, leaf, in_shape, prefix, j, vec, loaded)
                write += lines
                value_y += f"{sign}{term}"
        lines, value = _element(plan, plan.output, in_shape, f"e{j}_", j, vec, loaded, row_value=f"y{j}")
        write += [f"const float y{j} = {value_y};"] + lines
        outs.append(value)
    if vec == 4:
        write.append(f"*reinterpret_cast<float4*>(&o[i0]) = make_float4({', '.join(outs)});")
    else:
        write.append(f"o[i0] = {outs[0]};")
    return write


# Row kinds the grouped streaming template writes (a statistic of the row, then every element of it).
STREAMED_GROUP_KINDS = ("softmax", "log_softmax", "layer_norm", "rms_norm")


def _row_stream_kernel(plan: Plan, name: str, block: int, vec: int) -> str:
    """One block per row, for rows too long to keep on chip: each pass over the row takes groups of `vec` columns
    (float4 loads and stores where vec is 4), several groups' loads in flight per thread: the scalar streaming
    template's single loads left the memory idle (KernelBench's 23_Softmax at 46% of its roof, 0.77x of
    torch.compile on the H100). softmax and log_softmax get max and sum in one online pass, then the write: two
    reads of the row and one write."""
    row = plan.row
    assert row is not None and row.kind in STREAMED_GROUP_KINDS
    in_shape, _ = _row_shapes(plan)
    load: list[str] = []
    loaded = _vector_loads(plan, leaves_of(row.source), in_shape, load, vec)
    for j in range(vec):
        lines, value = _element(plan, row.source, in_shape, f"x{j}_", j, vec, loaded)
        load += lines + [f"const float xv{j} = {value};"]

    def over(statement: str, then: list[str] | None = None) -> str:
        body = load + (then if then is not None else ["{ const float xv = xv%d; %s }" % (j, statement) for j in range(vec)])
        inner = "\n".join(f"        {line}" for line in body)
        return (f"    #pragma unroll {max(2, 8 // vec)}\n    for (long long g = threadIdx.x; g < C / VEC; g += BLOCK) {{\n"
                f"        const long long c0 = g * VEC, i0 = r * C + c0; (void)i0;\n{inner}\n    }}\n")

    online = ("float m = -INFINITY, s = 0.0f;\n"
              + over("if (xv != xv || xv > m) { s = s * expf(m - xv) + 1.0f; m = xv; } "
                     "else if (xv != -INFINITY) { s += expf(xv - m); }")
              + "    const float row_max = block_max(m, red);\n"
                "    const float row_sum = block_sum(m == -INFINITY ? 0.0f : s * expf(m - row_max), red);\n"
                "    m = row_max;\n")
    stats = {
        "softmax": online + "    const float inv = 1.0f / row_sum;\n",
        "log_softmax": online + "    const float shift = m + logf(row_sum);\n",
        "layer_norm": "float s = 0.0f;\n" + over("s += xv;") + "    const float mean = block_sum(s, red) / (float)C;\n"
                      "    float q = 0.0f;\n" + over("const float d = xv - mean; q += d * d;")
                      + f"    const float rstd = rsqrtf(block_sum(q, red) / (float)C + {ops.literal(row.eps)});\n",
        "rms_norm": "float q = 0.0f;\n" + over("q += xv * xv;")
                    + f"    const float rstd = rsqrtf(block_sum(q, red) / (float)C + {ops.literal(row.eps)});\n",
    }[row.kind]
    write = _row_write(plan, in_shape, vec, lambda j: f"xv{j}",
                       {"softmax": "expf({x} - m) * inv", "log_softmax": "{x} - shift",
                        "layer_norm": "({x} - mean) * rstd", "rms_norm": "{x} * rstd"}[row.kind])
    tail = over("", write)
    return (f"namespace {name} {{\nconstexpr int BLOCK = {block}, VEC = {vec};\nconstexpr long long C = {in_shape[-1]}LL;\n"
            f"__global__ void __launch_bounds__(BLOCK) kernel(const {_params(plan)[6:]}) {{\n"
            f"    __shared__ float red[32];\n    const long long r = blockIdx.x;\n    {stats}{tail}}}\n}}  // namespace {name}")


def _cuda_row_stream(plan: Plan, variant: Variant) -> str:
    """The grouped streaming template, float4 where every tensor is 16-byte aligned, else a column at a time."""
    in_shape, _ = _row_shapes(plan)
    rows = math.prod(in_shape[:-1])
    stream = "reinterpret_cast<cudaStream_t>(stream)"
    kernels = [_row_stream_kernel(plan, "stream4", variant.block, 4), _row_stream_kernel(plan, "stream1", variant.block, 1)]

    def launch_rows(pointers: str) -> str:
        return (f"    if ((({_addresses(plan)}) % 16) == 0) {{\n"
                f"        stream4::kernel<<<{rows}, stream4::BLOCK, 0, {stream}>>>({pointers});\n    }} else {{\n"
                f"        stream1::kernel<<<{rows}, stream1::BLOCK, 0, {stream}>>>({pointers});\n    }}\n")
    extra, launch = _row_launch(plan, launch_rows)
    return "\n\n".join([*kernels, *extra, _run_function(plan, launch)])


def _cuda_row_regs(plan: Plan, variant: Variant) -> str:
    in_shape, _ = _row_shapes(plan)
    rows = math.prod(in_shape[:-1])
    stream = "reinterpret_cast<cudaStream_t>(stream)"
    scalar = _row_regs_kernel(plan, "regs1", variant.block, 1)
    if variant.vec == 4:
        # float4 needs 16-byte aligned tensors; a misaligned one (a view into a larger tensor) takes the
        # same template one column per access, each thread then holding 4x as many groups.
        kernels = [_row_regs_kernel(plan, "regs4", variant.block, 4), scalar]

        def launch_rows(pointers: str) -> str:
            return (f"    if ((({_addresses(plan)}) % 16) == 0) {{\n"
                    f"        regs4::kernel<<<{rows}, regs4::BLOCK, 0, {stream}>>>({pointers});\n    }} else {{\n"
                    f"        regs1::kernel<<<{rows}, regs1::BLOCK, 0, {stream}>>>({pointers});\n    }}\n")
    else:
        kernels = [scalar]

        def launch_rows(pointers: str) -> str:
            return f"    regs1::kernel<<<{rows}, regs1::BLOCK, 0, {stream}>>>({pointers});\n"
    extra, launch = _row_launch(plan, launch_rows)
    return "\n\n".join([*kernels, *extra, _run_function(plan, launch)])


def _addresses(plan: Plan) -> str:
    """The kernel's input addresses OR-ed together: their alignment is the worst of them."""
    return " | ".join(f"reinterpret_cast<uintptr_t>(p{k})" for k in range(len(plan.bases())))


def _run_function(plan: Plan, launch: str, cuda: bool = True) -> str:
    """The extension's entry point: check and unpack the tensors, run the launch (or loop), return out."""
    return f"torch::Tensor run(std::vector<torch::Tensor> ts) {{\n    {_checks(plan, cuda)}\n{launch}\n    return out;\n}}"
