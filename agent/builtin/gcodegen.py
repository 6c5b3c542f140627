"""Candidate modules from a whole-graph plan (graph.py): one generated kernel per Kernel step, the
library anchors left to PyTorch, and a forward that runs the steps in order.

Every kernel evaluates its (fused) input expression at coordinates: a view's element is
offset + sum(coordinate_d * stride_d) of its base tensor, so broadcasting, slices, transposes, flips and
reshapes that keep a layout cost index arithmetic, never a copy (cexpr.py writes those expressions). Values are
computed in float32 whatever the tensors' dtypes (float16/bfloat16 loads widen, stores round), as PyTorch's own
kernels do.

The same kernel bodies compile as CUDA (a block per output for reductions over the innermost
dimension, several blocks per output where the outputs are too few to fill the GPU, a thread per output
otherwise; a block per line for scans along long innermost lines) and as C++ on PyTorch's thread pool for the CPU.
On CUDA the first two variants also read (and pointwise kernels write) four floats at a time where the operands
allow it (vectorize.py), and a plan with 2D/3D convolutions tries them channels-last (layout.py).
"""
from __future__ import annotations

import hashlib
import math
from typing import Any, Callable, NamedTuple

from agent.builtin import ops
from agent.builtin.cexpr import Eval, decompose, offset_expr, trailing_offset_expr
from agent.builtin.codegen import MODULE, Variant, cpu_cflags, state_init, tensor_expr
from agent.builtin.graph import REMAPPING, GraphPlan, Kernel, Library, is_data
from agent.builtin.layout import (CPP_FORMATS, TILE, TILE_ROWS, TO_CHANNELS_LAST, TO_CHANNELS_LAST_CUDA, channels_last,
                                  layout_convolutions, memory_format, tiled_reads)
from agent.builtin.lower import Expr, Leaf, contiguous
from agent.builtin.vectorize import WIDTH, direct_leaves, flat_vector_reads, pointwise_vector_reads, vector_reads

_CUDA_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16", "float64": "double",
               "int64": "long long", "int32": "int", "int16": "short", "int8": "signed char", "uint8": "unsigned char",
               "bool": "bool"}
_CPU_TYPES = {**_CUDA_TYPES, "float16": "at::Half", "bfloat16": "at::BFloat16"}
_SCALAR_TYPES = {"float32": "torch::kFloat32", "float16": "torch::kFloat16", "bfloat16": "torch::kBFloat16",
                 "float64": "torch::kFloat64", "int64": "torch::kInt64", "int32": "torch::kInt32",
                 "int16": "torch::kInt16", "int8": "torch::kInt8", "uint8": "torch::kUInt8", "bool": "torch::kBool"}
_TORCH_DTYPES = {k: f"torch.{k}" for k in _SCALAR_TYPES}

# NaN-propagating max/min and (value, index) merging, for both devices (KS_FN is defined by each head).
_PICK = r"""
// Branch-free: a + b is NaN where either is (a max over a column of 128 x 4095 outputs took 1.6x torch.compile's time
// with the two early returns of the first version on the H200).
KS_FN float ks_pick(float a, float b, bool is_max) {
    return (a != a || b != b) ? a + b : (is_max ? fmaxf(a, b) : fminf(a, b));
}
// (value, index) pairs: NaN wins (PyTorch's argmax/argmin), then the better value, then the lower index.
KS_FN void ks_arg_merge(float& v, long long& i, float v2, long long i2, bool is_max) {
    const bool n1 = v != v, n2 = v2 != v2;
    bool take;
    if (n1 || n2) take = n2 && (!n1 || i2 < i);
    else take = (is_max ? v2 > v : v2 < v) || (v2 == v && i2 < i);
    if (take) { v = v2; i = i2; }
}
"""

CUDA_HEAD = r"""#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector>
#define KS_FN __device__ __forceinline__
#define KS_LAUNCH_CHECK() do { const cudaError_t e = cudaGetLastError(); \
    TORCH_CHECK(e == cudaSuccess, "kernel launch failed: ", cudaGetErrorString(e)); } while (0)
KS_FN float ks_ld(float x) { return x; }
KS_FN float ks_ld(double x) { return (float)x; }
KS_FN float ks_ld(__half x) { return __half2float(x); }
KS_FN float ks_ld(__nv_bfloat16 x) { return __bfloat162float(x); }
KS_FN float ks_ld(long long x) { return (float)x; }
KS_FN float ks_ld(int x) { return (float)x; }
KS_FN float ks_ld(short x) { return (float)x; }
KS_FN float ks_ld(signed char x) { return (float)x; }
KS_FN float ks_ld(unsigned char x) { return (float)x; }
KS_FN float ks_ld(bool x) { return x ? 1.0f : 0.0f; }
KS_FN void ks_st(float* p, long long i, float v) { p[i] = v; }
KS_FN void ks_st(double* p, long long i, float v) { p[i] = v; }
KS_FN void ks_st(__half* p, long long i, float v) { p[i] = __float2half(v); }
KS_FN void ks_st(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16(v); }
template <class T> KS_FN void ks_st(T* p, long long i, float v) { p[i] = (T)v; }
KS_FN void ks_st(bool* p, long long i, float v) { p[i] = v != 0.0f; }
template <class T> KS_FN void ks_sti(T* p, long long i, long long v) { p[i] = (T)v; }
// A value converted to a narrow float type and back: what PyTorch holds after the conversion.
KS_FN float ks_round_float16(float x) { return __half2float(__float2half(x)); }
KS_FN float ks_round_bfloat16(float x) { return __bfloat162float(__float2bfloat16(x)); }
""" + ops.CUDA_MATH + _PICK + r"""
// Block-wide reductions: warp shuffles, then one value per warp through shared memory. Safe to call
// repeatedly (the barrier before the shared write orders it after the previous call's reads).
KS_FN float ks_warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
KS_FN float ks_warp_pick(float v, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) v = ks_pick(v, __shfl_xor_sync(0xffffffffu, v, o), is_max); return v;
}
__device__ float ks_block_sum(float v) {
    __shared__ float red[32];
    v = ks_warp_sum(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    float t = threadIdx.x < warps ? red[threadIdx.x] : 0.0f;
    if (threadIdx.x < 32) t = ks_warp_sum(t);
    if (threadIdx.x == 0) red[0] = t;
    __syncthreads();
    return red[0];
}
__device__ double ks_block_sum_d(double v) {
    __shared__ double red[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    double t = threadIdx.x < warps ? red[threadIdx.x] : 0.0;
    if (threadIdx.x < 32) for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (threadIdx.x == 0) red[0] = t;
    __syncthreads();
    return red[0];
}
__device__ float ks_block_pick(float v, bool is_max) {
    __shared__ float red[32];
    v = ks_warp_pick(v, is_max);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    float t = threadIdx.x < warps ? red[threadIdx.x] : (is_max ? -INFINITY : INFINITY);
    if (threadIdx.x < 32) t = ks_warp_pick(t, is_max);
    if (threadIdx.x == 0) red[0] = t;
    __syncthreads();
    return red[0];
}
__device__ void ks_block_arg(float& v, long long& i, bool is_max) {
    __shared__ float rv[32];
    __shared__ long long ri[32];
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
        const long long i2 = __shfl_xor_sync(0xffffffffu, i, o);
        ks_arg_merge(v, i, v2, i2, is_max);
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) { rv[threadIdx.x >> 5] = v; ri[threadIdx.x >> 5] = i; }
    __syncthreads();
    if (threadIdx.x == 0) {
        const int warps = (blockDim.x + 31) >> 5;
        for (int w = 1; w < warps; ++w) ks_arg_merge(rv[0], ri[0], rv[w], ri[w], is_max);
    }
    __syncthreads();
    v = rv[0]; i = ri[0];
}
"""

_CPU_HEAD = r"""#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <vector>
#define KS_FN static inline
template <class T> KS_FN float ks_ld(T x) { return static_cast<float>(x); }
KS_FN float ks_ld(bool x) { return x ? 1.0f : 0.0f; }
template <class T> KS_FN void ks_st(T* p, long long i, float v) { p[i] = static_cast<T>(v); }
KS_FN void ks_st(bool* p, long long i, float v) { p[i] = v != 0.0f; }
template <class T> KS_FN void ks_sti(T* p, long long i, long long v) { p[i] = static_cast<T>(v); }
KS_FN float ks_round_float16(float x) { return static_cast<float>(static_cast<at::Half>(x)); }
KS_FN float ks_round_bfloat16(float x) { return static_cast<float>(static_cast<at::BFloat16>(x)); }
""" + _PICK + ops.CPU_MATH



def graph_variants(plan: GraphPlan, device: str) -> list[Variant]:
    # On the GPU a plan with 2D/3D convolutions tries them channels-last as its second variant (layout.py): the
    # convolution, not the fused epilogue, is most of such a module's time, and block sizes change nothing there.
    convs = device == "cuda" and bool(layout_convolutions(plan))
    last = " with the convolutions channels-last (cuDNN's NHWC kernels; the epilogue reads that layout in place)"
    # cuDNN runs a float32 convolution on TF32 tensor cores where PyTorch allows it (its default) and its heuristics
    # pick such a kernel: on the H200 the NHWC kernel of KernelBench 2/57 is TF32 where eager's NCHW one is plain
    # float32, and TF32's 10-bit mantissa then puts the result outside float32's tolerance of the reference. The
    # fallback after a channels-last variant that was not accepted runs the convolutions in full float32.
    full = ", convolutions in full float32 (TF32 off)"
    if not plan.kernels():
        # Library calls only: every block size would be the same source, and timing one source three times to keep
        # its best figure only picks the luckiest measurement.
        alone = Variant("the library call alone: nothing around it to fuse")
        return [alone, Variant(alone.label + last, layout="channels_last"),
                Variant(alone.label + last + full, layout="channels_last", fallback=True, tf32=False)] if convs else [alone]
    if device == "cpu":
        return [Variant("every step a C++ loop nest on PyTorch's thread pool")]
    # The first two read a block reduction's operands four floats at a time where they allow it (vectorize.py); the
    # third keeps every load scalar, so that a problem those loads do not suit still has a variant to accept.
    four = ", block reductions loading four floats at a time where their operands allow"
    if convs:
        return [Variant("256 threads per block in every generated kernel" + four, block=256, vec=WIDTH),
                Variant("256 threads per block in every generated kernel" + four + last, block=256, vec=WIDTH,
                        layout="channels_last"),
                Variant("256 threads per block in every generated kernel, every load scalar" + last + full, block=256,
                        layout="channels_last", fallback=True, tf32=False)]
    return [Variant(f"{b} threads per block in every generated kernel" + (four if vec > 1 else ""), block=b, vec=vec)
            for b, vec in ((256, WIDTH), (128, WIDTH), (512, 1))]


def graph_source(plan: GraphPlan, variant: Variant, device: str) -> str:
    cuda = device == "cuda"
    if variant.layout == "channels_last":
        plan = channels_last(plan)
    parts = [CUDA_HEAD if cuda else _CPU_HEAD]
    names = []
    # The scalar variant keeps a kernel per reduction: a problem the joined sums do not suit still has one to accept.
    steps = fused_steps(plan, cuda, siblings=variant.vec == WIDTH)
    for n, step in enumerate(steps):
        if isinstance(step, Kernel):
            parts.append(_kernel(plan, step, f"k{n}", variant, cuda))
            names.append(f"k{n}")
    if any(_LANE in part for part in parts[1:]):
        parts.insert(1, WARP_COMBINES)
    converts = cuda and variant.layout == "channels_last" and bool(layout_convolutions(plan))
    if converts:
        parts.append(TO_CHANNELS_LAST_CUDA)
    kernel = "\n\n".join(parts)
    name = "ks_builtin_graph_" + hashlib.sha256(kernel.encode()).hexdigest()[:16]
    decls = "\n".join(f"void {k}(std::vector<torch::Tensor> ts, int64_t stream);" for k in names)
    if converts:
        decls += f"\ntorch::Tensor {TO_CHANNELS_LAST}(torch::Tensor x, int64_t stream);"
        names.append(TO_CHANNELS_LAST)
    if cuda:
        build = (f'_ext = load_inline(name="{name}", cpp_sources={decls!r},\n'
                 f'                   cuda_sources=KERNEL, functions={names!r}, extra_cuda_cflags=["-O3"])'
                 if names else "_ext = None")
    else:
        build = (f'_ext = load_inline(name="{name}", cpp_sources=KERNEL, functions={names!r},\n'
                 f'                   extra_cflags={cpu_cflags("-fno-math-errno")})' if names else "_ext = None")
    weights = {}  # a channels-last convolution's weight is made channels-last once, at construction
    if variant.layout == "channels_last":
        weights = {w.source[6:]: memory_format(w.shape) for w in (s.args[1] for s in layout_convolutions(plan))
                   if isinstance(w, Leaf) and w.source.startswith("state:") and _whole(plan, w)}
    return MODULE.format(variant=f"whole-graph plan, {variant.label}", kernel=kernel, build=build,
                         init=state_init(plan.state, weights), forward=_forward(plan, steps, cuda, variant.layout, variant.tf32))


