"""Checks that run in the candidate's process around each call: which PyTorch ops it ran, whether
it tampered with clocks, left work running, mutated inputs or returned aliases."""
from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import agent.engine.evaluate.pristine as pristine

# ATen ops that allocate, move, view or describe memory. A candidate may always use them: they
# compute nothing of the problem's function.
MEMORY_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill", "fill_", "zero_",
    "scalar_tensor", "lift_fresh", "lift_fresh_copy", "copy_", "copy", "_to_copy", "clone", "contiguous",
    "detach", "detach_", "alias", "resize_", "resize_as_", "set_", "_local_scalar_dense", "item",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "t", "transpose", "permute",
    "expand", "expand_as", "squeeze", "unsqueeze", "slice", "select", "narrow", "split", "split_with_sizes",
    "chunk", "unbind", "flatten", "unflatten", "view_as", "movedim", "numpy_T", "_to_dense", "to",
    "is_contiguous", "size", "stride", "numel", "dim", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "is_same_size", "record_stream", "_has_compatible_shallow_copy_type",
    "arange", "_pin_memory", "is_pinned", "empty_permuted", "_unsafe_view_copy", "view_copy",
})

# The namespaces of the ops PyTorch itself registers (read when the harness is imported, before any candidate code):
# aten's and prims', and its own kernels beside them (mkldnn::_linear_pointwise is a fused linear + relu, quantized::
# and onednn:: have CPU kernels too). An op of one of these is PyTorch's compute, whoever calls it; an op of any other
# namespace is the candidate's own (its Python kernel, if any, is recorded from inside: census_reach.py). Until
# session 40 only aten and prims counted, and a forward of mkldnn::_linear_pointwise was seen by neither record (the
# fifth red team). The profiler's ops (torch.profiler.record_function) only mark time.
TORCH_NAMESPACES = frozenset(name.partition("::")[0] for name in torch._C._dispatch_get_all_op_names()) - {"profiler"}


def torch_op_name(namespace: str, op: str) -> str | None:
    """How the allow-list names PyTorch's own op `namespace::op` (aten's and prims' by the op alone), or None for an op
    that is not PyTorch's."""
    if namespace in ("aten", "prims"):
        return op
    return f"{namespace}::{op}" if namespace in TORCH_NAMESPACES else None


# The tensor types a call's arguments may have without taking the call over (a type of the candidate's own with a
# __torch_function__ or __torch_dispatch__ runs its handler beneath whichever record saw the call, unseen by it).
PLAIN_TENSOR_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})
# The same by identity, which no type can fake: a metaclass's __eq__ and __hash__ made a subclass of its own equal to
# torch.Tensor, and so a member of PLAIN_TENSOR_TYPES (session 41).
PLAIN_TENSOR_IDS = frozenset(map(id, PLAIN_TENSOR_TYPES))


# Converting a floating value to one of these from a wider type is a precision downgrade.
_NARROW = {torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2}


class OpRecorder(TorchDispatchMode):
    """Records every ATen op run while active, including those called from C++ extensions through
    the dispatcher, and every other op of PyTorch's own (TORCH_NAMESPACES). Ops of other namespaces (an
    extension's own registered ops) are the candidate's."""

    def __init__(self, allowed_compute: frozenset[str]) -> None:
        super().__init__()
        self.allowed = allowed_compute | MEMORY_OPS
        self.any = "*" in allowed_compute  # config.ANY_OP: a sanity sweep's problem-as-candidate
        self.forbidden: Counter[str] = Counter()
        self.downgrades: Counter[str] = Counter()
        self.seen = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        self.seen += 1
        name = func.overloadpacket.__name__
        counted = torch_op_name(func.namespace, name)
        if counted is not None and counted not in self.allowed and not self.any:
            self.forbidden[counted] += 1
        for kind in types:
            if id(kind) not in PLAIN_TENSOR_IDS and not self.any:
                self.forbidden[f"__torch_dispatch__ of {getattr(kind, '__qualname__', kind)}"] += 1
        if name == "_to_copy":
            target = kwargs.get("dtype")
            source = args[0].dtype if args and isinstance(args[0], torch.Tensor) else None
            if target in _NARROW and source is not None and source.is_floating_point and source not in _NARROW:
                self.downgrades[f"{source} -> {target}"] += 1
        return func(*args, **kwargs)


