"""PyTorch ops a compiled extension calls past the dispatcher's Python key, read from its binary by the trusted side.

The op recorder (evaluate/guards.py) is a Python dispatch mode in the candidate's process: it sees an ATen op that the
extension's C++ calls through the dispatcher (at::softmax is at::_ops::_softmax::call), but not one called past the
Python key (at::_ops::_softmax::redispatch with a key set of the caller's choosing) or a backend's kernel called by
name (at::cpu::_softmax, at::native::softmax_cpu): PyTorch's own kernel then runs as the candidate's and no
in-process check sees it. A binary names what it links against, so the trusted process reads the names from the copy
the build cache verified (its dynamic symbols, and any mangled name kept as a string, as one looked up with dlsym
would be). A name made at run time (spelled out piece by piece, or a schema looked up in the dispatcher's table) is
not seen here: docs/threat-model.md says what bounds that.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# Namespaces whose functions are kernels of ATen ops called by name, past the dispatcher.
_KERNEL_NAMESPACES = frozenset({"cpu", "cuda", "native", "meta", "compositeexplicitautograd", "compositeimplicitautograd",
                                "compositeexplicitautogradnonfunctional"})
# What turns the dispatcher's keys off around a call (so that even at::softmax, through the dispatcher, skips the
# Python key the recorder sits on) or looks an operator up by a name made at run time.
_DISPATCH_CONTROL = frozenset({
    ("impl", "ExcludeDispatchKeyGuard"), ("impl", "IncludeDispatchKeyGuard"), ("impl", "tls_set_dispatch_key_excluded"),
    ("impl", "tls_set_dispatch_key_included"), ("impl", "_force_tls_local_dispatch_key_set"), ("Dispatcher",),
    ("impl", "OperatorEntry"), ("OperatorHandle",), ("TypedOperatorHandle",),
})
# The interpreter's hooks, whose callbacks run the candidate's code at points it does not call them from, among them
# inside a PyTorch call where both in-process records are off the stack (evaluate/census_reach.py): a profile function
# set from C++ ran F.silu there unseen (the seventh red team). Their C names, as linked or kept for dlsym.
_INTERPRETER_HOOKS = re.compile(rb"(?<![A-Za-z0-9_])(_?PyEval_Set(?:Profile|Trace)(?:AllThreads)?|_?Py_AddPendingCall"
                                rb"|PyOS_setsig|PyErr_SetInterrupt(?:Ex)?)(?![A-Za-z0-9_])")
# What switches off or removes the ATen observer (evaluate/aten_watch.py, a record-function callback of the whole
# process): record functions off on a thread (at::enableRecordFunction, beneath RecordFunctionGuard), a callback
# removed or disabled by its handle, all callbacks cleared, a thread's record-function state replaced.
_RECORD_FUNCTION_CONTROLS = re.compile(
    rb"_ZN2at(" + rb"|".join(str(len(n)).encode() + n for n in (
        b"enableRecordFunction", b"clearCallbacks", b"clearGlobalCallbacks", b"clearThreadLocalCallbacks",
        b"removeCallback", b"disableCallback", b"set_record_function_tls_")) + rb")")
# What replaces a thread's dispatch state wholesale: a ThreadLocalState set back (record functions off with it, as they
# were at import; the ninth red team's c3, accepted at 1.85x with no kernel), the mode stacks' own states.
_THREAD_STATE_CONTROLS = re.compile(rb"_ZNK?(" + rb"|".join(
    b"".join(str(len(part)).encode() + part for part in path) for path in (
        (b"at", b"ThreadLocalState"), (b"at", b"ThreadLocalStateGuard"), (b"at", b"impl", b"PythonTorchFunctionTLS"),
        (b"c10", b"impl", b"TorchDispatchModeTLS"), (b"c10", b"impl", b"PythonDispatcherTLS"))) + rb")")
# The JIT's operator registry: an op looked up by name and run through it (the ninth red team's c7 ran aten::silu so,
# with no at::_ops name in its binary).
_JIT_OPERATOR_LOOKUPS = re.compile(rb"_ZN5torch3jit(" + rb"|".join(str(len(n)).encode() + n for n in (
    b"getAllOperatorsFor", b"findOperatorFor", b"getOperatorForLiteral", b"getAllOperators",
    b"getAllSortedOperatorsFor", b"getOperatorsFor")) + rb")")
# The AOTInductor C shim: PyTorch's kernels by C names (aoti_torch_cpu_mul_Tensor), some of them calling the backend's
# kernel directly, past the dispatcher (the ninth red team's c11). No kernel of a candidate's needs them.
_AOTI_SHIM = re.compile(rb"(?<![A-Za-z0-9_])(aoti_torch_(?:cpu|cuda|xpu|mps)_[A-Za-z0-9_]+)")
# CUPTI's switches: the kernel census (evaluate/kernel_census.py) is CUPTI's activity records, which these switch off,
# take over or tear down. No kernel needs them.
_CUPTI_CONTROLS = re.compile(rb"(?<![A-Za-z0-9_])(cupti(?:Activity|Finalize|Subscribe|Unsubscribe|EnableCallback|"
                             rb"EnableDomain|EnableAllDomains)[A-Za-z0-9_]*)")
_NESTED = re.compile(rb"_ZN(?:K)?(?=\d)")
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
# Kernel names carry the backend or form they are for (softmax_cpu, add_out): the op is what is left.
_SUFFIXES = ("_cpu", "_cuda", "_out", "_kernel", "_impl", "_symint")


def mangled_paths(blob: bytes) -> set[tuple[str, ...]]:
    """The nested names (at, _ops, _softmax, redispatch) of every Itanium-mangled name in `blob` under the `at`
    namespace: a name's parts are length-prefixed, so they are read by their lengths, not guessed."""
    found: set[tuple[str, ...]] = set()
    for match in _NESTED.finditer(blob):
        parts: list[str] = []
        pos = match.end()
        while pos < len(blob) and len(parts) < 6 and 48 <= blob[pos] <= 57:
            end = pos
            while end < len(blob) and 48 <= blob[end] <= 57:
                end += 1
            size = int(blob[pos:end])
            ident = blob[end:end + size]
            if size == 0 or len(ident) != size or not _IDENTIFIER.fullmatch(ident):
                break
            parts.append(ident.decode())
            pos = end + size
        if (len(parts) >= 3 and parts[0] == "at") or (len(parts) >= 2 and parts[0] == "c10"):
            found.add(tuple(parts))
    return found