def _whole(plan: GraphPlan, leaf: Leaf) -> bool:
    """`leaf` is its whole tensor as it is (no view to make)."""
    return leaf.offset == 0 and leaf.shape == plan.base_shape(leaf.source) and leaf.strides == contiguous(leaf.shape)


def _view(plan: GraphPlan, leaf: Leaf) -> str:
    base = tensor_expr(plan, leaf.source)
    if _whole(plan, leaf):
        return base
    return f"torch.as_strided({base}, {tuple(leaf.shape)!r}, {tuple(leaf.strides)!r}, {leaf.offset})"


def _forward(plan: GraphPlan, steps: list[Any], cuda: bool, layout: str = "default", tf32: bool = True) -> str:
    args = ", ".join(f"arg{i}" for i in range(len(plan.inputs)))
    lines = [f"    def forward(self, {args}):"]
    tensor_inputs = [i for i, x in enumerate(plan.inputs) if "shape" in x]
    device = f"arg{tensor_inputs[0]}.device" if tensor_inputs else \
        (f"{tensor_expr(plan, 'state:' + plan.state[0]['name'])}.device" if plan.state else "None")
    lines.append(f"        device = {device}")
    for i in tensor_inputs:
        lines.append(f"        arg{i} = arg{i}.contiguous()")
    made: set[str] = set()
    stream = "torch.cuda.current_stream().cuda_stream" if cuda else "0"
    relaid = layout_convolutions(plan) if layout == "channels_last" else []
    for n, step in enumerate(steps):
        if step is None:  # fused into the kernel before it
            continue
        if isinstance(step, Library):
            call = [_view(plan, a) if isinstance(a, Leaf) else repr(a) for a in step.args]
            after = ".contiguous()"
            if step in relaid:
                fmt = f"memory_format=torch.{memory_format(step.args[0].shape)}"
                # The input through our tiled conversion where it can be (layout.TO_CHANNELS_LAST_CUDA); the weight
                # is channels-last from construction, so its conversion is a no-op.
                call[:2] = [f"_ext.{TO_CHANNELS_LAST}({call[0]}, {stream})" if cuda else f"{call[0]}.contiguous({fmt})",
                            f"{call[1]}.contiguous({fmt})"]
                if step.output in plan.layouts:  # read in place by the kernels after it
                    after = f".contiguous({fmt})"
            line = f"{tensor_expr(plan, step.output)} = {_library_call(step.op, call)}{after}"
            if step.op == "convolution" and not tf32:  # the flag restored whatever happens in the call
                lines += ["        tf32 = torch.backends.cudnn.allow_tf32",
                          "        torch.backends.cudnn.allow_tf32 = False",
                          f"        try:\n            {line}\n        finally:\n            torch.backends.cudnn.allow_tf32 = tf32"]
            else:
                lines.append(f"        {line}")
            made.add(step.output)
            continue
        for _, leaf in _all_outputs(step):
            if leaf.source not in made:
                shape, dtype = plan.buffers[leaf.source]
                lines.append(f"        {tensor_expr(plan, leaf.source)} = torch.empty({tuple(shape)!r}, "
                             f"dtype={_TORCH_DTYPES[dtype]}, device=device)")
                made.add(leaf.source)
        tensors = [tensor_expr(plan, b) for b in _bases(step)] + [tensor_expr(plan, b) for b in _out_bases(step)]
        lines.append(f"        _ext.k{n}([{', '.join(tensors)}], {stream})")
    outs = [tensor_expr(plan, o) + (f".view({tuple(plan.views[o])!r})" if o in plan.views else "") for o in plan.outputs]
    lines.append(f"        return {outs[0] if plan.single else '(' + ', '.join(outs) + ',)'}")
    return "\n".join(lines)


def _library_call(op: str, a: list[str]) -> str:
    if op == "mm":
        return f"torch.mm({a[0]}, {a[1]})"
    if op == "bmm":
        return f"torch.bmm({a[0]}, {a[1]})"
    if op == "addmm":
        return f"torch.addmm({a[0]}, {a[1]}, {a[2]}, beta={a[3]}, alpha={a[4]})"
    if op == "baddbmm":
        return f"torch.baddbmm({a[0]}, {a[1]}, {a[2]}, beta={a[3]}, alpha={a[4]})"
    return f"torch.ops.aten.convolution({', '.join(a)})"


def _leaves(value: Any, found: list[Leaf]) -> list[Leaf]:
    if isinstance(value, Leaf):
        if is_data(value) and value not in found:
            found.append(value)
    elif isinstance(value, Expr):
        for o in value.operands:
            _leaves(o, found)
    return found


def _bases(step: Kernel) -> list[str]:
    """The buffers a kernel reads: its source's and its sibling reductions', and a fused epilogue's but for the
    reduction's own results."""
    out: list[str] = []
    then = step.params.get("then")
    made = {leaf.source for _, leaf in step.outputs}
    leaves = _leaves(step.source, [])
    for sibling in step.params.get("siblings", ()):
        leaves += _leaves(sibling.source, [])
    for leaf in leaves + (_leaves(then.source, []) if then is not None else []):
        if leaf.source not in out and leaf.source not in made:
            out.append(leaf.source)
    return out


def _all_outputs(step: Kernel) -> list[tuple[str, Leaf]]:
    then = step.params.get("then")
    siblings = [pair for sibling in step.params.get("siblings", ()) for pair in sibling.outputs]
    return step.outputs + siblings + (then.outputs if then is not None else [])


def _out_bases(step: Kernel) -> list[str]:
    out: list[str] = []
    for _, leaf in _all_outputs(step):
        if leaf.source not in out:
            out.append(leaf.source)
    return out


# ------------------------------------------------------------------------------ fusion

# Reductions whose results are plain values (an argmax's index is not): their thread-per-output form can go on to
# write a pointwise consumer of them (fused_steps).
_FUSIBLE_KINDS = ("sum", "mean", "amax", "amin", "prod", "any", "all", "var_mean")
LONG_REDUCTION = 4096  # longer reductions summed by one thread accumulate in double
UNROLL_MAX = 64  # a fused reduction at most this long is unrolled: its second read of an element is a register


def is_block_reduction(step: Kernel, cuda: bool) -> bool:
    """A reduction done by a block per output (else a thread per output)."""
    dims, shape = step.params["dims"], step.shape
    reduced = math.prod(shape[d] for d in dims)
    outputs = math.prod(shape) // max(1, reduced)
    return cuda and reduced >= 32 and (len(shape) - 1 in dims or outputs < 1024)


def fused_steps(plan: GraphPlan, cuda: bool, siblings: bool = True) -> list[Any]:
    """The plan's steps, where a thread-per-output reduction and the pointwise kernel right after it that maps its
    input's elements (normalizing by the result, say) become one kernel: each thread reduces its output, then writes
    the consumer's elements of that output from the result in a register. The consumer's second read of the input
    is then, for a short reduction, the same thread's registers (RMSNorm over channels read the input twice and wrote
    it once in two kernels: 0.47x against torch.compile on the H200). The reduction's own result is still written.
    `siblings`: block sums sharing an operand also become one kernel (_with_siblings)."""
    steps, out, n = _with_siblings(plan, plan.steps, cuda) if siblings else plan.steps, [], 0
    while n < len(steps):
        step = steps[n]
        after = steps[n + 1] if n + 1 < len(steps) else None
        if isinstance(step, Kernel) and isinstance(after, Kernel) and fusible(step, after, cuda):
            out.append(Kernel(step.kind, step.source, step.outputs, step.shape, {**step.params, "then": after}))
            out.append(None)  # the consumer's place: its step number stays free, the names of the others unchanged
            n += 2
        else:
            out.append(step)
            n += 1
    return out


# Block reductions over the same elements, summing values that share an operand (KernelBench's 99_TripletMarginLoss:
# the anchor's distances to the positive and to the negative, two reductions that read the anchor twice, 4 bytes of
# 3 moved per element too many: 75% of the memory bound, 0.76x of torch.compile's one kernel on the H200), become
# one kernel: each thread keeps an accumulator per reduction, and every operand is loaded once for all of them.
_SIBLING_KINDS = ("sum", "mean")


def _with_siblings(plan: GraphPlan, steps: list[Any], cuda: bool) -> list[Any]:
    """`steps` where a later block reduction joins an earlier one as its sibling (its place None): the same kind of
    sum over the same shape and dimensions, an operand in common, and nothing between them that it depends on or that
    depends on it."""
    out = list(steps)
    for a_at, first in enumerate(out):
        if not (cuda and _sibling_kind(plan, first)):
            continue
        for b_at in range(a_at + 1, len(out)):
            other = out[b_at]
            if not (isinstance(other, Kernel) and _sibling_kind(plan, other) and other.shape == first.shape
                    and other.params["dims"] == first.params["dims"] and set(_bases(other)) & set(_bases(first))
                    and _independent(out[a_at:b_at], other)):
                continue
            first = Kernel(first.kind, first.source, first.outputs, first.shape,
                           {**first.params, "siblings": (*first.params.get("siblings", ()), other)})
            out[a_at], out[b_at] = first, None
    return out


