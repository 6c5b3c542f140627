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
stack, counting while a forward runs, as on the forward's own thread. A native thread that takes the GIL
(PyGILState_Ensure, which every pybind11 extension links) makes PyTorch's Python calls with no census on its stack:
open (docs/threat-model.md, "On a native thread"); what such threads call in ATen directly is the binary scan's
(build/native_calls.py).

**Forked processes.** A process forked from the job holds a copy of the census whose counts never reach the verdict:
a helper forked at import, fed through shared memory, ran torch.softmax for every call (the fifth red team's x6). In
every forked child the census refuses PyTorch compute (`watch_forks`): the child's call fails, and with it the
candidate. A helper started afresh (exec, multiprocessing's spawn) holds no census at all; its CPU time is the job's
(cpu_over_threads), and its speed is measured honestly like any fallback's.

**The interpreter's hooks.** A profile or trace function, a `sys.monitoring` callback and a Python signal handler
each run the candidate's Python at points it does not call them from, among them inside a PyTorch call, where both
records are off the stack: a profile function that ran F.silu when the harness's torch.empty_like was called was
seen by neither, in checked and timed calls alike (the seventh red team, accepted at 1.47x with no kernel at all).
No kernel needs one, so installing any (`watch_interpreter_hooks`) is itself the finding. One set from C++ is the
binary scan's (build/native_calls.py reads PyEval_SetProfile and its kin in the extension)."""
from __future__ import annotations

import _signal
import _thread
import functools
import os
import sys
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


# (module, function, which argument installs): each installs a callable of the caller's that the interpreter calls back.
# Setting None (or a signal's SIG_DFL and SIG_IGN) removes one and is no finding.
_HOOK_SETTERS = (
    (sys, "setprofile", 0), (sys, "settrace", 0), (sys, "_setprofileallthreads", 0), (sys, "_settraceallthreads", 0),
    (threading, "setprofile", 0), (threading, "settrace", 0), (threading, "setprofile_all_threads", 0),
    (threading, "settrace_all_threads", 0),
)
_MONITORING_SETTERS = ("use_tool_id", "register_callback", "set_events", "set_local_events")


def watch_interpreter_hooks(found: Callable[[str], None]) -> None:
    """From now on, installing a profile or trace function (sys's or threading's), a Python signal handler or a
    sys.monitoring tool calls `found` with what was called, before it is done."""
    modules = [(module, name, position) for module, name, position in _HOOK_SETTERS if hasattr(module, name)]
    modules.append((_signal, "signal", 1))  # signal.signal calls it (looked up at each call)
    for module, name, position in modules:
        setattr(module, name, _installing(getattr(module, name), f"{module.__name__}.{name}", position, found))
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12 on
    for name in _MONITORING_SETTERS if monitoring is not None else ():
        setattr(monitoring, name, _installing(getattr(monitoring, name), f"sys.monitoring.{name}", None, found))


def _installing(original: Callable[..., Any], called: str, position: int | None,
                found: Callable[[str], None]) -> Callable[..., Any]:
    def install(*args: Any, **kwargs: Any) -> Any:
        hook = args[position] if position is not None and len(args) > position else None
        if position is None or callable(hook):  # None, SIG_DFL and SIG_IGN take a hook off: no finding
            found(called)
        return original(*args, **kwargs)
    return install
