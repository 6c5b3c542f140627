"""The ATen observer: a record of the candidate's PyTorch compute that is never off a stack.

The op census (a TorchFunctionMode) and the checked calls' ATen recorder (a TorchDispatchMode) are modes: each sees the
calls made on the mode stack it was pushed on, which is one thread's, and never the calls made inside its own handler.
So any of the candidate's Python that PyTorch calls back from inside a call (a tensor's `__deepcopy__` in
`copy.deepcopy`, a `warnings.showwarning` run by an op that warns from C++, `torch._VF` replaced beneath
`Tensor.split`, a HigherOrderOperator's Python kernel), and any native thread that takes the GIL, computed with PyTorch
unseen (the seventh and eighth red teams: accepted at 1.16-1.56x with no kernel at all). And the census named calls
from state the candidate can change (`F.softmax.__name__`, `torch.ops.aten`).

This observer is a RecordFunction callback for the whole process (what `torch.profiler` installs, `aten_watch.cpp`),
installed before the candidate's import: PyTorch's dispatcher calls it for every operator call on every thread, by the
operator's registered name, whatever mode stack, callback or thread the call came from. On the harness's thread it
judges only while a call of the candidate's runs; on every other thread it judges always. Record functions stay on
everywhere, so that no thread-local state captured or handed on at any time has them off. An op of PyTorch's own
namespaces outside the allow-list is a finding outermost, and inside a memory op (whose inside is memory ops and
`INTERNALS`); inside an allowed compute op (a GEMM, a convolution, an op the config allows) its own implementation
runs, not judged (relu is clamp_min inside; a convolution adds its bias).

Like every check in the candidate's process it only counts against the candidate (docs/threat-model.md): its module
can be reached from the candidate's code, which could switch it (each switch the harness did not make is counted,
`Observer.check`), and native code could remove the callback (the binary scan reads those names, and the canary after
every call and batch shows a removed one). What it does not see: a kernel called past the dispatcher
(`at::native::`, `redispatch`: the binary scan's), and compute that is not PyTorch's.
"""
from __future__ import annotations

import gc
import hashlib
import os
import subprocess
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agent.engine.build.toolchain import detect_toolchain
import agent.engine.evaluate.pristine as pristine
import agent.engine.evaluate.guards as guards
import agent.engine.evaluate.harness_binary as harness_binary
import agent.engine.evaluate.kernel_census as kernel_census

SOURCE = Path(__file__).with_name("aten_watch.cpp")
MODULE = "kstudio_aten_watch"
_FILE = MODULE + ".so"
# The op the harness runs to show the observer still sees calls (as the census's canary: torch.exp).
CANARY = "aten::exp"
# What an allowed GEMM or convolution calls inside itself, beyond the allow-list and the memory ops: read with this
# observer over the anchors at many shapes, dtypes and layouts (benchmarks/gpu/anchor_internals.py, CPU and H200).
INTERNALS = frozenset({
    # CPU (torch 2.13): the slow and grouped convolution paths, bfloat16 convolutions, batched GEMM accumulations
    "aten::_convolution_mode", "aten::_nnpack_available", "aten::add_", "aten::addmm_", "aten::addmv_",
    "aten::as_strided_", "aten::cat", "aten::resolve_conj", "aten::slow_conv3d", "aten::thnn_conv2d",
    # CUDA (H200, torch 2.11, session 42): the same accumulations and bias adds, and depthwise 3-D convolutions
    "aten::conv_depthwise3d",
    # their kin on other paths: a bias added out of place, a negated view resolved
    "aten::add", "aten::resolve_neg", "aten::baddbmm_",
})


def qualified(names: frozenset[str] | set[str]) -> set[str]:
    """The allow-list's names as the dispatcher names ops: aten's and prims' by the op alone (guards.torch_op_name)."""
    out: set[str] = set()
    for name in names:
        if "::" in name:
            out.add(name)
        else:
            out.update({f"aten::{name}", f"prims::{name}"})
    return out


