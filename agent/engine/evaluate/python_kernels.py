"""Python functions the candidate registers as kernels with PyTorch's dispatcher, recorded from inside.

`torch.library` lets any Python function be an op's kernel (`custom_op`, `Library.impl`, `Library.fallback`, and
`triton_op` over them). Such a kernel runs beneath the dispatcher, in the middle of the handler of whichever op record
saw the op: the census (a TorchFunctionMode) and the ATen recorder (a TorchDispatchMode) are each off the mode stack
while their own handler runs, so the PyTorch calls the kernel makes were seen by neither, and `torch.softmax` wrapped in
a `custom_op` was accepted as a kernel (session 40). So before the candidate is imported, the binding every Python
kernel is registered through (`torch._C._DispatchModule`, beneath `torch.library`) is wrapped: each Python function
registered there runs with the records put back on the stack (`rearm`) for its duration. Like the records themselves
this lives in the candidate's process and only ever counts against it (docs/threat-model.md, "Use PyTorch instead of
a kernel"); a kernel registered past this binding is code written against this harness."""
from __future__ import annotations

import functools
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
