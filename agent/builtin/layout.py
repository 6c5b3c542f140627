"""Channels-last convolutions for a whole-graph plan (graph.py): a variant the search measures, never assumed.

On the H200, KernelBench level 2's convolution epilogues ran at 0.43-0.46x of torch.compile although their
epilogue was one fused pass: the time is in the convolution itself, which cuDNN runs faster on NHWC (channels-last)
tensors than on PyTorch's default NCHW, and inductor's layout optimisation converts convolutions to channels-last.
In this variant every 2D/3D convolution gets its input in channels-last (a copy per call, unless it already is; its
weight is held channels-last from construction) and leaves its output channels-last. A generated kernel that reads that output then addresses its physical
layout directly (each view's strides mapped onto the channels-last strides), so the layout costs no extra pass;
where a view cannot be mapped (a reshape that merges the channel dimension with another), where another library
call reads the output, or where it is the module's own output, the output is copied back to NCHW as PyTorch's
default layout, which the module's caller sees, requires.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from agent.builtin.graph import GraphPlan, Kernel, Library
from agent.builtin.lower import Expr, Leaf, contiguous

FORMATS = {4: "channels_last", 5: "channels_last_3d"}  # dimensions -> torch.memory_format name
CPP_FORMATS = {"channels_last": "at::MemoryFormat::ChannelsLast", "channels_last_3d": "at::MemoryFormat::ChannelsLast3d"}


def layout_convolutions(plan: GraphPlan) -> list[Library]:
    """The plan's convolutions whose layout can change: 2D and 3D (plain or transposed)."""
    return [s for s in plan.steps if isinstance(s, Library) and s.op == "convolution"
            and isinstance(s.args[0], Leaf) and len(s.args[0].shape) in FORMATS]


def memory_format(shape: tuple[int, ...]) -> str:
    return FORMATS[len(shape)]


def physical_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A channels-last tensor's strides: channels innermost, then the spatial dimensions, batch outermost."""
    order = [0, *range(2, len(shape)), 1]  # outermost to innermost
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def channels_last(plan: GraphPlan) -> GraphPlan:
    """The plan with every convolution output that generated kernels alone read kept channels-last: `layouts` names
    those buffers, and every view of them is rewritten to their physical strides."""
    outputs = {s.output: plan.buffers[s.output][0] for s in layout_convolutions(plan)}
    for step in plan.steps:  # another library call, or the module's caller, reads the logical NCHW layout
        if isinstance(step, Library):
            for a in step.args:
                if isinstance(a, Leaf):
                    outputs.pop(a.source, None)
    for name in plan.outputs:
        outputs.pop(name, None)
    for step in plan.kernels():
        for leaf in _kernel_leaves(step, []):
            if leaf.source in outputs and _mapped(leaf, outputs[leaf.source]) is None:
                outputs.pop(leaf.source)
    if not outputs:
        return dataclasses.replace(plan, layouts={})
    steps = [_rewrite(s, outputs) if isinstance(s, Kernel) else s for s in plan.steps]
    return dataclasses.replace(plan, steps=steps, layouts={b: memory_format(shape) for b, shape in outputs.items()})


# A tile of TILE positions x TILE channels per block of TILE x TILE_ROWS threads (tiled_reads).
TILE, TILE_ROWS = 32, 8
_GRID_YZ = 65535  # gridDim.y's and gridDim.z's limit