def _build_key() -> str:
    toolchain = detect_toolchain()
    digest = hashlib.sha256(SOURCE.read_bytes() + SOURCE.with_name("siphash.h").read_bytes())
    digest.update(toolchain.fingerprint().encode())
    return "aten-watch-" + digest.hexdigest()[:40]


def built(cache_root: str | os.PathLike[str] | None) -> dict[str, str]:
    """Trusted side: the observer's binary in the build cache (compiled once per toolchain, a few seconds), as what the
    candidate's job needs to load it and check it: the entry's key, the file and its sha256."""
    return harness_binary.built(cache_root, _build_key(), _FILE, _compile)


def _compile(out: Path) -> dict[str, str]:
    toolchain = detect_toolchain()
    command = [toolchain.cxx, "-O2", f"-std={toolchain.cxx_std}", "-shared", "-fPIC", "-w",
               f"-D_GLIBCXX_USE_CXX11_ABI={int(toolchain.cxx11_abi)}", f"-I{toolchain.include_dir}",
               f"-I{toolchain.python_include}", str(SOURCE), f"-L{toolchain.lib_dir}", "-lc10", "-ltorch_cpu",
               f"-Wl,-rpath,{toolchain.lib_dir}", "-o", str(out / _FILE)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the harness's ATen observer did not compile ({' '.join(command[:3])} ...): "
                           f"{(done.stderr or done.stdout)[-2000:]}")
    return {"source_sha256": hashlib.sha256(SOURCE.read_bytes()).hexdigest()}