def _sibling_kind(plan: GraphPlan, step: Any) -> bool:
    if not (isinstance(step, Kernel) and step.kind == "reduce" and step.params["kind"] in _SIBLING_KINDS
            and "then" not in step.params and is_block_reduction(step, True)):
        return False
    reduced = math.prod(step.shape[d] for d in step.params["dims"])
    return reduce_splits(math.prod(step.shape) // reduced, reduced) == 1 and \
        all(plan.base_info(leaf.source)[1] == "float32" for _, leaf in step.outputs)


def _independent(before: list[Any], step: Kernel) -> bool:
    """`step` may run before the steps `before` (it ran after them): none of them writes what it reads or writes,
    and none reads what it writes."""
    reads, writes = set(_bases(step)), set(_out_bases(step))
    for other in before:
        if other is None:
            continue
        if isinstance(other, Library):
            other_reads = {a.source for a in other.args if isinstance(a, Leaf)}
            other_writes = {other.output}
        else:
            other_reads, other_writes = set(_bases(other)), set(_out_bases(other))
        if other_writes & (reads | writes) or other_reads & writes:
            return False
    return True


def fusible(reduce: Kernel, after: Kernel, cuda: bool) -> bool:
    """`after` can be written from inside `reduce`'s thread-per-output loop: it maps `reduce`'s iteration space one
    element each, reads `reduce`'s results only at the element's own output (broadcast over the reduced
    dimensions, nothing remapping the coordinates on the way), and writes nothing `reduce` reads."""
    if (reduce.kind != "reduce" or after.kind != "pointwise" or reduce.params["kind"] not in _FUSIBLE_KINDS
            or is_block_reduction(reduce, cuda) or tuple(after.shape) != tuple(reduce.shape) or len(after.outputs) != 1
            or "then" in reduce.params):
        return False
    results = {leaf.source for _, leaf in reduce.outputs}
    if {leaf.source for _, leaf in after.outputs} & (results | set(_bases(reduce))):
        return False
    reads = _result_reads(after.source, results, False, [])
    return reads is not None and bool(reads) and all(_at_own_output(leaf, reduce) for leaf in reads)


def _result_reads(value: Any, results: set[str], remapped: bool, found: list[Leaf]) -> list[Leaf] | None:
    """The leaves of `value` that read a result (None: one is read under a remapping op)."""
    if isinstance(value, Leaf):
        if value.source in results:
            if remapped:
                return None
            found.append(value)
    elif isinstance(value, Expr):
        for o in value.operands:
            if _result_reads(o, results, remapped or value.op in REMAPPING, found) is None:
                return None
    return found


def _at_own_output(leaf: Leaf, reduce: Kernel) -> bool:
    """`leaf`, read at an element of `reduce`'s iteration space, is the result of that element's output: offset 0,
    no step along a reduced dimension, and the contiguous steps of the kept dimensions (the reduction writes its
    output o at flat index o)."""
    shape, dims = reduce.shape, reduce.params["dims"]
    kept = [shape[d] for d in range(len(shape)) if d not in dims]
    strides = iter(contiguous(tuple(kept)))
    lead = len(shape) - len(leaf.shape)
    if leaf.offset != 0 or lead < 0:
        return False
    for d, size in enumerate(shape):
        mine = (leaf.shape[d - lead], leaf.strides[d - lead]) if d >= lead else (1, 0)
        if d in dims:
            if mine[0] != 1 and mine[1] != 0:
                return False
            continue
        want = next(strides)
        if size != 1 and mine != (size, want):
            return False
    return True


# --------------------------------------------------------------------------------- kernels

def _signature(plan: GraphPlan, step: Kernel, cuda: bool) -> tuple[str, str, str, dict[str, str]]:
    """(kernel parameters, host unpacking, launch arguments, base -> C type)."""
    table = _CUDA_TYPES if cuda else _CPU_TYPES
    params, host, launch, types = [], [], [], {}
    bases, outs = _bases(step), _out_bases(step)
    host.append(f'TORCH_CHECK(ts.size() == {len(bases) + len(outs)}, "expected {len(bases) + len(outs)} tensors");')
    for k, base in enumerate(bases + outs):
        shape, dtype = plan.base_info(base)
        ctype = table[dtype]
        types[base] = ctype
        writable = k >= len(bases)
        name = f"q{outs.index(base)}" if writable else f"p{k}"
        const = "" if writable else "const "
        params.append(f"{const}{ctype}* __restrict__ {name}")
        fmt = CPP_FORMATS.get(plan.layouts.get(base, ""), "")
        host.append(f'TORCH_CHECK(ts[{k}].scalar_type() == {_SCALAR_TYPES[dtype]} && ts[{k}].numel() == {math.prod(shape)}LL '
                    f'&& ts[{k}].is_contiguous({fmt}), "tensor {k} ({base}) must be a {plan.layouts.get(base, "contiguous")} '
                    f'{dtype} tensor of shape {list(shape)}");')
        host.append(f"{const}{ctype}* {name} = reinterpret_cast<{const}{ctype}*>(ts[{k}].data_ptr());")
        launch.append(name)
    return ", ".join(params), "\n    ".join(host), ", ".join(launch), types


def _kernel(plan: GraphPlan, step: Kernel, name: str, variant: Variant, cuda: bool) -> str:
    params, host, launch, types = _signature(plan, step, cuda)
    builder = {"pointwise": _pointwise, "reduce": _reduce, "pool": _pool, "scan": _scan}[step.kind]
    return builder(plan, step, name, variant, cuda, params, host, launch, types)


def _body(lines: list[str], indent: int) -> str:
    return "\n".join(" " * indent + line for line in lines)


def _outputs(step: Kernel) -> dict[str, tuple[str, Leaf]]:
    outs = _out_bases(step)
    return {what: (f"q{outs.index(leaf.source)}", leaf) for what, leaf in step.outputs}


# Elements of work a CPU task takes at least. A grain counted in items (2048 of them) put a reduction's every output on
# one thread where there were fewer: KernelBench's 40_LayerNorm (16 rows of 4 Mi) ran on one of two cores.
_CPU_GRAIN = 2048


def _cpu_nest(red: tuple[int, ...], rc: tuple[str, ...], body: list[str], simd: str | None) -> list[str]:
    """A CPU loop over a reduction's elements: a loop per reduced dimension, each coordinate the loop's own variable,
    so that every read's offset is affine in the innermost one (one flat index split by divisions per element kept
    the loops scalar: 40_LayerNorm's statistics at a third of eager's speed). `j`, the flat index, is there for the
    body that needs it. `simd`: the innermost loop's `omp simd` clause (a sum's reduction, or none where the order of
    the elements decides the result)."""
    loops = [(c, size) for c, size in zip(rc, red) if c != "0"]
    steps, step = {}, 1
    for c, size in reversed(list(zip(rc, red))):
        steps[c] = step
        step *= size
    flat = " + ".join(c if steps[c] == 1 else f"{c} * {steps[c]}LL" for c, _ in loops) or "0"
    lines: list[str] = []
    for depth, (c, size) in enumerate(loops):
        if depth == len(loops) - 1 and simd is not None:
            lines.append(f"#pragma omp simd{simd}")
        lines.append("    " * depth + f"for (long long {c} = 0; {c} < {size}LL; ++{c}) {{")
    if not loops:  # every reduced dimension of size 1: the body once, in a scope of its own
        return ["{", "    const long long j = 0; (void)j;", *("    " + t for t in body), "}"]
    pad = "    " * len(loops)
    lines += [pad + f"const long long j = {flat}; (void)j;", *(pad + t for t in body)]
    return lines + ["    " * d + "}" for d in reversed(range(len(loops)))]


def _grid_loop(cuda: bool, count: int, block: int, body: str, var: str = "i", each: int = 1) -> str:
    """A loop over `count` items: a grid-stride loop of threads on CUDA, at::parallel_for on the CPU, where `each`
    is the elements an item reads (a reduction's length): a task gets at least _CPU_GRAIN elements' work."""
    if cuda:
        return (f"    for (long long {var} = (long long)blockIdx.x * blockDim.x + threadIdx.x; {var} < {count}LL; "
                f"{var} += (long long)gridDim.x * blockDim.x) {{\n{body}\n    }}")
    grain = max(1, _CPU_GRAIN // max(1, each))
    return (f"    at::parallel_for(0, {count}LL, {grain}, [&](int64_t begin, int64_t end) {{\n"
            f"    for (long long {var} = begin; {var} < end; ++{var}) {{\n{body}\n    }}\n    }});")


def _wrap(name: str, params: str, host: str, launch: str, body: str, cuda: bool, blocks: int, block: int,
          globals_: str = "") -> str:
    if cuda:
        grid = max(1, min(blocks, 65535 * 8))
        return (f"{globals_}__global__ void __launch_bounds__({block}) {name}_kernel({params}) {{\n{body}\n}}\n\n"
                f"void {name}(std::vector<torch::Tensor> ts, int64_t stream) {{\n    {host}\n"
                f"    {name}_kernel<<<{grid}, {block}, 0, reinterpret_cast<cudaStream_t>(stream)>>>({launch});\n"
                f"    KS_LAUNCH_CHECK();\n}}")
    return (f"static void {name}_body({params}) {{\n{body}\n}}\n\n"
            f"void {name}(std::vector<torch::Tensor> ts, int64_t stream) {{\n    {host}\n    {name}_body({launch});\n}}")


# The CPU's pointwise loop keeps at least this many elements in its inner loops (_cpu_pointwise).
_CPU_INNER = 16


def _cpu_split(shape: tuple[int, ...]) -> int:
    """Where _cpu_pointwise splits `shape`: the fewest trailing dimensions holding _CPU_INNER elements or more (all
    of them for a smaller tensor) are its inner loops, the dimensions before them its rows."""
    split, inner = len(shape), 1
    while split > 0 and inner < _CPU_INNER:
        split -= 1
        inner *= shape[split]
    return split


def _cpu_pointwise(plan: GraphPlan, step: Kernel, name: str, variant: Variant, params: str, host: str, launch: str,
                   types: dict[str, str]) -> str:
    """A CPU pointwise kernel as rows of inner loops: the row's coordinates split from its index once, then a loop per
    trailing dimension with the innermost `omp simd`, so that every offset is affine in the loop's variable. One flat
    index split by a division and a remainder per dimension on every element had kept the loop scalar: GroupNorm's and
    InstanceNorm's normalisation at a third to a half of eager's speed (docs/benchmarks.md §14, session 36)."""
    shape = step.shape
    split = _cpu_split(shape)
    lines, outer = decompose("i", shape[:split], "c")
    inner = tuple(f"c{d}" if size != 1 else "0" for d, size in enumerate(shape) if d >= split)
    coords = (*outer, *inner)
    ev = Eval(plan, _bases(step), "v", types)
    value = ev.at(step.source, coords)
    out, leaf = _outputs(step)["value"]
    body = ev.lines + [f"ks_st({out}, {offset_expr(leaf, coords)}, {value});"]
    lines += _cpu_nest(shape[split:], inner, body, "")
    rows = math.prod(shape[:split])
    loop = _grid_loop(False, rows, variant.block, _body(lines, 8), each=math.prod(shape[split:]))
    return _wrap(name, params, host, launch, loop, False, rows, variant.block)


def _pointwise(plan: GraphPlan, step: Kernel, name: str, variant: Variant, cuda: bool, params: str, host: str,
               launch: str, types: dict[str, str]) -> str:
    if not cuda:
        return _cpu_pointwise(plan, step, name, variant, params, host, launch, types)
    tiled = tiled_reads(plan, step, *direct_leaves(step.source, False, [], []), types)
    if tiled:
        return _tiled_pointwise(plan, step, name, params, host, launch, types, tiled)
    shape = step.shape
    count = math.prod(shape)
    ev = Eval(plan, _bases(step), "v", types)
    lines, coords = decompose("i", shape, "c")
    value = ev.at(step.source, coords)
    out, leaf = _outputs(step)["value"]
    lines += ev.lines + [f"ks_st({out}, {offset_expr(leaf, coords)}, {value});"]
    body = _grid_loop(cuda, count, variant.block, _body(lines, 8))
    vectorized = cuda and variant.vec == WIDTH
    four = pointwise_vector_reads(step, leaf, types) if vectorized else None
    flat = four is None and vectorized and (four := flat_vector_reads(step, leaf, types)) is not None
    if four is None:
        return _wrap(name, params, host, launch, body, cuda, -(-count // variant.block), variant.block)
    # Four consecutive elements per thread (vectorize.py): float4 loads and store where the operands allow, the scalar
    # loop where a pointer is not 16-byte aligned. Along one row the index arithmetic is done once for the four; over
    # the flat index (rows not a multiple of four long) each element has its own coordinates.
    reads, store = four
    if flat:
        index_lines, lane_coords = [], []
        for lane in range(WIDTH):
            decomposed, coords_k = decompose(f"(i * {WIDTH}LL + {lane})", shape, f"c{lane}_")
            index_lines += decomposed
            lane_coords.append(coords_k)
        group = f"i * {WIDTH}LL"

        def at(lane: int) -> tuple[str, ...]:
            return lane_coords[lane]

        def first(view: Leaf) -> str:  # element 4i of a view laid out as the elements (vectorize._as_elements)
            return f"{view.offset}LL + {group}" if view.offset else group
    else:
        index_lines, vc = decompose(f"(i * {WIDTH}LL)", shape, "c")

        def at(lane: int) -> tuple[str, ...]:
            return (*vc[:-1], f"({vc[-1]} + {lane})")

        def first(view: Leaf) -> str:
            return trailing_offset_expr(view, vc)
    lanes = _four_lanes(plan, step, types, reads, first, at, "v")
    vlines = [*index_lines, *lanes.loads]
    for lane, (lane_lines, value) in enumerate(lanes.lanes):
        vlines += lane_lines + ([] if store else [f"ks_st({out}, {offset_expr(leaf, at(lane))}, {value});"])
    if store:
        values = ", ".join(value for _, value in lanes.lanes)
        vlines.append(f"*reinterpret_cast<float4*>(&{out}[{first(leaf)}]) = make_float4({values});")
    vector = _grid_loop(cuda, count // WIDTH, variant.block, _body(vlines, 8))
    text = "\n".join(["    if (ks_vec) {", vector, "    } else {", body, "    }"])
    return _wrap(name, *_with_vec_flag(params, host, launch, lanes.pointers + ([out] if store else [])), text, cuda,
                 -(-count // WIDTH // variant.block), variant.block)


def _tiled_pointwise(plan: GraphPlan, step: Kernel, name: str, params: str, host: str, launch: str,
                     types: dict[str, str], tiled: list[Leaf]) -> str:
    """A pointwise kernel reading channels-last buffers through shared-memory tiles (layout.tiled_reads): block
    (x, y, z) loads positions x*TILE.. and channels y*TILE.. of batch z along the channels, then computes and stores
    the same elements along the positions."""
    shape = step.shape
    channels, positions = shape[1], math.prod(shape[2:])
    bases = _bases(step)
    ev = Eval(plan, bases, "v", types)
    load = []
    for k, leaf in enumerate(tiled):
        ev.leaf_override[leaf] = f"tile{k}[tx][kk]"
        load.append(f"tile{k}[kk][tx] = ks_ld(p{bases.index(leaf.source)}[(n * {positions}LL + s) * {channels}LL + ch]);")
    lines, spatial = decompose("s", shape[2:], "c")  # only where an operand varies along space (else dead code)
    coords = ("n", "ch", *spatial)
    value = ev.at(step.source, coords)
    out, _ = _outputs(step)["value"]  # contiguous (tiled_reads): its offset needs no spatial coordinates
    lines += ev.lines + [f"ks_st({out}, (n * {channels}LL + ch) * {positions}LL + s, {value});"]
    tiles = "".join(f"    __shared__ float tile{k}[{TILE}][{TILE + 1}];  // +1: no bank conflicts down a column\n"
                    for k in range(len(tiled)))
    body = (f"{tiles}    const unsigned tx = threadIdx.x % {TILE}u, ty = threadIdx.x / {TILE}u;\n"
            f"    const long long n = blockIdx.z;\n"
            f"    for (unsigned kk = ty; kk < {TILE}u; kk += {TILE_ROWS}u) {{\n"
            f"        const unsigned s = blockIdx.x * {TILE}u + kk, ch = blockIdx.y * {TILE}u + tx;\n"
            f"        if (s < {positions}u && ch < {channels}u) {{\n{_body(load, 12)}\n        }}\n    }}\n"
            f"    __syncthreads();\n"
            f"    for (unsigned kk = ty; kk < {TILE}u; kk += {TILE_ROWS}u) {{\n"
            f"        const unsigned s = blockIdx.x * {TILE}u + tx, ch = blockIdx.y * {TILE}u + kk;\n"
            f"        if (s >= {positions}u || ch >= {channels}u) continue;\n{_body(lines, 8)}\n    }}")
    block = TILE * TILE_ROWS
    grid = f"dim3({-(-positions // TILE)}, {-(-channels // TILE)}, {shape[0]})"
    return (f"__global__ void __launch_bounds__({block}) {name}_kernel({params}) {{\n{body}\n}}\n\n"
            f"void {name}(std::vector<torch::Tensor> ts, int64_t stream) {{\n    {host}\n"
            f"    {name}_kernel<<<{grid}, {block}, 0, reinterpret_cast<cudaStream_t>(stream)>>>({launch});\n"
            f"    KS_LAUNCH_CHECK();\n}}")


def _reduce(plan: GraphPlan, step: Kernel, name: str, variant: Variant, cuda: bool, params: str, host: str,
            launch: str, types: dict[str, str]) -> str:
    shape, dims, kind = step.shape, step.params["dims"], step.params["kind"]
    kept = tuple(s for d, s in enumerate(shape) if d not in dims)
    red = tuple(shape[d] for d in dims)
    outputs, reduced = math.prod(kept), math.prod(red)
    block_mode = is_block_reduction(step, cuda)
    then = step.params.get("then")
    unroll = ["#pragma unroll"] if then is not None and cuda and reduced <= UNROLL_MAX else []
    lines_o, kc = decompose("o", kept, "k")
    lines_j, rc = decompose("j", red, "r")
    coords: list[str] = []
    ki = ri = 0
    for d in range(len(shape)):
        if d in dims:
            coords.append(rc[ri])
            ri += 1
        else:
            coords.append(kc[ki])
            ki += 1

    def load(prefix: str) -> tuple[list[str], str]:
        ev = Eval(plan, _bases(step), prefix, types)
        value = ev.at(step.source, tuple(coords))
        return lines_j + ev.lines, value
    if step.params.get("siblings"):
        return _sibling_reduce(plan, step, name, variant, params, host, launch, types, lines_o, lines_j, tuple(coords))
    outs = _outputs(step)
    is_max = "true" if kind in ("amax", "argmax") else "false"
    lanes = _vector_lanes(plan, step, tuple(coords), types) \
        if cuda and block_mode and variant.vec == WIDTH and kind in _VECTOR_KINDS else None
    if lanes is not None:  # the float4 loop runs where every vector operand's pointer is 16-byte aligned
        params, host, launch = _with_vec_flag(params, host, launch, lanes.pointers)
    if cuda and not block_mode and then is None and kind in _SLICED_KINDS and reduced >= _SLICED_MIN:
        return _sliced_reduce(name, kind, load, lines_o, outs, outputs, reduced, variant.block, params, host, launch)
    if not cuda and kind in _START and len(shape) - 1 not in dims and reduced >= _SLICED_MIN:
        ev = Eval(plan, _bases(step), "x", types)
        element = ev.at(step.source, tuple(coords))
        fused = None if then is None else _epilogue_element(plan, step, then, tuple(coords), types, _results(step))
        return _cpu_columns(name, kind, (lines_o, lines_j, ev.lines, element), kc, outs, outputs, reduced, params, host,
                            launch, fused)
    splits = reduce_splits(outputs, reduced) if cuda and block_mode and kind in _SPLIT_KINDS else 1
    if splits > 1:
        body = _split_body(name, kind, load, lines_o, outs, outputs, reduced, splits, step.params.get("correction"), lanes)
        return _wrap(name, params, host, launch, body, cuda, outputs * splits, variant.block, _split_state(name, kind, outputs, splits))
    if cuda and block_mode:
        loop = "for (long long j = threadIdx.x; j < {R}LL; j += blockDim.x)".format(R=reduced)
    else:
        loop = f"for (long long j = 0; j < {reduced}LL; ++j)"

    def over(lines: list[str], then_lines: list[str], simd: str | None = None) -> list[str]:
        """The loop over the reduced elements of `load`'s lines (lines_j first), then `then_lines` per element."""
        if not cuda:
            return _cpu_nest(red, tuple(rc), lines[len(lines_j):] + then_lines, simd)
        return [*unroll, f"{loop} {{", *("    " + t for t in lines + then_lines), "}"]
    body: list[str] = []
    if kind in ("sum", "mean", "prod", "amax", "amin", "any", "all"):
        init = _START[kind]
        lines, x = load("x")
        update = update_of(kind).format(x=x)
        # A thread summing a long reduction alone (the CPU's loops; a GPU thread per output) accumulates in double:
        # a float sum of half a million elements drifts by 1e-4 of its value (PyTorch sums in a cascade).
        wide = not block_mode and kind in ("sum", "mean") and reduced > LONG_REDUCTION
        scalar = over(lines, [update], " reduction(+:acc)" if kind in ("sum", "mean") else None)
        if lanes is not None:
            scalar = _either(_vector_loop(lanes, f"{WIDTH}LL * threadIdx.x", f"{reduced}LL", update_of(kind)), scalar)
        body += [f"{'double' if wide else 'float'} acc = {init};", *scalar]
        if block_mode:
            if kind in ("sum", "mean"):
                body.append("acc = ks_block_sum(acc);")
            elif kind in ("amax", "amin"):
                body.append(f"acc = ks_block_pick(acc, {is_max});")
            elif kind == "prod":
                raise_prod = True  # noqa: F841 - products combine through shared memory below
                body += ["__shared__ float pr[1024];", "pr[threadIdx.x] = acc; __syncthreads();",
                         "if (threadIdx.x == 0) { for (int t = 1; t < blockDim.x; ++t) acc *= pr[t]; pr[0] = acc; }",
                         "__syncthreads(); acc = pr[0];"]
            else:
                body.append(f"acc = {'ks_block_pick(acc, true)' if kind == 'any' else '-ks_block_pick(-acc, true)'};")
        result = _accumulated(kind, reduced, wide, "acc")
        out, _ = outs["value"]
        if then is not None:  # the result stays in a register for the fused consumer
            body.append(f"const float ks_r_value = {result};")
            result = "ks_r_value"
        body.append(("if (threadIdx.x == 0) " if block_mode else "") + f"ks_st({out}, o, {result});")
    elif kind in ("argmax", "argmin"):
        lines, x = load("x")
        body += [f"float best = {'-INFINITY' if kind == 'argmax' else 'INFINITY'}; long long at = 0x7fffffffffffffffLL;",
                 *over(lines, [f"ks_arg_merge(best, at, {x}, j, {is_max});"])]
        if block_mode:
            body.append(f"ks_block_arg(best, at, {is_max});")
        write = _arg_writes(outs)
        body.append(("if (threadIdx.x == 0) " if block_mode else "") + "{ " + " ".join(write) + " }")
    elif kind == "var_mean" and block_mode:
        # One read of the input (KernelBench's 34_InstanceNorm/35_GroupNorm read it twice here, then once more to
        # normalize: 0.61x and 0.40x of torch.compile's three passes in all on the H100): shifted sums, as the split
        # path's, accumulated per thread in double since a thread here sums thousands of elements.
        vector = None if lanes is None else \
            (lambda update: _vector_loop(lanes, f"{WIDTH}LL * threadIdx.x", f"{reduced}LL", update))
        local, (t1, t2) = _shifted_sums(load, ["#pragma unroll 4", f"{loop} {{"], "double", vector)
        body += local
        values = _var_mean_values(t1, t2, reduced, step.params["correction"])
        body.append("if (threadIdx.x == 0) { " + " ".join(f"ks_st({out}, o, {values[what]});"
                                                         for what, (out, _) in outs.items()) + " }")
    elif kind == "var_mean" and not cuda:
        # One read for both statistics, as the GPU's blocks do (_shifted_sums): sums of x - K and its square in double,
        # K the first element, over the loops of _cpu_nest, whose innermost runs in SIMD lanes (a sum's order is free
        # there; the lanes' totals are added in a fixed order). Two reads of 40_LayerNorm's rows took twice eager's time.
        shift_lines, shift = load("z")
        lines1, x1 = load("x")
        body += ["float K;", "{", "    const long long j = 0;", *("    " + t for t in shift_lines), f"    K = {shift};", "}",
                 "double s1 = 0.0, s2 = 0.0;",
                 *over(lines1, [f"const double d = {_minus('double', x1, 'K')}; s1 += d; s2 += d * d;"],
                       " reduction(+:s1, s2)")]
        values = _var_mean_values("s1", "s2", reduced, step.params["correction"])
        body += [f"const float mean = {values['mean']};", f"const float var = {values['var']};"]
        body.append("const float ks_r_std = sqrtf(var); { " + " ".join(_stats_writes(outs)) + " }")
    elif kind == "var_mean":
        lines1, x1 = load("x")
        lines2, x2 = load("y")
        shift_lines, shift = load("z")
        correction = step.params["correction"]
        # The mean as the first element plus the mean of the differences from it: values sharing a large offset
        # (a LayerNorm over a bias-dominated row, KernelBench level 2's 3_ConvTranspose3d_Sum_LayerNorm with inputs
        # 1e-3 small) summed directly lost the few ULPs that the normalisation then magnified past the tolerance.
        # Long reductions (a GroupNorm's group on the CPU: half a million elements) accumulate in double.
        acc = "double" if reduced > LONG_REDUCTION else "float"
        body += ["float K;", "{", "    const long long j = 0;", *("    " + t for t in shift_lines), f"    K = {shift};", "}",
                 f"{acc} s = 0;", *unroll, f"{loop} {{", *("    " + s for s in lines1), f"    s += {_minus(acc, x1, 'K')};", "}",
                 f"const float mean = (float)(K + s / {reduced}.0);", f"{acc} q = 0;",
                 *unroll, f"{loop} {{", *("    " + s for s in lines2), f"    const {acc} d = {_minus(acc, x2, 'mean')}; q += d * d;", "}",
                 f"const float var = (float)(q / fmax(0.0, {reduced}.0 - {ops.literal(correction)}));"]
        body.append("const float ks_r_std = sqrtf(var); { " + " ".join(_stats_writes(outs)) + " }")
    else:
        raise ValueError(kind)
    if then is not None:
        body += _epilogue(plan, step, then, tuple(coords), lines_j, types, unroll, _results(step), reduced,
                          None if cuda else over)
    if block_mode:
        return _per_output(step, name, variant, params, host, launch, lines_o, body, outputs)
    text = _grid_loop(cuda, outputs, variant.block, _body(lines_o + body, 8), "o", each=reduced)
    return _wrap(name, params, host, launch, text, cuda, -(-outputs // variant.block), variant.block)


def _results(step: Kernel) -> dict[str, str]:
    """A reduction's outputs -> the C values a fused consumer reads them from (_epilogue)."""
    named = {"value": "ks_r_value", **_STAT_VALUES}
    return {leaf.source: named[what] for what, leaf in step.outputs}


def _stats_writes(outs: dict[str, tuple[str, Leaf]]) -> list[str]:
    """A var_mean's stores of output o, from the C values var, mean and ks_r_std, whichever the graph uses."""
    return [f"ks_st({out}, o, {_STAT_VALUES[what]});" for what, (out, _) in outs.items()]


_STAT_VALUES = {"var": "var", "mean": "mean", "std": "ks_r_std"}


def _per_output(step: Kernel, name: str, variant: Variant, params: str, host: str, launch: str, lines_o: list[str],
                body: list[str], outputs: int) -> str:
    """A CUDA reduction's kernel from its body for output o: a block per output, or a warp (per_warp)."""
    if per_warp(step, variant):
        warps = variant.block // 32
        inner = _body([_LANE, *lines_o, *_as_warp(body)], 8)
        text = (f"    for (long long o = (long long)blockIdx.x * {warps} + (threadIdx.x >> 5); o < {outputs}LL; "
                f"o += (long long)gridDim.x * {warps}) {{\n{inner}\n    }}")
        return _wrap(name, params, host, launch, text, True, -(-outputs // warps), variant.block)
    text = f"    for (long long o = blockIdx.x; o < {outputs}LL; o += gridDim.x) {{\n{_body(lines_o + body, 8)}\n    }}"
    return _wrap(name, params, host, launch, text, True, outputs, variant.block)


# Short rows, many of them: a warp per output, not a block. A block of 256 threads over a LayerNorm's 64 elements
# (KernelBench level 2's 34_ConvTranspose3d_LayerNorm and 3_..._Sum_LayerNorm: 4M rows of 64) leaves 3 of 4 warps
# idle behind two barriers per row: its statistics kernel took 8.3 ms of 31.7 on the H200, where torch.compile's whole
# LayerNorm-GELU-scale kernel took 0.56. In the float4 variants only: the scalar one keeps the block per output, a
# variant for whatever the warp's form does not suit.
_WARP_ROW_MAX = 256  # elements per output at most (eight per lane)
_WARP_ROWS_MIN = 1024  # outputs at least: fewer leave the GPU's SMs idle at a warp each
_LANE = "const int ks_lane = threadIdx.x & 31;"  # opens a warp-per-output kernel's body; graph_source looks for it


def per_warp(step: Kernel, variant: Variant) -> bool:
    """A block-mode reduction done by a warp per output."""
    reduced = math.prod(step.shape[d] for d in step.params["dims"])
    return (variant.vec == WIDTH and step.params["kind"] != "prod" and reduced <= _WARP_ROW_MAX
            and math.prod(step.shape) // reduced >= _WARP_ROWS_MIN)


# Put after the head in a module where a reduction takes a warp per output (graph_source).
WARP_COMBINES = r"""__device__ __forceinline__ double ks_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ void ks_warp_arg(float& v, long long& i, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
        const long long i2 = __shfl_xor_sync(0xffffffffu, i, o);
        ks_arg_merge(v, i, v2, i2, is_max);
    }
}
"""
# The block-mode body of one output, its block a warp: the thread index the lane, the block's size 32, its combines
# the warp's shuffles (every lane ends with the total, as every thread of a block does), its writes the first lane's.
_AS_WARP = (("threadIdx.x", "ks_lane"), ("blockDim.x", "32"), ("ks_block_sum_d(", "ks_warp_sum_d("),
            ("ks_block_sum(", "ks_warp_sum("), ("ks_block_pick(", "ks_warp_pick("), ("ks_block_arg(", "ks_warp_arg("))


def _as_warp(body: list[str]) -> list[str]:
    out = []
    for line in body:
        for block, warp in _AS_WARP:
            line = line.replace(block, warp)
        out.append(line)
    return out


# Sliced column reductions. A thread per output is the right grain where the reduced dimensions are not the innermost
# (consecutive outputs lie side by side in memory, so a warp's loads coalesce), but one thread walking the whole
# reduction keeps one load in flight per step: KernelBench's 47_Sum_reduction_over_a_dimension (4096 of 128 x 4096 x
# 4095, over the middle) ran at 0.84x of eager's and 49's max at 0.63x of torch.compile's on the H200. Here a warp
# takes 32 consecutive outputs and the block's warps take interleaved slices of the reduction (warp w: j = w, w + W,
# ...), each thread unrolled four deep; the slices' partials combine through shared memory in slice order, so the
# result is the same in every call.
_SLICED_KINDS = ("sum", "mean", "amax", "amin", "any", "all", "argmax", "argmin")
_SLICED_MIN = 64  # shorter reductions keep a thread per output: a slice of a few elements saves nothing


def _sliced_reduce(name: str, kind: str, load: Any, lines_o: list[str], outs: dict[str, tuple[str, Leaf]], outputs: int,
                   reduced: int, block: int, params: str, host: str, launch: str) -> str:
    slices = block // 32
    tiles = -(-outputs // 32)
    lines, x = load("x")

    def loop(start: str) -> list[str]:
        return ["#pragma unroll 4", f"for (long long j = {start}; j < {reduced}LL; j += {slices}LL) {{",
                *("    " + t for t in lines)]
    if kind in ("argmax", "argmin"):
        # A slice's indices only grow, so an element replaces the best so far where it is strictly better or the
        # first NaN: two selects, where ks_arg_merge's branches on both indices kept the loop at 0.66x of torch.compile
        # (49_Max_reduction_over_a_dimension on the H200). The slice's first element starts it (every slice has one:
        # the reduction is longer than the block has warps).
        init = f"float best = {'-INFINITY' if kind == 'argmax' else 'INFINITY'}; long long at = 0x7fffffffffffffffLL;"
        shared = [f"__shared__ float ks_sv[{slices}][32];", f"__shared__ long long ks_si[{slices}][32];"]
        first, x0 = load("f")
        better = ">" if kind == "argmax" else "<"
        accumulate = ["{", "    const long long j = ks_slice;", *("    " + t for t in first), f"    best = {x0}; at = j;", "}",
                      *loop(f"ks_slice + {slices}LL"),
                      f"    const float v = {x};",
                      f"    const bool take = (v {better} best) || (v != v && best == best);",
                      "    best = take ? v : best; at = take ? j : at;", "}"]
        publish = "ks_sv[ks_slice][ks_lane] = best; ks_si[ks_slice][ks_lane] = at;"
        combine = f"ks_arg_merge(best, at, ks_sv[s][ks_lane], ks_si[s][ks_lane], {'true' if kind == 'argmax' else 'false'});"
        write = _arg_writes(outs)
    else:
        # A slice summing more than LONG_REDUCTION elements accumulates in double, as a thread per output does.
        acc = "double" if kind in ("sum", "mean") and reduced // slices > LONG_REDUCTION else "float"
        init = f"{acc} acc = {_START[kind]};"
        shared = [f"__shared__ {acc} ks_sv[{slices}][32];"]
        accumulate = [*loop("ks_slice"), "    " + update_of(kind).format(x=x), "}"]
        publish = "ks_sv[ks_slice][ks_lane] = acc;"
        combine = update_of(kind).format(x="ks_sv[s][ks_lane]")
        result = f"(float)(acc / {reduced}.0)" if kind == "mean" else "(float)acc"
        write = [f"ks_st({outs['value'][0]}, o, {result});"]
    body = ["const long long o = t * 32LL + ks_lane;", init,
            f"if (o < {outputs}LL) {{", *("    " + t for t in lines_o + accumulate), "}",
            publish, "__syncthreads();",
            f"if (ks_slice == 0 && o < {outputs}LL) {{",
            f"    for (int s = 1; s < {slices}; ++s) {{ {combine} }}", *("    " + t for t in write), "}",
            "__syncthreads();  // the shared partials are rewritten by the next tile"]
    text = "\n".join(["    const int ks_lane = threadIdx.x & 31, ks_slice = threadIdx.x >> 5;", *("    " + t for t in shared),
                      f"    for (long long t = blockIdx.x; t < {tiles}LL; t += gridDim.x) {{", _body(body, 8), "    }"])
    return _wrap(name, params, host, launch, text, True, tiles, block)


# Column reductions on the CPU. A task per output walking down its column reads one element per cache line (a sum over
# the rows of a 1024 x 1024 weight, rewrite.py's column sum, took 0.60x of eager's whole GEMM), and 1024 outputs under
# the loop's grain of 2048 ran on one thread. Here a task takes _CPU_COLUMNS consecutive outputs (consecutive in
# memory where the innermost dim is kept) and walks the reduction once for all of them, each row's run of outputs
# read in order. Every output still accumulates its elements in the same order as a task per output would.
_CPU_COLUMNS = 64


def _cpu_columns(name: str, kind: str, code: tuple[list[str], list[str], list[str], str], kc: tuple[str, ...],
                 outs: dict[str, tuple[str, Leaf]], outputs: int, reduced: int, params: str, host: str, launch: str,
                 fused: list[str] | None = None) -> str:
    """`fused`: a fused consumer's statements for one element (_epilogue_element), run over the tile as the reduction
    is, each output's result read from a register (RMSNorm over the channels: a thread per output had read each
    channel's elements a megabyte apart, twice, at 0.45x of eager)."""
    lines_o, lines_j, lines_x, x = code
    wide = kind in ("sum", "mean") and reduced > LONG_REDUCTION
    update = update_of(kind).format(x=x).replace("acc", "acc[c]")
    result = _accumulated(kind, reduced, wide, "acc[c]")
    tiles = -(-outputs // _CPU_COLUMNS)
    # Each output's kept coordinates are split from its index once per tile, not once per element read: the divisions
    # in the innermost loop kept it scalar (47_Sum_reduction_over_a_dimension at 0.12x of eager on the CPU). Where the
    # tile's outputs are one run of the innermost kept dimension (all but a row's last tile), that coordinate is the
    # first one's plus c and every read is affine in c: the loop over the tile runs in SIMD lanes, an output a lane.
    kept = [k for k in kc if k != "0"]
    split = ["for (long long c = 0; c < n; ++c) {", "    const long long o = o0 + c;", *("    " + t for t in lines_o),
             *(f"    ks_{k}[c] = {k};" for k in kept), "}"]

    def over_tile(coords: list[str], simd: list[str], element: list[str]) -> list[str]:
        inner = [*simd, "for (long long c = 0; c < n; ++c) {", *("    " + t for t in coords + element), "}"]
        return [f"for (long long j = 0; j < {reduced}LL; ++j) {{", *("    " + t for t in lines_j + inner), "}"]

    def tiled(element: list[str]) -> list[str]:
        """`element` over the tile's outputs for every reduced element: in SIMD lanes where the tile is one run."""
        table = over_tile([f"const long long {k} = ks_{k}[c];" for k in kept], [], element)
        if not kept:
            return table
        *outer, last = kept
        run = " && ".join([f"ks_{k}[n - 1] == ks_{k}[0]" for k in outer] + [f"ks_{last}[n - 1] - ks_{last}[0] == n - 1"])
        affine = over_tile([*(f"const long long {k} = ks_{k}[0];" for k in outer), f"const long long {last} = ks_{last}[0] + c;"],
                           ["#pragma omp simd"], element)
        return [f"if ({run}) {{", *("    " + t for t in affine), "} else {", *("    " + t for t in table), "}"]
    body = [f"const long long o0 = t * {_CPU_COLUMNS}LL;",
            f"const long long n = {outputs}LL - o0 < {_CPU_COLUMNS}LL ? {outputs}LL - o0 : {_CPU_COLUMNS}LL;",
            f"{'double' if wide else 'float'} acc[{_CPU_COLUMNS}];",
            *(f"long long ks_{k}[{_CPU_COLUMNS}];" for k in kept), *split,
            f"for (long long c = 0; c < n; ++c) acc[c] = {_START[kind]};", *tiled([*lines_x, update])]
    if fused is None:
        body.append(f"for (long long c = 0; c < n; ++c) ks_st({outs['value'][0]}, o0 + c, {result});")
    else:
        body += [f"float ks_r_values[{_CPU_COLUMNS}];",
                 f"for (long long c = 0; c < n; ++c) {{ ks_r_values[c] = {result}; "
                 f"ks_st({outs['value'][0]}, o0 + c, ks_r_values[c]); }}",
                 *tiled(["const float ks_r_value = ks_r_values[c];", *fused])]
    text = (f"    at::parallel_for(0, {tiles}LL, 1, [&](int64_t begin, int64_t end) {{\n"
            f"    for (long long t = begin; t < end; ++t) {{\n{_body(body, 8)}\n    }}\n    }});")
    return _wrap(name, params, host, launch, text, False, tiles, 1)


def _accumulated(kind: str, reduced: int, wide: bool, acc: str) -> str:
    """A reduction's float result from its accumulator `acc` (double where `wide`): a mean divides by the count."""
    if kind == "mean":
        return f"(float)({acc} / {reduced}.0)" if wide else f"{acc} / (float){reduced}"
    return f"(float){acc}" if wide else acc


def _epilogue(plan: GraphPlan, step: Kernel, then: Kernel, coords: tuple[str, ...], lines_j: list[str],
              types: dict[str, str], unroll: list[str], results: dict[str, str], reduced: int,
              nest: Callable[..., list[str]] | None = None) -> list[str]:
    """A fused consumer's elements of output o (fused_steps), the reduction's results read from registers. `nest`: on
    the CPU, _reduce's loops over the reduced elements (each element's store its own, so in SIMD lanes)."""
    element = _epilogue_element(plan, step, then, coords, types, results)
    if nest is not None:
        return nest(lines_j + element[:-1], element[-1:], "")
    return [*unroll, f"for (long long j = 0; j < {reduced}LL; ++j) {{", *("    " + t for t in lines_j + element), "}"]


def _epilogue_element(plan: GraphPlan, step: Kernel, then: Kernel, coords: tuple[str, ...], types: dict[str, str],
                      results: dict[str, str]) -> list[str]:
    """A fused consumer's statements for its element at `coords`, its store last."""
    ev = Eval(plan, _bases(step), "e", types)
    ev.override = results
    value = ev.at(then.source, coords)
    (_, leaf), = then.outputs
    out = f"q{_out_bases(step).index(leaf.source)}"
    return [*ev.lines, f"ks_st({out}, {offset_expr(leaf, coords)}, {value});"]


# Split reductions: where a reduction has too few outputs to fill the GPU with a block each (a loss over the whole
# tensor had one block; KernelBench's 40_LayerNorm 16 blocks for 64 Mi elements), every output's reduction is cut into
# contiguous chunks, a block each. Each block writes its partial to a device array; the last block of an output to
# finish (a counter per output, after a fence) combines the partials in a fixed order and writes the result, so the
# sum is the same in every call and there is one launch. The last block also resets the counter for the next call.
_SPLIT_KINDS = ("sum", "mean", "amax", "amin", "any", "all", "argmax", "argmin", "var_mean")
_SPLIT_BLOCKS = 1056  # blocks to aim for: 8 of 256 threads on each of an H100's 132 SMs
_SPLIT_MIN_CHUNK = 4096  # elements per block at least: below this, the combine costs more than the split saves


def reduce_splits(outputs: int, reduced: int) -> int:
    """Blocks per output for a block-per-output reduction (1: not split)."""
    if outputs >= _SPLIT_BLOCKS // 4:
        return 1
    return max(1, min(-(-_SPLIT_BLOCKS // outputs), reduced // _SPLIT_MIN_CHUNK))


# A reduction's starting value, before its first element.
_START = {"sum": "0.0f", "mean": "0.0f", "prod": "1.0f", "amax": "-INFINITY", "amin": "INFINITY", "any": "0.0f",
          "all": "1.0f"}


def _arg_writes(outs: dict[str, tuple[str, Leaf]]) -> list[str]:
    """An argmax/argmin's stores of output o: its value and index, whichever the graph uses."""
    return ([f"ks_st({outs['value'][0]}, o, best);"] if "value" in outs else []) + \
        ([f"ks_sti({outs['index'][0]}, o, at);"] if "index" in outs else [])


def update_of(kind: str) -> str:
    """A reduction's accumulation of one value {x} into `acc`."""
    return {"sum": "acc += {x};", "mean": "acc += {x};", "prod": "acc *= {x};",
            "amax": "acc = ks_pick(acc, {x}, true);", "amin": "acc = ks_pick(acc, {x}, false);",
            "any": "acc = (acc != 0.0f || {x} != 0.0f) ? 1.0f : 0.0f;",
            "all": "acc = (acc != 0.0f && {x} != 0.0f) ? 1.0f : 0.0f;"}[kind]


# ---------------------------------------------------------------------------- float4 reads (vectorize.py)

_VECTOR_KINDS = ("sum", "mean", "amax", "amin", "any", "all", "var_mean")


class _Lanes(NamedTuple):
    loads: list[str]  # the float4 loads at element j
    lanes: list[tuple[list[str], str]]  # elements j..j+3: each one's statements and value
    pointers: list[str]  # the kernel parameters loaded as float4 (checked for 16-byte alignment at launch)


def _vector_lanes(plan: GraphPlan, step: Kernel, coords: tuple[str, ...], types: dict[str, str]) -> _Lanes | None:
    """A reduction's elements j..j+3 (vectorize.vector_reads): every read either one of the float4s or the same for
    the four, so each lane is evaluated at the output's element 0 and the loads add j."""
    reads = vector_reads(step, types)
    if reads is None:
        return None
    lanes = _lanes_at_j(plan, step, reads, coords, types, "x", [step.source])
    return lanes._replace(lanes=[(lines, values[0]) for lines, values in lanes.lanes])


def _lanes_at_j(plan: GraphPlan, step: Kernel, reads: list[Leaf], coords: tuple[str, ...], types: dict[str, str],
                prefix: str, sources: list[Any]) -> _Lanes:
    """`sources` at a reduction's elements j..j+3, `reads` loaded as float4s at the output's element 0 plus j (each
    lane's values a list, one per source)."""
    zero = tuple("0" if d in step.params["dims"] else c for d, c in enumerate(coords))

    def at_j(leaf: Leaf) -> str:
        base = trailing_offset_expr(leaf, zero)
        return "j" if base == "0" else f"{base} + j"
    return _four_lanes_of(plan, step, types, reads, at_j, lambda _lane: zero, prefix, sources)


def _four_lanes(plan: GraphPlan, step: Kernel, types: dict[str, str], reads: list[Leaf], load_at: Any, lane_coords: Any,
                prefix: str) -> _Lanes:
    """`step`'s source at four consecutive elements: `reads` loaded once each as a float4 at index load_at(leaf), lane k
    evaluated at lane_coords(k) with those views read from the float4's k-th component."""
    lanes = _four_lanes_of(plan, step, types, reads, load_at, lane_coords, prefix, [step.source])
    return lanes._replace(lanes=[(lines, values[0]) for lines, values in lanes.lanes])


def _four_lanes_of(plan: GraphPlan, step: Kernel, types: dict[str, str], reads: list[Leaf], load_at: Any,
                   lane_coords: Any, prefix: str, sources: list[Any]) -> _Lanes:
    """_four_lanes for several values of the same elements (sibling reductions): each lane's statements once, and a
    list of values, one per source."""
    bases = _bases(step)
    loads = [f"const float4 ks_w{n} = *reinterpret_cast<const float4*>(&p{bases.index(r.source)}[{load_at(r)}]);"
             for n, r in enumerate(reads)]
    lanes = []
    for lane, part in enumerate("xyzw"):
        ev = Eval(plan, bases, f"{prefix}{lane}_", types)
        ev.leaf_override = {r: f"ks_w{n}.{part}" for n, r in enumerate(reads)}
        values = [ev.at(source, lane_coords(lane)) for source in sources]
        lanes.append((ev.lines, values))
    return _Lanes(loads, lanes, sorted({f"p{bases.index(r.source)}" for r in reads}))


def _with_vec_flag(params: str, host: str, launch: str, pointers: list[str]) -> tuple[str, str, str]:
    """The kernel's argument ks_vec: whether every pointer read or written as float4 is 16-byte aligned, decided at
    launch (a tensor at an odd storage offset takes the scalar loop)."""
    aligned = " && ".join(f"reinterpret_cast<uintptr_t>({p}) % 16 == 0" for p in pointers)
    return f"{params}, const bool ks_vec", f"{host}\n    const bool ks_vec = {aligned};", f"{launch}, ks_vec"


def _vector_loop(lanes: _Lanes, start: str, end: str, update: str | Callable[[Any], str], parts: int = 1) -> list[str]:
    """Elements start, start + 4 parts blockDim, ... below end (multiples of 4 apart from 0), four per thread each
    step (parts: how many blocks share the line, interleaved). `update`: a lane's accumulation of its value {x}, or
    of its values (sibling reductions) as a function."""
    body = ["#pragma unroll 2", f"for (long long j = {start}; j < {end}; j += {WIDTH * parts}LL * blockDim.x) {{",
            *("    " + t for t in lanes.loads)]
    for lines, value in lanes.lanes:  # each update in a scope of its own (var_mean's declares its difference)
        text = update(value) if callable(update) else update.format(x=value)
        body += ["    " + t for t in lines] + ["    { " + text + " }"]
    return body + ["}"]


def _sibling_reduce(plan: GraphPlan, step: Kernel, name: str, variant: Variant, params: str, host: str, launch: str,
                    types: dict[str, str], lines_o: list[str], lines_j: list[str], coords: tuple[str, ...]) -> str:
    """Block sums over the same elements (_with_siblings): an accumulator each, every operand of an element loaded
    once for all of them, four floats at a time where every operand allows."""
    members = [step, *step.params["siblings"]]
    reduced = math.prod(step.shape[d] for d in step.params["dims"])
    outputs = math.prod(step.shape) // reduced
    ev = Eval(plan, _bases(step), "x", types)
    values = [ev.at(member.source, coords) for member in members]
    accumulate = lambda vs: " ".join(f"acc{m} += {v};" for m, v in enumerate(vs))  # noqa: E731
    loop = [f"for (long long j = threadIdx.x; j < {reduced}LL; j += blockDim.x) {{",
            *("    " + t for t in lines_j + ev.lines), f"    {accumulate(values)}", "}"]
    combined = members[0].source
    for member in members[1:]:  # one value reading every member's operands: which of them load as float4 together
        combined = Expr("add", (combined, member.source), (), step.shape)
    reads = vector_reads(Kernel("reduce", combined, step.outputs, step.shape, step.params), types) \
        if variant.vec == WIDTH else None
    if reads is not None:
        lanes = _lanes_at_j(plan, step, reads, coords, types, "y", [member.source for member in members])
        loop = _either(_vector_loop(lanes, f"{WIDTH}LL * threadIdx.x", f"{reduced}LL", accumulate), loop)
        params, host, launch = _with_vec_flag(params, host, launch, lanes.pointers)
    outs = _out_bases(step)
    body = [*(f"float acc{m} = 0.0f;" for m in range(len(members))), *loop]
    for m, member in enumerate(members):
        ((_, leaf),) = member.outputs
        mean = f" / (float){reduced}" if member.params["kind"] == "mean" else ""
        body += [f"acc{m} = ks_block_sum(acc{m});", f"if (threadIdx.x == 0) ks_st(q{outs.index(leaf.source)}, o, acc{m}{mean});"]
    return _per_output(step, name, variant, params, host, launch, lines_o, body, outputs)


def _either(vector: list[str], scalar: list[str]) -> list[str]:
    return ["if (ks_vec) {", *("    " + t for t in vector), "} else {", *("    " + t for t in scalar), "}"]


def _split_state(name: str, kind: str, outputs: int, splits: int) -> str:
    parts = outputs * splits
    if kind == "var_mean":
        arrays = f"__device__ double {name}_p1[{parts}];\n__device__ double {name}_p2[{parts}];\n"
    elif kind in ("argmax", "argmin"):
        arrays = f"__device__ float {name}_pv[{parts}];\n__device__ long long {name}_pi[{parts}];\n"
    else:
        arrays = f"__device__ float {name}_pv[{parts}];\n"
    return arrays + f"__device__ unsigned int {name}_done[{outputs}] = {{}};\n"


def _split_body(name: str, kind: str, load: Any, lines_o: list[str], outs: dict[str, tuple[str, Leaf]], outputs: int,
                reduced: int, splits: int, correction: Any, lanes: _Lanes | None = None) -> str:
    # The parts interleave, a tile of blockDim (four blockDim) elements each in turn, so that the blocks of an output
    # sweep its elements together: on the H200 a sum over 2^30 pairs took 1.86 ms so against 2.06 ms in one contiguous
    # chunk per block (1056 blocks of 256; torch.compile 1.89 ms; docs/benchmarks.md §14, session 29).
    lines, x = load("x")
    loop = ["#pragma unroll 4", f"for (long long j = part * blockDim.x + threadIdx.x; j < {reduced}LL; "
            f"j += {splits}LL * blockDim.x) {{", *("    " + t for t in lines)]
    start = f"{WIDTH}LL * (part * blockDim.x + threadIdx.x)"
    at = "o * {S}LL + part".format(S=splits)
    read = "o * {S}LL + p".format(S=splits)
    is_max = "true" if kind in ("amax", "argmax") else "false"
    if kind == "var_mean":
        vector = None if lanes is None else (lambda update: _vector_loop(lanes, start, f"{reduced}LL", update, splits))
        local, (t1, t2) = _shifted_sums(load, loop[:2], "float", vector)
        publish = [f"{name}_p1[{at}] = {t1}; {name}_p2[{at}] = {t2};"]
        gather = ["double a1 = 0.0, a2 = 0.0;",
                  f"for (long long p = threadIdx.x; p < {splits}LL; p += blockDim.x) {{ "
                  f"a1 += *(volatile double*)&{name}_p1[{read}]; a2 += *(volatile double*)&{name}_p2[{read}]; }}",
                  "a1 = ks_block_sum_d(a1); a2 = ks_block_sum_d(a2);"]
        values = _var_mean_values("a1", "a2", reduced, correction)
        final = [f"ks_st({out}, o, {values[what]});" for what, (out, _) in outs.items()]
    elif kind in ("argmax", "argmin"):
        local = [f"float best = {'-INFINITY' if kind == 'argmax' else 'INFINITY'}; long long at = 0x7fffffffffffffffLL;",
                 *loop, f"    ks_arg_merge(best, at, {x}, j, {is_max});", "}", f"ks_block_arg(best, at, {is_max});"]
        publish = [f"{name}_pv[{at}] = best; {name}_pi[{at}] = at;"]
        gather = [f"best = {'-INFINITY' if kind == 'argmax' else 'INFINITY'}; at = 0x7fffffffffffffffLL;",
                  f"for (long long p = threadIdx.x; p < {splits}LL; p += blockDim.x) "
                  f"ks_arg_merge(best, at, *(volatile float*)&{name}_pv[{read}], *(volatile long long*)&{name}_pi[{read}], {is_max});",
                  f"ks_block_arg(best, at, {is_max});"]
        final = _arg_writes(outs)
    else:
        init = _START[kind]
        update = update_of(kind)
        combine = {"sum": "acc = ks_block_sum(acc);", "mean": "acc = ks_block_sum(acc);",
                   "amax": "acc = ks_block_pick(acc, true);", "amin": "acc = ks_block_pick(acc, false);",
                   "any": "acc = ks_block_pick(acc, true);", "all": "acc = -ks_block_pick(-acc, true);"}[kind]
        scalar = [*loop, "    " + update.format(x=x), "}"]
        if lanes is not None:
            scalar = _either(_vector_loop(lanes, start, f"{reduced}LL", update, splits), scalar)
        local = [f"float acc = {init};", *scalar, combine]
        publish = [f"{name}_pv[{at}] = acc;"]
        gather = [f"acc = {init};", f"for (long long p = threadIdx.x; p < {splits}LL; p += blockDim.x) {{ "
                  f"const float v = *(volatile float*)&{name}_pv[{read}]; {update.format(x='v')} }}", combine]
        result = f"acc / (float){reduced}" if kind == "mean" else "acc"
        final = [f"ks_st({outs['value'][0]}, o, {result});"]
    body = [f"const long long o = b / {splits}LL, part = b % {splits}LL;", *lines_o,
            *local,
            "__shared__ bool last;",
            "if (threadIdx.x == 0) {", *("    " + t for t in publish),
            "    __threadfence();",
            f"    last = atomicAdd(&{name}_done[o], 1u) == {splits - 1}u;", "}",
            "__syncthreads();",
            "if (last) {", "    __threadfence();", *("    " + t for t in gather),
            "    if (threadIdx.x == 0) {", *("        " + t for t in final), f"        {name}_done[o] = 0u;", "    }", "}",
            "__syncthreads();  // `last` is read by every thread before the next chunk writes it"]
    return (f"    for (long long b = blockIdx.x; b < {outputs * splits}LL; b += gridDim.x) {{\n"
            f"{_body(body, 8)}\n    }}")


def _shifted_sums(load: Any, loop_head: list[str], accumulate: str,
                  vector: Any = None) -> tuple[list[str], tuple[str, str]]:
    """A block's sums of (x - K) and (x - K)^2 over its elements, K the reduction's first element (the same for every
    block of an output): the variance then needs no second read, and K keeps the cancellation of sum-of-squares-minus-
    square-of-sum small. Each thread accumulates in `accumulate` ("float", or "double" where it sums many elements);
    the block totals are double. Returns the lines and the names of the two totals; K is declared for the caller.
    `vector`: where the reads go four at a time, the float4 loop for a given update (gcodegen's _vector_loop, bound)."""
    shift_lines, shift = load("z")  # not "k": the kept coordinates are k0, k1, ...
    lines, x = load("x")
    zero = "0.0" if accumulate == "double" else "0.0f"
    update = f"const {accumulate} d = {_minus(accumulate, '{x}', 'K')}; s1 += d; s2 += d * d;"
    loop = [*loop_head, *("    " + t for t in lines), "    " + update.format(x=x), "}"]
    if vector is not None:
        loop = _either(vector(update), loop)
    return (["float K;", "{", "    const long long j = 0;", *("    " + t for t in shift_lines), f"    K = {shift};", "}",
             f"{accumulate} s1 = {zero}, s2 = {zero};", *loop,
             "const double t1 = ks_block_sum_d(s1), t2 = ks_block_sum_d(s2);"], ("t1", "t2"))


def _minus(accumulate: str, x: str, shift: str) -> str:
    """x - shift in the accumulator's type. In double, the difference is taken in double: a float32 difference of
    values far from their shift rounds with a bias the sum keeps (KernelBench level 2's 23_Conv3d_GroupNorm_Mean at
    inputs x100: a group's mean 2.3e-7 off, against 4e-9 for the float32 value nearest the true one)."""
    return f"(double){x} - {shift}" if accumulate == "double" else f"({x} - {shift})"


def _var_mean_values(t1: str, t2: str, reduced: int, correction: Any) -> dict[str, str]:
    """var, mean and std from the shifted sums' totals (double) over `reduced` elements, K the shift."""
    n = f"(double){reduced}"
    values = {"mean": f"(float)((double)K + {t1} / {n})",
              "var": f"(float)(fmax(0.0, {t2} - {t1} * {t1} / {n}) / fmax(0.0, {n} - (double){ops.literal(correction)}))"}
    values["std"] = f"sqrtf({values['var']})"
    return values


def _pool(plan: GraphPlan, step: Kernel, name: str, variant: Variant, cuda: bool, params: str, host: str,
          launch: str, types: dict[str, str]) -> str:
    p = step.params
    spatial, in_shape = p["spatial"], tuple(p["in_shape"])
    outs = _outputs(step)
    first = step.outputs[0][1]
    out_shape = first.shape
    count = math.prod(out_shape)
    lead = len(out_shape) - spatial
    lines, oc = decompose("i", out_shape, "o")
    sizes = in_shape[lead:]
    coords = list(oc[:lead])
    loops_open, loops_close = [], []
    for d in range(spatial):
        o, size = oc[lead + d], sizes[d]
        osize = out_shape[lead + d]
        if p["adaptive"]:
            lines += [f"const long long s{d} = ({o} * {size}LL) / {osize}LL;",
                      f"const long long e{d} = (({o} + 1) * {size}LL + {osize}LL - 1) / {osize}LL;"]
            loops_open.append(f"for (long long w{d} = s{d}; w{d} < e{d}; ++w{d}) {{")
            coords.append(f"w{d}")
        else:
            k, s, pad, dil = p["kernel"][d], p["stride"][d], p["padding"][d], p["dilation"][d]
            lines += [f"const long long s{d} = {o} * {s}LL - {pad}LL;"]
            if p["kind"] == "avg":
                lines += [f"const long long h{d} = s{d} + {k}LL < {size + pad}LL ? s{d} + {k}LL : {size + pad}LL;",
                          f"const long long n{d} = h{d} - s{d};"]
            # A window of constant size, unrolled: the pooling is instruction-bound, not memory-bound (KernelBench's
            # 41_Max_Pooling_1D, 8 taps a window: 34% of its roof, 0.64x of torch.compile on the H200).
            loops_open += ["#pragma unroll"] if cuda else []
            loops_open.append(f"for (long long u{d} = 0; u{d} < {k}LL; ++u{d}) {{ const long long w{d} = s{d} + u{d} * {dil}LL;"
                              f" if (w{d} < 0 || w{d} >= {size}LL) continue;")
            coords.append(f"w{d}")
        loops_close.append("}")
    ev = Eval(plan, _bases(step), "x", types)
    value = ev.at(step.source, tuple(coords))
    flat = " + ".join(f"w{d} * {math.prod(sizes[d + 1:])}LL" for d in range(spatial))
    if p["kind"] == "max" and "index" not in outs:
        # The value alone: NaN wins and stays, as in PyTorch; no index to track.
        init = ["float best = -INFINITY;"]
        update = [f"if (({value} > best || {value} != {value}) && best == best) best = {value};"]
        write = [f"ks_st({outs['value'][0]}, i, best);"]
    elif p["kind"] == "max":
        init = ["float best = -INFINITY; long long at = -1;"]
        update = [f"if (at < 0 || {value} > best || {value} != {value}) {{ if (best == best) {{ best = {value}; at = {flat}; }} }}"]
        write = [f"ks_st({outs['value'][0]}, i, best);"] if "value" in outs else []
        if "index" in outs:
            write.append(f"ks_sti({outs['index'][0]}, i, at);")
    else:
        init = ["float acc = 0.0f; long long n = 0;"]
        update = [f"acc += {value}; ++n;"]
        if p["adaptive"]:
            divisor = "(float)n"
        elif p.get("divisor"):
            divisor = ops.literal(float(p["divisor"]))
        elif p["count_include_pad"]:
            divisor = "(float)(" + " * ".join(f"n{d}" for d in range(spatial)) + ")"
        else:
            divisor = "(float)n"
        write = [f"ks_st({outs['value'][0]}, i, acc / {divisor});"]
    body = lines + init + loops_open + ["    " + s for s in ev.lines + update] + loops_close + write
    window = -(-math.prod(sizes) // math.prod(out_shape[lead:])) if p["adaptive"] else math.prod(p["kernel"])
    text = _grid_loop(cuda, count, variant.block, _body(body, 8), each=window)
    return _wrap(name, params, host, launch, text, cuda, -(-count // variant.block), variant.block)


def _scan(plan: GraphPlan, step: Kernel, name: str, variant: Variant, cuda: bool, params: str, host: str,
          launch: str, types: dict[str, str]) -> str:
    shape, dim, kind = step.shape, step.params["dim"], step.params["kind"]
    lines_shape = shape[:dim] + shape[dim + 1:]
    count = math.prod(lines_shape)
    lines, lc = decompose("i", lines_shape, "l")
    coords = list(lc[:dim]) + ["s"] + list(lc[dim:])
    ev = Eval(plan, _bases(step), "x", types)
    value = ev.at(step.source, tuple(coords))
    out, leaf = _outputs(step)["value"]
    tile = aten_scan_tile(count, shape[dim]) if cuda and dim == len(shape) - 1 and kind == "prod" and count > 1 \
        and plan.buffers[leaf.source][1] == "float32" else None
    if tile is not None:
        return _eager_order_scan(step, name, variant, params, host, launch, lines, ev, value, out,
                                 offset_expr(leaf, tuple(coords)), count, tile)
    if cuda and dim == len(shape) - 1 and shape[dim] >= _BLOCK_SCAN_MIN:
        if variant.vec == WIDTH:
            return _block_scan4(plan, step, name, variant, params, host, launch, types, lines, tuple(coords), out, leaf,
                                count)
        return _block_scan(step, name, variant, params, host, launch, lines, ev, value, out,
                           offset_expr(leaf, tuple(coords)), count)
    acc = "acc += " if kind == "sum" else "acc *= "
    body = lines + [f"float acc = {'0.0f' if kind == 'sum' else '1.0f'};",
                    f"for (long long s = 0; s < {shape[dim]}LL; ++s) {{", *("    " + x for x in ev.lines),
                    f"    {acc}{value};", f"    ks_st({out}, {offset_expr(leaf, tuple(coords))}, acc);", "}"]
    text = _grid_loop(cuda, count, variant.block, _body(body, 8), each=shape[dim])
    return _wrap(name, params, host, launch, text, cuda, -(-count // variant.block), variant.block)


# A scan along the innermost dimension of a long line is a block per line on CUDA: a thread per element of a tile of
# blockDim elements (adjacent threads, adjacent addresses), a scan within each warp by shuffles, then of the warps'
# totals, plus the carry of the tiles before. A thread per line, as below it, reads lines whose elements lie a line's
# length apart across a warp: every load its own memory sector (KernelBench's 89_cumsum: 32768 lines of 32768).
_BLOCK_SCAN_MIN = 512


def _block_scan(step: Kernel, name: str, variant: Variant, params: str, host: str, launch: str, lines: list[str],
                ev: Eval, value: str, out: str, offset: str, count: int) -> str:
    length, kind = step.shape[-1], step.params["kind"]
    init, op = ("0.0f", "+") if kind == "sum" else ("1.0f", "*")
    body = [*lines, f"float carry = {init};",
            f"for (long long base = 0; base < {length}LL; base += blockDim.x) {{",
            "    const long long s = base + threadIdx.x;",
            f"    float v = {init};",
            f"    if (s < {length}LL) {{", *("        " + x for x in ev.lines), f"        v = {value};", "    }",
            *("    " + t for t in _scan_threads(op, init, [])),
            f"    v = carry {op} ((warp > 0 ? wsum[warp - 1] : {init}) {op} v);",
            f"    if (s < {length}LL) ks_st({out}, {offset}, v);",
            f"    carry = carry {op} wsum[warps - 1];",
            "    __syncthreads();  // wsum is written again by the next tile", "}"]
    return _block_per_line(name, params, host, launch, body, count, variant.block)


# A float32 product scan along the innermost dimension takes eager's own order of multiplications. A product's rounding
# does not depend on the order, but its overflow does: a prefix that overflows in one bracketing can stay finite in
# another, and the engine's scaled trials reach float32's range (KernelBench's 90_cumprod: 11 of 2^30 elements inf in
# eager and finite in a float4 tile scan). ATen (ScanUtils.cuh, tensor_kernel_scan_innermost_dim) scans each line in
# tiles of 2 * 2^log_x elements: the carry of the tiles before multiplies the tile's first element, then a Sklansky
# network (at stage s, every element with bit s of its index set multiplies by the last element of the half-block below
# it), the tile's last element the next carry. The same network here: stages inside a warp by shuffles, across the
# tile's warps through shared memory; a line per tile-wide group of threads, four tiles' loads issued at once.
_SCAN_UNROLL = 4


def aten_scan_tile(lines: int, length: int) -> int | None:
    """Elements per tile of eager's innermost-dimension scan (get_log_num_threads_x_inner_scan), or None where
    PyTorch's versions differ: an unsigned wrap-around when the lines outnumber the length by 2^9 and more."""
    log_x = 9 + (length - 1).bit_length() - (lines - 1).bit_length()
    if log_x < 0:
        return None
    return 2 << min(max(4, log_x // 2), 9)


def _eager_order_scan(step: Kernel, name: str, variant: Variant, params: str, host: str, launch: str,
                      lines: list[str], ev: Eval, value: str, out: str, offset: str, count: int, tile: int) -> str:
    length, op, init = step.shape[-1], "*", "1.0f"
    rows = max(1, variant.block // tile)  # lines per block, as ATen's blockDim.y
    warps = tile // 32
    body = [f"const int lane = threadIdx.x & 31, e = threadIdx.x & {tile - 1}, row = threadIdx.x / {tile}, "
            "w = e >> 5;"]
    if warps > 1:
        body.append(f"__shared__ float tot[2][{rows * warps}];  // each warp's last element; two, by tile parity")
    body += [f"for (long long first = (long long)blockIdx.x * {rows}; first < {count}LL; "
             f"first += (long long)gridDim.x * {rows}) {{",
             "    const long long i = first + row;",
             f"    const bool live = i < {count}LL;  // every thread takes part in the shuffles and barriers",
             *("    " + t for t in lines),
             f"    float carry = {init};",
             f"    for (long long base = 0; base < {length}LL; base += {_SCAN_UNROLL * tile}LL) {{"]
    for u in range(_SCAN_UNROLL):
        body += [f"        float v{u} = {init};",
                 f"        {{ const long long s = base + {u * tile} + e; if (live && s < {length}LL) {{",
                 *("            " + t for t in ev.lines), f"            v{u} = {value};", "        } }"]
    for u in range(_SCAN_UNROLL):
        stages = [f"if (e == 0) v = v {op} carry;",
                  f"for (int o = 1; o < {min(tile, 32)}; o <<= 1) {{",
                  "    const float n = __shfl_sync(0xffffffffu, v, (lane & ~(2 * o - 1)) | (o - 1));",
                  f"    if (lane & o) v = v {op} n;", "}"]
        if warps > 1:
            t = f"tot[{u % 2}][row * {warps} + "
            stages += [f"if (lane == 31) {t}w] = v;", "__syncthreads();",
                       f"for (int o = 1; o < {warps}; o <<= 1) {{",
                       f"    if (w & o) {{ v = v {op} {t}((w & ~(2 * o - 1)) | (o - 1))]; if (lane == 31) {t}w] = v; }}",
                       "    __syncthreads();", "}",
                       f"carry = {t}{warps - 1}];"]
        else:
            stages.append("carry = __shfl_sync(0xffffffffu, v, 31);")
        stages += [f"{{ const long long s = base + {u * tile} + e; if (live && s < {length}LL) ks_st({out}, {offset}, v); }}"]
        body += [f"        if (base + {u * tile} < {length}LL) {{  // the same for every thread of the block",
                 f"            float v = v{u};", *("            " + t for t in stages), "        }"]
    body += ["    }", "}"]
    return _wrap(name, params, host, launch, _body(body, 4), True, -(-count // rows), rows * tile)


def _scan_threads(op: str, init: str, before_barrier: list[str]) -> list[str]:
    """Each thread's value v scanned (inclusive) across its warp, then the warps' totals across the block into
    wsum (wsum[w]: the total up to and including warp w); `before_barrier` runs once v is scanned."""
    return ["for (int o = 1; o < 32; o <<= 1) {",
            f"    const float n = __shfl_up_sync(0xffffffffu, v, o); if (lane >= o) v = n {op} v;", "}",
            "if (lane == 31) wsum[warp] = v;", *before_barrier,
            "__syncthreads();",
            "if (warp == 0) {",
            f"    float t = lane < warps ? wsum[lane] : {init};",
            "    for (int o = 1; o < 32; o <<= 1) {",
            f"        const float n = __shfl_up_sync(0xffffffffu, t, o); if (lane >= o) t = n {op} t;", "    }",
            "    wsum[lane] = t;", "}",
            "__syncthreads();"]


def _block_per_line(name: str, params: str, host: str, launch: str, body: list[str], count: int, block: int) -> str:
    text = ("    __shared__ float wsum[32];\n    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, "
            "warps = (blockDim.x + 31) >> 5;\n"
            f"    for (long long i = blockIdx.x; i < {count}LL; i += gridDim.x) {{\n{_body(body, 8)}\n    }}")
    return _wrap(name, params, host, launch, text, True, count, block)


def _block_scan4(plan: GraphPlan, step: Kernel, name: str, variant: Variant, params: str, host: str, launch: str,
                 types: dict[str, str], lines: list[str], coords: tuple[str, ...], out: str, leaf: Leaf,
                 count: int) -> str:
    """_block_scan with four consecutive elements per thread (a tile of 4 blockDim): each thread scans its four, the
    warps and the block scan the threads' totals, so a line takes a quarter of the tiles and their barriers; float4
    loads and stores where the operands allow (vectorize.py), checked for alignment at launch. A line whose length is
    not a multiple of four (KernelBench's 92_cumsum_exclusive scans 32767 of each 32768; it took the one-element tile,
    at 0.45x of torch.compile on the H200) reads and writes each of the four on its own, guarded."""
    length, kind = step.shape[-1], step.params["kind"]
    init, op = ("0.0f", "+") if kind == "sum" else ("1.0f", "*")
    four = pointwise_vector_reads(step, leaf, types) if length % WIDTH == 0 else None
    reads, store = four if four is not None else ([], False)
    ragged = length % WIDTH != 0
    at_s = coords.index("s")

    def lane_at(lane: int) -> tuple[str, ...]:
        return tuple(f"(s + {lane})" if n == at_s else c for n, c in enumerate(coords))

    def lanes_of(four_reads: list[Leaf]) -> _Lanes:
        return _four_lanes(plan, step, types, four_reads, lambda r: trailing_offset_expr(r, lane_at(0)), lane_at, "x")

    def tile(lanes: _Lanes, vector: bool) -> list[str]:
        load = list(lanes.loads)
        for lane, (lane_lines, value) in enumerate(lanes.lanes):
            if ragged and lane > 0:  # lane 0 is inside the line wherever the tile's guard lets it through
                load += [f"if (s + {lane} < {length}LL) {{", *("    " + t for t in lane_lines), f"    a{lane} = {value};", "}"]
            else:
                load += lane_lines + [f"a{lane} = {value};"]
        if vector and store:
            write = [f"*reinterpret_cast<float4*>(&{out}[{offset_expr(leaf, lane_at(0))}]) = "
                     f"make_float4(prefix {op} a0, prefix {op} a1, prefix {op} a2, prefix {op} a3);"]
        else:
            write = [(f"if (s + {lane} < {length}LL) " if ragged and lane > 0 else "")
                     + f"ks_st({out}, {offset_expr(leaf, lane_at(lane))}, prefix {op} a{lane});" for lane in range(WIDTH)]
        return [f"float carry = {init};",
                f"for (long long base = 0; base < {length}LL; base += {WIDTH}LL * blockDim.x) {{",
                f"    const long long s = base + {WIDTH}LL * threadIdx.x;",
                f"    float a0 = {init}, a1 = {init}, a2 = {init}, a3 = {init};",
                f"    if (s < {length}LL) {{", *("        " + t for t in load), "    }",
                f"    a1 = a0 {op} a1; a2 = a1 {op} a2; a3 = a2 {op} a3;  // the thread's own four, inclusive",
                "    float v = a3;",
                *("    " + t for t in _scan_threads(op, init, [
                    f"float ex = __shfl_up_sync(0xffffffffu, v, 1); if (lane == 0) ex = {init};  // the lanes before"])),
                f"    const float prefix = carry {op} ((warp > 0 ? wsum[warp - 1] : {init}) {op} ex);",
                f"    if (s < {length}LL) {{", *("        " + t for t in write), "    }",
                f"    carry = carry {op} wsum[warps - 1];",
                "    __syncthreads();  // wsum is written again by the next tile", "}"]

    scalar = tile(lanes_of([]), False)
    if reads or store:
        vector = lanes_of(reads)
        body = [*lines, *_either(tile(vector, True), scalar)]
        params, host, launch = _with_vec_flag(params, host, launch, vector.pointers + ([out] if store else []))
    else:
        body = [*lines, *scalar]
    return _block_per_line(name, params, host, launch, body, count, variant.block)