def native_calls(blob: bytes, allowed: Iterable[str], is_op: Callable[[str], bool]) -> list[str]:
    """Each ATen op outside `allowed` that the binary calls past the dispatcher's Python key, as 'op (how)', each
    use of the dispatcher's own controls (key guards, operator lookups), of the interpreter's hooks (a profile or
    trace function, a pending call, a signal handler) and of the record functions' switches; `is_op` says whether a name is an ATen op (torch.ops.aten has
    it)."""
    allowed = frozenset(allowed)
    found = {f"the interpreter's hooks ({name.decode()})" for name in _INTERPRETER_HOOKS.findall(blob)}
    found |= {f"the record functions the ATen observer runs on (at::{name.decode().lstrip('0123456789')})"
              for name in _RECORD_FUNCTION_CONTROLS.findall(blob)}
    found |= {f"a thread's dispatch state set wholesale ({_demangled_prefix(name)})"
              for name in _THREAD_STATE_CONTROLS.findall(blob)}
    found |= {f"the dispatcher itself (torch::jit::{name.decode().lstrip('0123456789')}: an op looked up by name)"
              for name in _JIT_OPERATOR_LOOKUPS.findall(blob)}
    found |= {f"PyTorch's kernels through the AOTInductor C shim ({name.decode()})" for name in _AOTI_SHIM.findall(blob)}
    found |= {f"CUPTI's switches, which the kernel census is ({name.decode()})" for name in _CUPTI_CONTROLS.findall(blob)}
    for path in mangled_paths(blob):
        if path[0] == "c10":
            if path[1:3] in _DISPATCH_CONTROL or path[1:2] in _DISPATCH_CONTROL:
                found.add(f"the dispatcher itself ({'::'.join(path)})")
            continue
        if path[1] == "_ops" and len(path) >= 4 and path[3] in ("call", "redispatch"):
            # Through the dispatcher (call) the recorder sees it, unless the Python key is off around it (a guard in
            # Python, where no symbol shows): an op the allow-list forbids at run time is forbidden in the binary too.
            how = f"at::_ops::{path[2]}::{path[3]}"
        elif path[1] in _KERNEL_NAMESPACES:
            how = f"at::{path[1]}::{path[2]}"
        else:
            continue
        op = _op_name(path[2], is_op, overloaded=path[1] == "_ops")
        if op is not None and op not in allowed:
            found.add(f"{op} ({how})")
    return sorted(found)


def _demangled_prefix(name: bytes) -> str:
    """2at16ThreadLocalState -> at::ThreadLocalState: a run of length-prefixed parts."""
    parts, pos = [], 0
    while pos < len(name):
        end = pos
        while end < len(name) and 48 <= name[end] <= 57:
            end += 1
        size = int(name[pos:end])
        parts.append(name[end:end + size].decode())
        pos = end + size
    return "::".join(parts)


def _op_name(name: str, is_op: Callable[[str], bool], overloaded: bool) -> str | None:
    """The ATen op a function stands for, or None: at::_ops names are op_overload (_softmax_out, add_Tensor); a kernel
    namespace's carry the backend or form they are for (softmax_cpu, add_out), and hold helpers too (cpu_kernel),
    so there only those suffixes come off."""
    candidates = [name]
    stripped = name
    for suffix in _SUFFIXES:
        if stripped.endswith(suffix):
            stripped = stripped[: -len(suffix)]
            candidates.append(stripped)
    if overloaded:
        pieces = name.split("_")
        candidates += ["_".join(pieces[:i]) for i in range(len(pieces) - 1, 0, -1)]
    return next((c for c in candidates if c.strip("_") and is_op(c)), None)