class Observer:
    """The installed observer, seen from the harness: its module's functions captured at load (before the candidate's
    import), and what the harness itself did with them, to tell its own switches from anyone else's."""

    def __init__(self, module: Any, allowed: frozenset[str], internals: frozenset[str] = INTERNALS) -> None:
        self._arm, self._disarm, self._canary = module.arm, module.disarm, module.canary_mode
        self._state, self._found = module.state, module.found
        self._profiling = module.profiling
        self._take = module.take
        allowed_names = qualified(allowed | guards.MEMORY_OPS)
        # Every allowed compute op (GEMM, convolution, and any the config adds): what runs inside one is its own
        # implementation (relu is clamp_min inside), not judged; a memory op's inside is held to the memory ops.
        anchors = qualified(frozenset(allowed) - guards.MEMORY_OPS)
        namespaces = sorted(guards.TORCH_NAMESPACES)
        module.install(sorted(allowed_names), sorted(anchors), sorted(internals - allowed_names), namespaces, CANARY)
        self.allowed_names = frozenset(allowed_names)
        self.armed = False  # a candidate's call is running on the harness's thread (what the C++ side judges)
        self.main = threading.get_ident()
        self.bypassed: list[str] = []  # PyTorch ops called past the dispatcher's record (watch_bypasses)
        self._bypassed_reported = 0
        # The garbage collector's callbacks before the import: one the candidate adds runs its code in the harness's
        # own time, where this thread is not judged (a collection set off by the harness's own allocations).
        self._gc_callbacks = [id(c) for c in gc.callbacks]
        self._gc_reported = False
        # torch.Tensor's own methods replaced or shadowed (the harness calls them on outputs in its own time; its calls of
        # PyTorch's module-level functions go through pristine.py's copy instead)
        self.replaced: list[str] = []
        self._replaced_reported = 0
        self._tensor_class = dict(vars(torch.Tensor))  # before the import: what the harness's method calls find
        self._tensor_hot = tuple(self._tensor_class.get(name) for name in _TENSOR_HOT)
        self._tensor_reported = False
        self.switches = 0  # the harness's own arm/disarm/canary calls
        self.reported: dict[str, int] = {}
        self.canaries = 0
        self.switched: list[str] = []  # PyTorch's own Python switches of record functions, called (watch_switches)
        self._switches_reported = 0

    def arm(self) -> None:
        self.switches += 1
        self.armed = True
        self._arm()

    def disarm(self) -> None:
        self.switches += 1
        self.armed = False
        self._disarm()

    def tensor_class_changed(self) -> bool:
        """Right after a call, before the harness calls any method of its outputs: whether torch.Tensor's own methods
        are still the ones it had before the import (a name added there shadows a built-in method, such as clone, for
        every tensor). Cheap enough for every call: its size and the few methods of its own the harness calls;
        check() compares every entry. A change is recorded as a finding."""
        names = vars(torch.Tensor)
        hot = self._tensor_hot
        same = len(names) == len(self._tensor_class) and names.get("detach") is hot[0] and \
            names.get("__iter__") is hot[1] and names.get("__len__") is hot[2] and names.get("__hash__") is hot[3]
        if not same:
            self.replaced.append("torch.Tensor's methods (changed by the time a call returned)")
        return not same

    def judging(self) -> bool:
        """Whether a call made now is the candidate's to answer for: on the harness's thread while a call of its runs,
        on any other thread always (as the C++ side judges)."""
        return self.armed or threading.get_ident() != self.main

    def take(self, token: int) -> dict[str, str] | None:
        """The observer's counts, signed by the module for the parent (WatchJudge), after check() ran its canary."""
        try:
            text, tag = self._take(token & (2**64 - 1))
        except RuntimeError:  # no key: the parent sent none (it then judges nothing of this)
            return None
        return {"text": text, "tag": tag}

    def profiling(self) -> None:
        """Record functions on for the harness's own profiler (the profile command), its calls not judged."""
        self.switches += 1
        self._profiling()

    def check(self) -> list[dict[str, str]]:
        """Since the last check: PyTorch compute outside the allow-list it saw (any thread), and whether it still sees
        calls (a canary op) and was switched by the harness alone. Each a `forbidden_torch_op` finding."""
        self.switches += 2
        self._canary()
        try:
            pristine.torch.exp(pristine.torch.ones(2))
        finally:
            self._disarm()
        _, canaries, switches, left_off = self._state()
        findings = []
        if canaries <= self.canaries:
            findings.append("it no longer sees PyTorch's calls (its canary was not seen): its callback was removed or "
                            "record functions were switched off")
        self.canaries = canaries
        if switches != self.switches or left_off:
            findings.append("it was switched on or off by code other than the harness's, or record functions were left "
                            "off inside a call")
            self.switches = switches
        if len(self.switched) > self._switches_reported:
            findings.append(f"record functions were switched from Python ({', '.join(sorted(set(self.switched[self._switches_reported:])))})")
            self._switches_reported = len(self.switched)
        if not self._gc_reported and [id(c) for c in gc.callbacks] != self._gc_callbacks:
            findings.append("a garbage-collector callback of the candidate's own (gc.callbacks) runs its code in the "
                            "harness's own time, where its calls are not judged")
            self._gc_reported = True
        names = vars(torch.Tensor)
        changed = sorted(set(names) ^ set(self._tensor_class)) + \
            sorted(k for k, v in self._tensor_class.items() if k in names and names[k] is not v)
        if changed and not self._tensor_reported:
            self.replaced.extend(f"torch.Tensor.{k}" for k in changed[:8])
            self._tensor_reported = True
        if len(self.replaced) > self._replaced_reported:
            fresh = sorted(set(self.replaced[self._replaced_reported:]))
            findings.append("torch.Tensor's own methods were replaced or added to (the harness calls them in its own "
                            f"time, where no record judges): {', '.join(fresh[:8])}")
            self._replaced_reported = len(self.replaced)
        if len(self.bypassed) > self._bypassed_reported:
            fresh = self.bypassed[self._bypassed_reported:]
            names = ", ".join(f"{name} x{fresh.count(name)}" for name in sorted(set(fresh)))
            findings.append(f"PyTorch ops were called past the dispatcher's record of calls (a redispatch, or a kernel "
                            f"by its dispatch key): {names}")
            self._bypassed_reported = len(self.bypassed)
        found = self._found()
        new = {name: count - self.reported.get(name, 0) for name, count in found.items()
               if count > self.reported.get(name, 0)}
        self.reported = dict(found)
        if new:
            names = ", ".join(f"{k} x{v}" for k, v in sorted(new.items(), key=lambda kv: -kv[1])[:8])
            findings.append(f"it saw PyTorch compute outside the allow-list: {names}")
        return [{"flag": "forbidden_torch_op", "detail": "the ATen observer (a record-function callback of the whole "
                 f"process, on every thread, armed before the import): {text}"} for text in findings]


