"""Which reads of a block reduction can be four floats at a time (float4 loads on CUDA).

A block (or a split block) reduction walks its reduced elements j = thread, thread + blockDim, ...: one 4-byte load per
operand per step. KernelBench's losses (94_MSELoss, 96_HuberLoss, 99_TripletMarginLoss, 100_HingeLoss: 1 Gi elements
into one value) ran at 61-63% of their memory roof that way on the H200, 0.61x of torch.compile, whose reductions load
vectors. Four consecutive elements j..j+3 are four consecutive floats of an operand exactly where the operand's
strides over the reduced dimensions are the row-major strides of the reduced shape (the operand's element j of an
output is its element 0 plus j), and the first of them is 16-byte aligned where its offset and every kept dimension's
stride are multiples of 4 (the base pointer is checked when the kernel is launched). An operand broadcast over all the
reduced dimensions is the same value for the four. Anything else (a transposed read, a remapping op, an index ramp
along j, a narrow dtype) keeps the scalar loop.
"""
from __future__ import annotations

import math
from typing import Any

from agent.builtin.graph import REMAPPING, Kernel, is_data
from agent.builtin.lower import Expr, Leaf, contiguous

WIDTH = 4


def vector_reads(step: Kernel, types: dict[str, str]) -> list[Leaf] | None:
    """The leaves of `step`'s source read four at a time (each source once), or None where the loop stays scalar."""
    shape, dims = step.shape, step.params["dims"]
    reduced_shape = tuple(shape[d] for d in dims)
    if math.prod(reduced_shape) % WIDTH:
        return None
    want = dict(zip(dims, contiguous(reduced_shape)))
    leaves, remapped = direct_leaves(step.source, False, [], [])
    if remapped:  # read at other coordinates than the element's own
        return None
    found: list[Leaf] = []
    for leaf in leaves:
        kind = leaf.source.split(":")[0]
        if kind == "const":
            continue
        lead = len(shape) - len(leaf.shape)
        if lead < 0:
            return None
        per_dim = [(leaf.shape[d - lead], leaf.strides[d - lead]) if d >= lead else (1, 0) for d in range(len(shape))]
        if all(per_dim[d][0] == 1 or per_dim[d][1] == 0 for d in dims):
            continue  # the same value for the four lanes
        if not is_data(leaf) or types.get(leaf.source) != "float":
            return None
        for d in dims:
            if shape[d] > 1 and per_dim[d] != (shape[d], want[d]):
                return None
        if not _aligned(leaf.offset, [per_dim[d] for d in range(len(shape)) if d not in dims]):
            return None
        if leaf not in found:
            found.append(leaf)
    sources = {leaf.source for leaf in found}
    if len(sources) != len(found) or any(leaf.source in sources and leaf not in found for leaf in leaves):
        return None  # a source also read through another view stays scalar (conservative: not yet judged on a GPU)
    return found or None


def pointwise_vector_reads(step: Kernel, output: Leaf, types: dict[str, str]) -> tuple[list[Leaf], bool] | None:
    """A pointwise kernel's four consecutive elements per thread (the innermost dimension a multiple of four long, so
    the four share every outer coordinate): the leaves read as one float4 each (not under a remapping op, contiguous
    and aligned along the innermost dimension) and whether the output is stored as one. None where neither a read
    nor the store can be vectorized (the scalar kernel stays)."""
    shape = step.shape
    if not shape or shape[-1] % WIDTH:
        return None
    return _reads_and_store(step, output, lambda leaf: _contiguous_inner(leaf, shape, types))


def flat_vector_reads(step: Kernel, output: Leaf, types: dict[str, str]) -> tuple[list[Leaf], bool] | None:
    """A pointwise kernel over rows not a multiple of four long (a convolution's 126 x 126 maps): four consecutive
    elements of the flat index per thread, which may straddle rows. Only operands laid out exactly as the elements
    (the kernel's shape, row-major, offset a multiple of four) are one float4 each; every other operand is read per
    element. None where no read and not the store qualify, or the element count is not a multiple of four.

    One float per thread leaves few bytes in flight for HBM3e to fill: on the H200 the single-kernel epilogue of
    KernelBench 2/57 (one float per thread, 64-bit index divisions then) ran at about a third of the memory roof
    (docs/benchmarks.md §14, session 27)."""
    shape = step.shape
    if not shape or math.prod(shape) % WIDTH or shape[-1] % WIDTH == 0:
        return None
    return _reads_and_store(step, output, lambda leaf: _as_elements(leaf, shape, types))


def _reads_and_store(step: Kernel, output: Leaf, fits: Any) -> tuple[list[Leaf], bool] | None:
    """The leaves read at the element's own coordinates that `fits` (each once), and whether the output does."""
    direct, remapped = direct_leaves(step.source, False, [], [])
    reads = [leaf for leaf in direct if leaf not in remapped and fits(leaf)]
    store = fits(output)
    if not reads and not store:
        return None
    return list(dict.fromkeys(reads)), store


def _as_elements(leaf: Leaf, shape: tuple[int, ...], types: dict[str, str]) -> bool:
    """Element k of the kernel is element offset + k of the leaf's float buffer, 16-byte aligned at every multiple of
    four (given an aligned base pointer)."""
    return (is_data(leaf) and types.get(leaf.source) == "float" and leaf.shape == shape
            and leaf.strides == contiguous(shape) and leaf.offset % WIDTH == 0)


def _contiguous_inner(leaf: Leaf, shape: tuple[int, ...], types: dict[str, str]) -> bool:
    """Four consecutive elements along the innermost dimension are four consecutive floats, 16-byte aligned at every
    multiple of four (given an aligned base pointer)."""
    if not is_data(leaf) or types.get(leaf.source) != "float" or not leaf.shape:
        return False
    if leaf.shape[-1] != shape[-1] or leaf.strides[-1] != 1:
        return False
    return _aligned(leaf.offset, list(zip(leaf.shape[:-1], leaf.strides[:-1])))


def _aligned(offset: int, outer: list[tuple[int, int]]) -> bool:
    """Every start of four consecutive elements lies on a 16-byte boundary (given an aligned base pointer): the offset
    and the strides of the other dimensions, (size, stride) each, are multiples of four floats."""
    return offset % WIDTH == 0 and all(stride % WIDTH == 0 for size, stride in outer if size > 1)


def direct_leaves(value: Any, under: bool, direct: list[Leaf], remapped: list[Leaf]) -> tuple[list[Leaf], list[Leaf]]:
    """The leaves read at the element's own coordinates, and those read under a remapping op (at other ones)."""
    if isinstance(value, Leaf):
        (remapped if under else direct).append(value)
    elif isinstance(value, Expr):
        for o in value.operands:
            direct_leaves(o, under or value.op in REMAPPING, direct, remapped)
    return direct, remapped
