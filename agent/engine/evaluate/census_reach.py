"""Where the candidate's PyTorch calls run out of the op records' sight, and how the records are taken there.

Both records (the census, a TorchFunctionMode, and the checked calls' ATen recorder, a TorchDispatchMode) are modes:
they see what runs on the mode stack they were pushed on, which is one thread's, and never inside their own handler.

**Python kernels.**
`torch.library` lets any Python function be an op's kernel (`custom_op`, `Library.impl`, `Library.fallback`, and
`triton_op` over them). Such a kernel runs beneath the dispatcher, in the middle of the handler of whichever op record
saw the op: the census (a TorchFunctionMode) and the ATen recorder (a TorchDispatchMode) are each off the mode stack
while their own handler runs, so the PyTorch calls the kernel makes were seen by neither, and `torch.softmax` wrapped in
a `custom_op` was accepted as a kernel (session 40). So before the candidate is imported, the binding every Python
kernel is registered through (`torch._C._DispatchModule`, beneath `torch.library`) is wrapped: each Python function
registered there runs with the records put back on the stack (`rearm`) for its duration. Like the records themselves
this lives in the candidate's process and only ever counts against it (docs/threat-model.md, "Use PyTorch instead of
a kernel"); a kernel registered past this binding is code written against this harness.

**Other threads.** A mode stack is per thread: a thread pool made at import ran torch.softmax for every call, and
neither record saw it (the fifth red team, session 40). Every Python thread the candidate starts after the import
(through `_thread.start_new_thread`, beneath `threading` and `concurrent.futures`) starts with the census on its own
stack, counting while a forward runs, as on the forward's own thread. Native threads cannot make PyTorch's Python
calls; what they call in ATen directly is the binary scan's (build/native_calls.py).

**Forked processes.** A process forked from the job holds a copy of the census whose counts never reach the verdict:
a helper forked at import, fed through shared memory, ran torch.softmax for every call (the fifth red team's x6). In
every forked child the census refuses PyTorch compute (`watch_forks`): the child's call fails, and with it the
candidate. A helper started afresh (exec, multiprocessing's spawn) holds no census at all; its CPU time is the job's
(cpu_over_threads), and its speed is measured honestly like any fallback's."""
from __future__ import annotations

import _thread
import functools
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch

# Which positional argument of each registering method is the kernel (after self): impl(name, key, func, ...),
# fallback(key, func, ...).
_KERNEL_ARGUMENT = {"impl": 2, "fallback": 1}


def watch_python_kernels(rearm: Callable[[], AbstractContextManager[None]]) -> None:
    """From now on, every Python function registered as a kernel runs inside `rearm()`."""
    module = torch._C._DispatchModule
    for method, position in _KERNEL_ARGUMENT.items():
        original = getattr(module, method)
        setattr(module, method, _registering(original, position, rearm))


def _registering(original: Callable[..., Any], position: int, rearm: Callable[[], AbstractContextManager[None]],
                 ) -> Callable[..., Any]:
    def register(self: Any, *args: Any, **kwargs: Any) -> Any:
        if "func" in kwargs:
            kwargs["func"] = _rearmed(kwargs["func"], rearm)
        elif len(args) > position:
            args = (*args[:position], _rearmed(args[position], rearm), *args[position + 1:])
        return original(self, *args, **kwargs)
    return register


def _rearmed(kernel: Any, rearm: Callable[[], AbstractContextManager[None]]) -> Any:
    if not callable(kernel):
        return kernel

    @functools.wraps(kernel)
    def run(*args: Any, **kwargs: Any) -> Any:
        with rearm():
            return kernel(*args, **kwargs)
    return run


def watch_threads(census: AbstractContextManager[Any]) -> None:
    """From now on, every Python thread starts with `census` pushed on its own mode stack (never popped: it counts
    only while a forward runs)."""
    original = _thread.start_new_thread

    def start(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> int:
        def run(*a: Any, **k: Any) -> Any:
            census.__enter__()
            return function(*a, **k)
        return original(run, args, kwargs or {})

    _thread.start_new_thread = start
    threading._start_new_thread = start  # type: ignore[attr-defined]  # threading's own reference to it


def watch_forks(in_child: Callable[[], None]) -> None:
    """From now on, every process forked from this one calls `in_child` first."""
    os.register_at_fork(after_in_child=in_child)