def tiled_reads(plan: GraphPlan, step: Kernel, direct: list[Leaf], remapped: list[Leaf], types: dict[str, str]) -> list[Leaf]:
    """The channels-last buffers a pointwise kernel reads at its own element through a shared-memory tile: where the
    kernel writes a fresh NCHW (NCDHW) buffer element by element and reads a channels-last one at the same
    coordinates, a warp walking the output's innermost dimension would read one float per 32-byte sector of the input
    (its neighbours lie C floats apart). Staging a tile of TILE positions x TILE channels through shared memory reads
    the input along its channels and writes the output along its positions, both coalesced: the transpose cuDNN and
    inductor do, in the same pass as the epilogue. Empty where that does not apply (any other kernel, layout or view;
    a leaf also read at other coordinates; a grid past CUDA's limits)."""
    shape = step.shape
    if step.kind != "pointwise" or len(shape) not in FORMATS or not plan.layouts:
        return []
    out = dict(step.outputs).get("value")
    channels, positions = shape[1], math.prod(shape[2:])
    if len(step.outputs) != 1 or out is None or out.offset or out.strides != contiguous(shape) or positions < 2 \
            or -(-channels // TILE) > _GRID_YZ or shape[0] > _GRID_YZ or math.prod(shape) >= 2**31:
        return []
    physical = physical_strides(shape)
    return list(dict.fromkeys(
        leaf for leaf in direct if leaf.source in plan.layouts and types.get(leaf.source) == "float"
        and leaf.shape == shape and leaf.offset == 0 and leaf.strides == physical and leaf not in remapped))


# NCHW (NCDHW) float32 to channels-last, one pass through shared-memory tiles: read along the positions, written along
# the channels. PyTorch's .contiguous(memory_format=...) runs its generic strided copy: 0.57 ms for KernelBench 2/1's
# 537 MB input on the H200, where inductor's tiled Triton kernel takes 0.25 ms (benchmarks.md §14, session 27).
TO_CHANNELS_LAST = "to_channels_last"
TO_CHANNELS_LAST_CUDA = r"""
__global__ void __launch_bounds__(256) ks_to_channels_last_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                                 unsigned channels, unsigned positions) {
    __shared__ float tile[32][33];
    const unsigned tx = threadIdx.x % 32u, ty = threadIdx.x / 32u;
    const long long n = blockIdx.z;
    for (unsigned kk = ty; kk < 32u; kk += 8u) {
        const unsigned ch = blockIdx.y * 32u + kk, s = blockIdx.x * 32u + tx;
        if (ch < channels && s < positions) tile[kk][tx] = x[(n * channels + ch) * positions + s];
    }
    __syncthreads();
    for (unsigned kk = ty; kk < 32u; kk += 8u) {
        const unsigned s = blockIdx.x * 32u + kk, ch = blockIdx.y * 32u + tx;
        if (ch < channels && s < positions) y[(n * positions + s) * channels + ch] = tile[tx][kk];
    }
}

torch::Tensor to_channels_last(torch::Tensor x, int64_t stream) {
    const auto format = x.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
    const long long n = x.size(0), channels = x.size(1), positions = n * channels ? x.numel() / (n * channels) : 0;
    if (!x.is_cuda() || x.scalar_type() != torch::kFloat32 || !x.is_contiguous() || x.numel() == 0 ||
        n > 65535 || (channels + 31) / 32 > 65535 || positions >= (1LL << 32) || channels >= (1LL << 32)) {
        return x.contiguous(format);  // outside what the tiles cover: PyTorch's copy
    }
    auto y = torch::empty(x.sizes(), x.options().memory_format(format));
    const dim3 grid((unsigned)((positions + 31) / 32), (unsigned)((channels + 31) / 32), (unsigned)n);
    ks_to_channels_last_kernel<<<grid, 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), (unsigned)channels, (unsigned)positions);
    KS_LAUNCH_CHECK();
    return y;
}
"""


def _mapped(leaf: Leaf, shape: tuple[int, ...]) -> Leaf | None:
    """The view `leaf` of a contiguous buffer of `shape`, addressed in the buffer's channels-last layout instead; None
    where a view dimension does not lie within one buffer dimension (a reshape across dimensions)."""
    logical, physical = contiguous(shape), physical_strides(shape)
    start = [(leaf.offset // s) % n for s, n in zip(logical, shape)]
    reach = list(start)  # the last coordinate of each buffer dimension the view reaches
    strides = []
    for size, stride in zip(leaf.shape, leaf.strides):
        if size == 1 or stride == 0:
            strides.append(0)  # a broadcast, or a dimension whose one coordinate is 0
            continue
        dims = [b for b in range(len(shape)) if logical[b] == stride and shape[b] > 1]
        if len(dims) != 1:
            return None
        b = dims[0]
        reach[b] += size - 1
        strides.append(physical[b])
    if any(r >= n for r, n in zip(reach, shape)):  # a view that carries into the next dimension
        return None
    offset = sum(c * p for c, p in zip(start, physical))
    return Leaf(leaf.source, leaf.shape, tuple(strides), offset)


def _kernel_leaves(value: Any, found: list[Leaf]) -> list[Leaf]:
    if isinstance(value, Leaf):
        found.append(value)
    elif isinstance(value, Expr):
        for o in value.operands:
            _kernel_leaves(o, found)
    elif isinstance(value, Kernel):
        _kernel_leaves(value.source, found)
        for _, leaf in value.outputs:
            found.append(leaf)
        for p in value.params.values():
            _kernel_leaves(p, found)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _kernel_leaves(v, found)
    return found


def _rewrite(value: Any, buffers: dict[str, tuple[int, ...]]) -> Any:
    if isinstance(value, Leaf):
        return _mapped(value, buffers[value.source]) if value.source in buffers else value
    if isinstance(value, Expr):
        return dataclasses.replace(value, operands=tuple(_rewrite(o, buffers) for o in value.operands))
    if isinstance(value, Kernel):
        return dataclasses.replace(value, source=_rewrite(value.source, buffers),
                                   outputs=[(what, _rewrite(leaf, buffers)) for what, leaf in value.outputs],
                                   params={k: _rewrite(v, buffers) for k, v in value.params.items()})
    if isinstance(value, list):
        return [_rewrite(v, buffers) for v in value]
    if isinstance(value, tuple):
        return tuple(_rewrite(v, buffers) for v in value)
    return value