def recorder_is_live(recorder: OpRecorder) -> bool:
    """A canary op after the candidate returns: if the recorder does not see it, the candidate
    switched dispatch modes off and its own ops went unrecorded."""
    before = recorder.seen
    pristine.torch.empty(1)
    return recorder.seen > before


# Clocks and synchronisation points the harness relies on. They are captured before the candidate
# is imported and the harness only ever calls these captured originals.
def _clock_table() -> dict[str, Callable[..., Any]]:
    table: dict[str, Callable[..., Any]] = {
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.monotonic": time.monotonic,
        "time.monotonic_ns": time.monotonic_ns,
        "time.time": time.time,
        "time.sleep": time.sleep,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda._sleep": torch.cuda._sleep,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "torch.cuda.Stream.synchronize": torch.cuda.Stream.synchronize,
        "torch.cuda.current_stream": torch.cuda.current_stream,
        "torch.cuda.Event": torch.cuda.Event,
    }
    return table


# Where each watched name lives, by the prefix of its dotted path.
_OWNERS: dict[str, Any] = {"time": time, "torch.cuda": torch.cuda, "torch.cuda.Event": torch.cuda.Event,
                           "torch.cuda.Stream": torch.cuda.Stream}


def _resolve(path: str) -> Any:
    module, _, attr = path.rpartition(".")
    return getattr(_OWNERS[module], attr, None)


@dataclass
class Clocks:
    """The original clocks, captured before any candidate code ran."""

    originals: dict[str, Callable[..., Any]] = field(default_factory=_clock_table)

    def tampered(self) -> list[str]:
        return [path for path, original in self.originals.items() if _resolve(path) is not original]

    def restore(self) -> None:
        """Put the originals back so PyTorch's own code keeps working after tampering."""
        for path, original in self.originals.items():
            module, _, attr = path.rpartition(".")
            if getattr(_OWNERS[module], attr, None) is not original:
                setattr(_OWNERS[module], attr, original)

    def perf_counter(self) -> float:
        return self.originals["time.perf_counter"]()

    def sleep(self, seconds: float) -> None:
        self.originals["time.sleep"](seconds)


def python_threads() -> set[int]:
    """The running Python threads' idents, read from threading's own table: a Thread subclass's `ident` (a property the
    candidate can override) would run its code in the harness's own time."""
    return set(dict.keys(threading._active))  # type: ignore[attr-defined]


# The C methods the harness reads memory with, unbound from PyTorch's immutable C types: through the objects' own lookup
# an instance attribute of the tensor's or of its storage's (every untyped_storage() call hands back the same storage
# object) ran the candidate's code in the harness's own time, after the call (the ninth red team's c9 and c10).
_TENSOR_STORAGE = torch._C.TensorBase.untyped_storage
_TENSOR_DEVICE_INDEX = torch._C.TensorBase.get_device
_STORAGE_START = torch._C.StorageBase.data_ptr
_STORAGE_BYTES = torch._C.StorageBase.nbytes


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = _TENSOR_STORAGE(t)
    start = _STORAGE_START(storage)
    return start, start + _STORAGE_BYTES(storage)


def memory_span(t: torch.Tensor) -> tuple[str, int, int, int]:
    """Where a tensor's storage lies: its memory (the host's, whatever index a CPU device names, or one GPU's), and
    its first and last byte; overlaps() of two tensors is a comparison of their spans (spans_overlap)."""
    kind = t.device.type  # a data descriptor of the C type's: no instance attribute shadows it
    start, end = storage_span(t)
    return kind, 0 if kind == "cpu" else _TENSOR_DEVICE_INDEX(t), start, end


def spans_overlap(a: tuple[str, int, int, int], b: tuple[str, int, int, int]) -> bool:
    return a[:2] == b[:2] and a[2] < b[3] and b[2] < a[3] and a[3] > a[2] and b[3] > b[2]


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    # The host has one memory, whatever index a tensor's device names: a storage made by hand with the tag "cpu:0"
    # once hid an output that was its own input ("cpu:0" != "cpu"). A GPU's memory is its own.
    return spans_overlap(memory_span(a), memory_span(b))


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equality of bits, so NaNs compare equal to themselves (an unmodified NaN is unmodified)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return pristine.torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)) if a.numel() else True