def watch_harness(module: Any, objects: tuple[Any, ...]) -> int:
    """Before the candidate's import: the harness's code as it is now, held by the native module (aten_watch.cpp
    watch), which compares it at every take. Every module of ours loaded by now, every class defined in one, the
    given objects' own attributes (the observer's and the census's captured functions), and gc's callbacks."""
    namespaces: list[tuple[str, Any]] = []
    for name, loaded in sorted(sys.modules.items()):
        if not (name == "agent" or name.startswith("agent.")) or loaded is None:
            continue
        space = vars(loaded)
        namespaces.append((name, space))
        namespaces += [(f"{name}.{value.__qualname__}", vars(value)) for value in list(space.values())
                       if isinstance(value, type) and value.__module__ == name]
        # and the harness's private copies of modules (pristine.py's namespaces, whose functions it calls)
        copies = [(key, value) for key, value in space.items() if isinstance(value, types.ModuleType)
                  and sys.modules.get(value.__name__) is not value]
        while copies:
            key, copy = copies.pop()
            namespaces.append((f"{name}.{key}", vars(copy)))
            copies += [(f"{key}.{k}", v) for k, v in vars(copy).items() if isinstance(v, types.ModuleType)
                       and sys.modules.get(v.__name__) is not v]
    namespaces += [(type(o).__qualname__ + " (its instance)", vars(o)) for o in objects]
    namespaces.append(("gc", vars(gc)))
    return int(module.watch(namespaces, vars(gc)))


def start(payload: dict[str, Any], internals: frozenset[str] = INTERNALS,
          objects: tuple[Any, ...] = ()) -> Observer | None:
    """In the candidate's job, before its import: the observer loaded from the build cache (the bytes checked against
    the parent's sha256) and installed. None where every op is allowed (nothing it could find)."""
    described = payload.get("aten_watch")
    allowed = frozenset(payload["allowed_ops"])
    if not described or "*" in allowed:
        return None
    secret = described.pop("secret", None)  # out of the payload before the import: only the module keeps it
    module = harness_binary.load(described, payload.get("cache_root"), MODULE, "the harness's ATen observer")
    if secret:
        module.key(bytes.fromhex(str(secret)))
    del secret
    observer = Observer(module, allowed, internals)
    watch_switches(observer.switched)
    watch_bypasses(observer)
    watch_tensor_handles(observer)
    watch_harness(module, (observer, *objects))  # last: the wrappers above are part of it
    return observer


# The methods of torch.Tensor's own (not its C base's) that the harness calls on outputs after a call, checked after every
# call (Observer.tensor_class_changed); the rest of the class is compared entry by entry after every checked call and
# batch.
_TENSOR_HOT = ("detach", "__iter__", "__len__", "__hash__")
# PyTorch's Python switches of record functions: one thread's on or off, and every callback removed (the observer's
# included). No kernel calls them; validation refuses their names, and a call made all the same is a finding.
_SWITCHES = ((torch._C._autograd, "_enable_record_function"), (torch.autograd, "_enable_record_function"),
             (torch._C._autograd, "_clear_callbacks"))


def watch_switches(called: list[str]) -> None:
    """From now on, each call of a switch of _SWITCHES appends its name to `called` before it is done."""
    for owner, name in _SWITCHES:
        original = getattr(owner, name, None)
        if original is not None:
            setattr(owner, name, _switching(original, f"{owner.__name__}.{name}", called))


def _switching(original: Any, name: str, called: list[str]) -> Any:
    def switch(*args: Any, **kwargs: Any) -> Any:
        called.append(name)
        return original(*args, **kwargs)
    return switch


def watch_bypasses(observer: Observer) -> None:
    """From now on, a PyTorch op called from Python past the dispatcher's record of calls, while the candidate's code
    is judged (Observer.judging), is one of the observer's findings. Two entry points run an op's kernel without the
    record function the observer is called from: an operator handle's redispatch (`OpOverload.redispatch`:
    the ninth red team's c1, silu and add_ redispatched to the CPU key, accepted at 1.72x with no kernel) and an
    overload's call by dispatch key (`OpOverload._op_dk`); and a kernel object's own call
    (`_SafeKernelFunction.call_boxed`, the ninth red team's c8). A candidate's own op may be redispatched (torch.library's
    autograd wrapper does it for every custom op), and so may an allowed one."""
    def bypassing(schema: Any) -> None:
        if observer.judging():
            name = str(getattr(schema, "name", ""))
            if name.partition("::")[0] in guards.TORCH_NAMESPACES and name not in observer.allowed_names:
                observer.bypassed.append(name)

    handle = torch._C._DispatchOperatorHandle
    redispatch_boxed = handle.redispatch_boxed

    def redispatch(self: Any, *args: Any, **kwargs: Any) -> Any:
        bypassing(self.schema())
        return redispatch_boxed(self, *args, **kwargs)

    handle.redispatch_boxed = redispatch

    # A kernel fetched as an object (torch._C._dispatch_get_computed_kernel_for_dispatch_key, torch.library.get_kernel)
    # and run with its call_boxed: KernelFunction::callBoxed, no dispatcher at all (the ninth red team's c8, 1.15x).
    kernel_class = getattr(torch._C, "_SafeKernelFunction", None)
    if kernel_class is not None:
        kernel_call = kernel_class.call_boxed

        def call_boxed(self: Any, *args: Any, **kwargs: Any) -> Any:
            bypassing(self.op_handle.schema())
            return kernel_call(self, *args, **kwargs)

        kernel_class.call_boxed = call_boxed

    def by_key(schema: Any, call: Any) -> Any:
        if getattr(call, "_kstudio_watched", False):
            return call

        def call_by_key(*args: Any, **kwargs: Any) -> Any:
            bypassing(schema)
            return call(*args, **kwargs)
        call_by_key._kstudio_watched = True  # type: ignore[attr-defined]
        return call_by_key

    # Where every overload's call-by-key comes from (OpOverloadPacket.__getattr__ asks it for each new overload), and
    # the overloads made before this (by PyTorch's own import, and ours).
    get_overload = torch._C._get_operation_overload

    def operation_overload(*args: Any, **kwargs: Any) -> Any:
        found = get_overload(*args, **kwargs)
        if isinstance(found, tuple) and len(found) == 3 and args:
            op, call, tags = found
            name, overload = str(args[0]), str(args[1]) if len(args) > 1 else ""
            found = (op, by_key(_Named(name, overload), call), tags)
        return found

    torch._C._get_operation_overload = operation_overload
    for made in _overloads_made():
        made._op_dk = by_key(made._schema, made._op_dk)


class _Named:
    """A schema's name, where only the name is known (what _get_operation_overload was asked for)."""

    def __init__(self, name: str, overload: str) -> None:
        self.name, self.overload_name = name, overload


def watch_tensor_handles(observer: Observer) -> None:
    """From now on, a tensor turned into a raw AOTInductor handle (or back) while the candidate's code is judged is a
    finding: with the handles, ctypes reaches the C shim's functions in libtorch (aoti_torch_cpu_*), some of which run
    the kernel directly, past the dispatcher (the ninth red team's c12; from an extension the binary scan reads them)."""
    module = getattr(torch._C, "_aoti", None)
    for name in ("unsafe_alloc_void_ptr_from_tensor", "unsafe_alloc_void_ptrs_from_tensors",
                 "alloc_tensor_by_stealing_from_void_ptr", "alloc_tensors_by_stealing_from_void_ptrs"):
        original = getattr(module, name, None) if module is not None else None
        if original is not None:
            setattr(module, name, _handing(original, name, observer))


def _handing(original: Any, name: str, observer: Observer) -> Any:
    def hand(*args: Any, **kwargs: Any) -> Any:
        if observer.judging():
            observer.bypassed.append(f"torch._C._aoti.{name} (the AOTInductor C shim's handles)")
        return original(*args, **kwargs)
    return hand


def _overloads_made() -> list[Any]:
    """Every OpOverload that exists now: each packet keeps the overloads made from it as its attributes."""
    found = []
    for namespace in list(vars(torch.ops).values()):
        if not isinstance(namespace, torch._ops._OpNamespace):
            continue
        for packet in list(vars(namespace).values()):
            if isinstance(packet, torch._ops.OpOverloadPacket):
                found.extend(v for v in list(vars(packet).values()) if isinstance(v, torch._ops.OpOverload))
    return found


@dataclass
class Counts:
    """One take of the observer's counts (aten_watch.cpp take): all since it was installed."""
    take: int
    canaries: int
    switches: int
    left_off: int
    found: dict[str, int] = field(default_factory=dict)
    changed: int = 0  # entries of the harness's code that differ from what they were before the import
    changed_names: list[str] = field(default_factory=list)
    watched: int = 0  # how many there are


def read_counts(signed: Any, secret: str, token: int) -> Counts:
    """A reply's counts, checked: signed under this job's key (kernel_census.siphash24) and taken for this command."""
    header, *lines = kernel_census.signed_lines(signed, secret, "ATen observer's counts", "the observer")
    try:
        got, take, canaries, switches, left_off, changed, watched = (int(x) for x in header.split("\t"))
        pairs = [line.split("\t", 1) for line in lines if line]
        found = {name: int(count) for count, name in pairs if count != "~"}
        changed_names = [name for mark, name in pairs if mark == "~"]
    except ValueError as exc:
        raise ValueError(f"the ATen observer's counts are malformed: {exc}") from None
    if got != token & (2**64 - 1):
        raise ValueError("the ATen observer's counts were taken for another command")
    return Counts(take, canaries, switches, left_off, found, changed, changed_names, watched)


class WatchJudge:
    """The parent's side of the observer: every checked call's and batch's counts, signed by the native module, judged
    against what the harness itself does. The harness switches the observer twice around each call of the candidate's
    and twice for the canary after it (check), so a switch of anyone else's (the harness's own Observer found through
    the garbage collector and switched off around F.silu: the ninth red team's c5) shows in the count however the
    Python side's bookkeeping was changed; so do a removed callback (no canary), record functions left off, and every
    op outside the allow-list, which no code in the candidate's process can take back."""

    def __init__(self, secret: str | None) -> None:
        self.on = bool(secret)
        self._secret = secret or ""
        self.last = Counts(0, 0, 0, 0)
        self.extra = 0  # switches the harness made beside the calls and checks since the last take (the profiler's)

    def reply(self, reply: dict[str, Any], token: int, calls: int) -> list[str]:
        """What a reply to a checked call (calls=1) or a batch of `calls` shows against the candidate."""
        if not self.on or reply.get("fatal"):
            return []
        try:
            now = read_counts(reply.get("aten_watch"), self._secret, token)
        except ValueError as exc:
            return [str(exc)]
        last, found = self.last, []
        expected = last.switches + 2 * calls + 2 + self.extra
        if now.take != last.take + 1:
            found.append(f"its counts were taken by code other than the harness's (take {now.take}, where the harness "
                         f"had asked for {last.take + 1})")
        if now.switches != expected:
            found.append(f"it was switched by code other than the harness's ({now.switches - last.switches} switches "
                         f"where the harness made {expected - last.switches})")
        if now.canaries <= last.canaries:
            found.append("it no longer sees PyTorch's calls (its canary was not seen): its callback was removed or "
                         "record functions were switched off")
        if now.left_off > last.left_off:
            found.append("record functions were switched off inside a call of the candidate's")
        if now.changed or not now.watched:
            found.append("the harness's own code was replaced while the candidate's code was loaded (" +
                         (", ".join(now.changed_names) if now.changed else "none of it was watched") +
                         "): a function or method of the harness's, or gc's callbacks, runs the candidate's code where "
                         "the harness calls it, in its own time, where nothing judges")
        new = {name: n - last.found.get(name, 0) for name, n in now.found.items() if n > last.found.get(name, 0)}
        if new:
            names = ", ".join(f"{k} x{v}" for k, v in sorted(new.items(), key=lambda kv: -kv[1])[:8])
            found.append(f"it saw PyTorch compute outside the allow-list: {names}")
        self.last, self.extra = now, 0
        return found
