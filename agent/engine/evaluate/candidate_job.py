"""The candidate's job: imports the candidate first, then does what the parent asks, one command at a time.

Hostile territory (docs/threat-model.md): everything here, this code included, can be read and replaced by
the candidate's own code once it is imported. So nothing here decides anything. The module is imported
before any problem exists in this process (the problem's source, reference model, seeds and inputs never
enter it); the constructor's arguments and the reference's weights arrive as data afterwards; each call's
inputs arrive as data, written by the reference's job; timed batches run on inputs keyed by a number the
parent draws as it starts them. The parent times the batches on its own clock and the reference's job
checks every output. What the in-process checks below find is reported as flags that can only count
against the candidate: their absence proves nothing, and the parent never relies on it.
"""
from __future__ import annotations

import base64
import contextlib
import sys
import threading
import time
import traceback
import types as pytypes
from typing import Any, BinaryIO, Iterator

import torch
from torch.overrides import TorchFunctionMode

from agent.engine.build.inline import ExtensionBuildError
import agent.engine.evaluate.aten_watch as aten_watch
import agent.engine.evaluate.kernel_census as kernel_census
import agent.engine.evaluate.pristine as pristine
import agent.engine.evaluate.guards as guards
from agent.engine.evaluate.batch import ping, as_list, parking, run_batch, stand_in_shapes, zero_stand_ins
from agent.engine.evaluate.channel import JobEnd
from agent.engine.evaluate.codec import write_result
from agent.engine.evaluate.jobs import CANDIDATE_MODULE, extension_router, setup_device
import agent.engine.evaluate.keyed_cuda as keyed_cuda
from agent.engine.evaluate.keyed import Pools
from agent.engine.evaluate.loader import UnbuiltExtension, exec_module
from agent.engine.evaluate.memory import poison_blocks
from agent.engine.evaluate.parking import Shelf
from agent.engine.evaluate.plan import build_model
from agent.engine.evaluate.census_reach import watch_forks, watch_interpreter_hooks, watch_python_kernels, watch_threads
from agent.engine.evaluate.tensor_file import TensorFileReader, TensorFileWriter

# How long a checked call's outputs must stay unchanged after it returned.
_SETTLE_SECONDS = 0.02


def candidate(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    command_fd, reply_fd, exchange_fd, outputs_fd = context["fds"][:4]
    end = JobEnd(command_fd, reply_fd)
    clocks = guards.Clocks()  # before the candidate's import: a clock replaced later is its own confession
    device = payload["device"]
    setup_device(device, context["limits"], payload.get("threads"))
    census = _Census(frozenset(payload["allowed_ops"]) | guards.MEMORY_OPS, device)  # armed before the import
    watch_python_kernels(census.rearm)  # a torch.library kernel's own PyTorch calls are counted too
    watch_threads(census)  # and those of the threads the candidate starts
    watch_forks(census.in_child)  # and a process forked from the job computes nothing of PyTorch's
    watch_interpreter_hooks(census.hook_installed)  # and no interpreter hook runs its code where neither record looks
    # Beneath both: every ATen call of the process, on any thread, from inside any callback (aten_watch.py).
    observer = aten_watch.start(payload, objects=(census,))
    # And beneath everything of PyTorch's: every kernel the device runs, from CUPTI's records, judged by the parent
    # (kernel_census.py). Its key leaves the payload here, before the import.
    kernels, kernels_off = kernel_census.start(payload)
    # TorchScript runs its ops in C++, where the census (a Python function mode) never sees them, and the ATen
    # recorder is off in timed calls: a scripted fallback in timed calls only was accepted (session 40). With the
    # JIT off, torch.jit.script and torch.jit.trace hand back the Python function, whose calls are counted.
    torch.jit._state.disable()
    router = extension_router(payload, loadable=True)
    if payload.get("built_keys") is not None:  # what the trusted side built: anything else is asked of it
        router.refuse_misses, router.known = True, frozenset(payload["built_keys"])
    try:
        module = exec_module(payload["candidate_source"], CANDIDATE_MODULE, "candidate.py")
    except UnbuiltExtension as exc:
        end.reply(_unbuilt(exc))
        return
    except ExtensionBuildError as exc:
        end.reply({"fatal": True, "kind": "build_error", "error": str(exc), "log": exc.log,
                   "build_records": router.report()})
        return
    except BaseException as exc:  # noqa: BLE001 - whatever the import raised is the candidate's verdict
        end.reply({"fatal": True, "kind": "runtime_error", "error": _format_exception(exc), "build_records": router.report()})
        return
    state = _State(module, device, payload, exchange_fd, outputs_fd, census, observer)
    state.kernels = kernels
    end.reply({"ready": True, "build_records": router.report(), "kernel_census": kernels_off or "on"})
    for command in end.commands():
        try:
            with torch.no_grad():  # as the reference's job handles its commands: the same conditions for both
                reply = state.handle(command)
        except UnbuiltExtension as exc:
            reply = _unbuilt(exc)
        except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported as such
            reply = {"fatal": True, "kind": "runtime_error", "error": _format_exception(exc)}
        tampered = clocks.tampered()
        if tampered:
            reply.setdefault("flags", []).append({"flag": "timer_tampering", "detail": "replaced " + ", ".join(tampered)})
            clocks.restore()
        end.reply(reply)
        if command.get("cmd") == "exit" or reply.get("fatal"):
            break
    write_result(result, {"ended_at": time.monotonic()})


class _State:
    def __init__(self, module: Any, device: str, payload: dict[str, Any], exchange_fd: int, outputs_fd: int,
                 census: _Census, observer: aten_watch.Observer | None = None) -> None:
        self.module, self.device, self.payload, self.census = module, device, payload, census
        self.observer = observer
        self.kernels: kernel_census.Census | None = None
        self.exchange_fd, self.outputs_fd = exchange_fd, outputs_fd
        self.model: Any = None
        self.seen: dict[int, list[Any]] = {}  # the inputs of checked calls 0 and 1, the timed batches' bases
        self.bases: list[list[Any]] = []
        # The null batch's stand-in outputs (zeros of the reference's output shapes, command "bases"): the harness's share
        # measured in this process too (session.null_scale: it can only lower how much comes off).
        self.stand_in_shapes: list[tuple[torch.Size, torch.dtype]] = []
        self.stand_ins: list[torch.Tensor] = []
        self.sizes: list[int] = []
        self.pools = Pools(0)
        self.parked = False
        self.shelf = Shelf()

    def move(self, to_host: bool) -> None:
        """The harness's own device state to the host or back: the sequential fallback (memory.py) parks it while the
        reference's job works. The kept inputs go through the shelf (parking.py); the keyed draws are dropped and drawn
        again, identically, on the way back (keyed.Pools.restore). The candidate's model is its own."""
        kept = [*self.seen.values(), *self.bases]  # never both at once: the bases are the kept sets (command "bases")
        moved = self.shelf.park_sets("kept", kept) if to_host else Shelf.unpark_sets(kept, self.device)
        self.seen = dict(zip(self.seen, moved[:len(self.seen)]))
        self.bases = moved[len(self.seen):]
        if to_host:
            self.stand_ins = []  # only their shapes matter (the null batch's): remade on the way back, as the reference's
            self.pools.release()
        else:
            self.stand_ins = zero_stand_ins(self.stand_in_shapes, self.device)
            self.pools.restore()

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        name = command.get("cmd")
        parked = parking(self, name)
        if parked is not None:
            return parked
        if name == "construct":
            return self.construct(command)
        if name == "call":
            return self.call(command)
        if name == "ping":
            return ping(self.device)
        if name == "census":
            return {"flags": self.census.finish()}
        if name == "bases":
            self.pools = Pools(int(command["pool_seed"]), fresh=bool(command.get("fresh_mix", False)),
                               fused=bool(command.get("fused_mix", False)))
            self.pools.wide = tuple(s for s in command.get("wide", ()) if s in (1, -1))
            if self.pools.fused:  # loaded here, untimed: the reference's job compiled them and the parent handed them on
                binary = command.get("harness_binary")
                if isinstance(binary, str):
                    keyed_cuda.install(base64.b64decode(binary))
                else:
                    keyed_cuda.Kernels.load()
            self.bases = [self.seen[i] for i in command["from_calls"]] if "from_calls" in command else \
                [self._inputs(command["layout"], f"base{i}", command["values"][i]) for i in range(2)]
            self.seen = {}  # kept as the bases now: one copy each
            self.stand_in_shapes = stand_in_shapes(command.get("stand_ins"))  # a variant's replace the main inputs'
            self.stand_ins = zero_stand_ins(self.stand_in_shapes, self.device)
            return {"ok": True}
        if name == "batch":
            keys = [int(k) for k in command["keys"]]
            if command.get("null"):  # the harness's share in this process: keyed inputs and projections, no call
                stand_ins = self.stand_ins  # its outputs checked like the calls', so that its share is the same
                return {**self._timed_batch(lambda *args: stand_ins, keys), "null": True}  # its canary too, alike
            try:
                return self._timed_batch(self.model, keys)
            except _TimedOutputs as exc:
                return {"fatal": True, "kind": "runtime_error", "error": str(exc),
                        "flags": [{"flag": exc.flag, "detail": str(exc)}]}
        if name == "profile":
            from agent.engine.profiling import torch_profiler_summary

            args = self.bases[0]
            if self.observer is not None:  # record functions are off on this thread between calls: the profiler needs them
                self.observer.profiling()
            try:
                with torch.no_grad():
                    return {"profile": torch_profiler_summary(lambda: self.model(*args), device=self.device)}
            finally:
                if self.kernels is not None:  # the profiler registered CUPTI callbacks of its own
                    self.kernels.resume()
                if self.observer is not None:
                    self.observer.disarm()
        if name == "exit":
            return {"ok": True}
        raise ValueError(f"unknown command {name!r}")

    def _timed_batch(self, model: Any, keys: list[int]) -> dict[str, Any]:
        """A timed batch of `model`'s calls, with what the op census saw in them (after it, one canary), and the kernels
        the device ran in it (kernel_census.py: a tally taken before it, which is not the batch's, and one after)."""
        if self.kernels is not None:
            self.kernels.take(0)
        reply = run_batch(_checked_outputs(model, self.stand_in_shapes, self.census, self.observer), self.bases, keys,
                          self.device, self.pools)
        if self.kernels is not None:  # run_batch synchronised the device: every kernel of the batch has its record
            reply["kernel_census"] = self.kernels.take(kernel_census.batch_token(keys))
        found = self.census.timed_findings() + (self.observer.check() if self.observer is not None else [])
        if self.observer is not None:  # after check()'s canary: the observer's own counts, signed, for the parent
            reply["aten_watch"] = self.observer.take(kernel_census.batch_token(keys))
        return {**reply, "flags": found} if found else reply

    def _inputs(self, layout: Any, prefix: str, described: list[Any]) -> list[Any]:
        """Positional inputs: tensors from the exchange file, anything else as the JSON value it came as."""
        reader = TensorFileReader(self.exchange_fd, layout)
        values: list[Any] = []
        for j, what in enumerate(described):
            if isinstance(what, dict) and what.get("tensor"):
                found = reader.device_tensor((prefix, j), self.device)
                if found is None:
                    raise ValueError(f"input {j} is missing from the exchange file")
                values.append(found)
            else:
                values.append(what.get("value") if isinstance(what, dict) else None)
        return values

    def construct(self, command: dict[str, Any]) -> dict[str, Any]:
        if not hasattr(self.module, "ModelNew"):
            raise AttributeError("the candidate module defines no class ModelNew")
        reader = TensorFileReader(self.exchange_fd, command["layout"])
        init = [reader.device_tensors(self.device, "init", i)[0] if isinstance(v, dict) and v.get("tensor") else v
                for i, v in enumerate(command["init"])]
        self.model = build_model(self.module.ModelNew, init, int(command["weights_seed"]), self.device)
        names = command["weights"]
        state = {name: reader.device_tensors(self.device, "weight", i)[0] for i, name in enumerate(names)}
        mine = self.model.state_dict() if hasattr(self.model, "state_dict") else {}
        weights = "seeded"
        if state and set(mine) == set(state) and all(mine[k].shape == state[k].shape for k in state):
            self.model.load_state_dict(state)
            weights = "copied"
        return {"weights": weights}

    def call(self, command: dict[str, Any]) -> dict[str, Any]:
        index = int(command["index"])
        args = self._inputs(command["layout"], "input", command["values"])
        if index in (0, 1):
            self.seen[index] = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        flags: list[dict[str, str]] = []
        try:
            outs = _checked_call(self.model, args, self.sizes, self.payload, flags, self.census, self.seen.get(index),
                                 self.observer)
        except BaseException as exc:  # noqa: BLE001 - what the checks found before it failed goes with the failure
            return {"fatal": True, "kind": "runtime_error", "error": _format_exception(exc), "flags": flags}
        self.sizes = [o.numel() * o.element_size() for o in outs]
        writer = TensorFileWriter(self.outputs_fd)
        for j, out in enumerate(outs):
            writer.put(["out", j], out)
        if self.observer is not None:  # after the call's check: the observer's own counts, signed, for the parent
            return {"layout": writer.layout, "flags": flags,
                    "aten_watch": self.observer.take(kernel_census.batch_token([-1 - index]))}
        return {"layout": writer.layout, "flags": flags}


# A plain tensor's instance attributes shadow its methods (clone, untyped_storage, detach...), which the harness calls on
# an output after the call, in its own time, where no record judges: one that filled the output with F.silu(x) + bias
# from there was accepted at 1.22x with no kernel (the ninth red team's c6). No PyTorch op gives its outputs any (read
# through the type's own __dict__ slot, which no instance attribute can shadow).
_ATTRIBUTES = ("{what} carries attributes of its own (its instance __dict__ is not empty): they shadow the tensor's "
               "methods, which the harness calls after the call; leave the inputs and return the outputs as PyTorch made "
               "them")


class _TimedOutputs(Exception):
    def __init__(self, flag: str, detail: str) -> None:
        super().__init__(detail)
        self.flag = flag


def _checked_outputs(model: Any, shapes: list[tuple[torch.Size, torch.dtype]], census: _Census,
                     observer: aten_watch.Observer | None = None) -> Any:
    """The model, for timed calls: an output that shares memory with an input, or whose shape or dtype is not the
    reference's output's (`shapes`, the stand-ins'), ends the evaluation, as a checked call would have found it. A
    forward that can tell a timed call from a checked one could otherwise hand back its input itself where the
    problem's own inputs make that right (a clamp that no such input reaches: no work, and every projection agrees),
    or write half the bytes in float16 (the projection reads any dtype, and float16's rounding is about float32's
    tolerance). The op census counts the call's PyTorch compute, as in a checked call: a forward that runs its kernel
    while checked and PyTorch once timed (it counts its calls, or reads the harness's frames) is found by it. The null
    batch passes through the same census, so that its cost is in the harness's share alike. Like every check here,
    one that only counts against the candidate. The ATen observer (aten_watch.py) judges the call's thread while it
    runs, every other thread always."""
    def call(*args: Any) -> Any:
        if census.everything_allowed:  # a sanity sweep's problem-as-candidate: nothing the census could find
            outs = model(*args)
        else:
            census.arm(census.TIMED)  # not a context manager: this runs once per timed call, a few microseconds apiece
            census.count_modes(census.TIMED)  # a forward that calls only its extension passes no call through it
            if observer is not None:
                observer.arm()
            try:
                outs = model(*args)
            finally:
                if observer is not None:
                    observer.disarm()
                census.disarm()
            if observer is not None:
                observer.tensor_class_changed()  # before any method of the outputs is called: a finding, reported later
        dressed = [j for j, arg in enumerate(args) if type(arg) is torch.Tensor and vars(arg)]
        if dressed:  # the inputs are the harness's, but in the forward's hands: their methods are called next
            raise _TimedOutputs("input_mutated", _ATTRIBUTES.format(what=f"a timed call's input {dressed[0]}"))
        listed = as_list(outs)
        inputs: list[tuple[int, tuple[str, int, int, int]]] | None = None  # each input's memory, read once per call
        for i, out in enumerate(listed):
            if type(out) is not torch.Tensor:  # run_batch refuses it; none of its methods is called here
                continue
            if vars(out):
                raise _TimedOutputs("not_a_plain_tensor", _ATTRIBUTES.format(what=f"a timed call's output {i}"))
            if i < len(shapes) and (out.shape != shapes[i][0] or out.dtype != shapes[i][1]):
                raise _TimedOutputs("output_metadata", f"a timed call's output {i} is {out.dtype} of shape "
                                    f"{tuple(out.shape)}, where the reference's is {shapes[i][1]} of {tuple(shapes[i][0])}")
            if inputs is None:
                inputs = [(j, guards.memory_span(arg)) for j, arg in enumerate(args) if isinstance(arg, torch.Tensor)]
            span = guards.memory_span(out)
            for j, arg_span in inputs:
                if guards.spans_overlap(span, arg_span):
                    raise _TimedOutputs("output_aliases_input", f"a timed call's output {i} shares memory with its input {j}")
        if shapes and len(listed) != len(shapes):
            raise _TimedOutputs("output_metadata", f"a timed call returned {len(listed)} outputs, where the reference "
                                f"returns {len(shapes)}")
        return outs
    return call


class _Census(TorchFunctionMode):
    """A second, independent record of the PyTorch compute the candidate's forward called: a TorchFunctionMode
    pushed before the candidate's module is imported and popped after the checked calls (finish()), then pushed again
    around each timed call (arm(), reported after each batch by timed_findings()). It sees
    calls at PyTorch's Python API (torch.sigmoid, Tensor.__mul__, F.softmax...), where the dispatch-mode op
    recorder sees ATen ops: popping the dispatch modes (torch.utils._python_dispatch._disable_current_modes) or
    replacing a TorchDispatchMode's method does not switch it off, and a canary the harness runs after every
    forward shows whether something else did. Both live in the candidate's process (docs/threat-model.md says
    what that leaves). It counts only the forward's own top-level calls, by ATen name."""

    # Where the calls it sees come from: a checked call (forward()), a timed one (set by _checked_outputs, with no
    # canary after each: the batch's one follows it), the harness's canary; None: the harness's own work.
    FORWARD, TIMED, CANARY = "forward", "timed", "canary"
    CHILD = "child"  # in a process forked from the job (census_reach.watch_forks): PyTorch compute there fails

    def __init__(self, allowed: frozenset[str], device: str) -> None:
        super().__init__()
        self.allowed = allowed
        # Every op allowed (EvalConfig.allow_any_torch_op): the timed calls are not passed through it, since nothing in
        # them could be a finding; its push and its Python call per PyTorch call would only weigh on the candidate.
        self.everything_allowed = "*" in allowed
        self.calls = 0
        self.canaries = 0
        self.forbidden: dict[str, int] = {}
        self.forbidden_timed: dict[str, int] = {}  # in timed calls (pushed again around each: arm())
        self.reported_timed = 0  # how many of those a batch's reply has reported already
        self.where: str | None = None
        self._thread = _PerThread()  # inside a call it passed on, per thread: threads carry the census too
        self.armed = True
        self.result: list[dict[str, str]] | None = None
        self.recorder: guards.OpRecorder | None = None  # the checked call's ATen recorder, put back with the census
        self.__enter__()

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        # Every PyTorch call of a timed forward comes through here, so this stays lean: its cost falls on the candidate's
        # figure. On the 2-core box (session 41, /tmp/census_bench) 1.59 us a call over the bare call with the name looked
        # up by a call of its own, every argument walked by _taken_over and the thread's depth read three times and
        # written twice; 1.26 us with the name looked up here, _taken_over asked only where an argument is not of a
        # plain type (by identity: _SIMPLE_ARGUMENTS) and the depth set to 1 and back to 0. 0.70 us of it is PyTorch's
        # dispatch to any Python mode.
        local = self._thread
        if local.depth:  # inside a call this census passed on (a Python kernel's calls come back through rearm)
            local.depth += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                local.depth -= 1
        where = self.where
        if where is not None:
            known = _ATEN_NAMES.get(id(func))
            name = known[1] if known is not None and known[0] is func else _aten_name_cached(func)
            if where == self.CHILD:
                _refuse_in_child(name if name is not None and name not in self.allowed else None, types, args, kwargs)
            elif where == self.CANARY:
                if name == "exp":
                    self.canaries += 1
            else:
                if name is not None and name not in self.allowed:
                    self._count(where, name)
                if _python_dispatcher_on(_PYTHON_DISPATCHER):
                    self._count(where, "a call with the Python dispatcher on (its Python kernels run beneath both records)")
                if _dispatch_modes() > (where == self.FORWARD and self.recorder is not None):  # count_modes, inline
                    self.count_modes(where)
                # No type of the candidate's own in `types`, no keyword argument, and every positional one's type is
                # one of _SIMPLE_ARGUMENTS: _taken_over would find nothing (it is asked whenever any of that fails).
                if types or kwargs or not _SIMPLE_ARGUMENTS.issuperset(map(id, map(type, args))):
                    for taken in _taken_over(types, args, kwargs):
                        self._count(where, taken)
        local.depth = 1
        try:
            return func(*args, **(kwargs or {}))
        finally:
            local.depth = 0

    def _count(self, where: str, name: str) -> None:
        if self.everything_allowed:
            return
        found = self.forbidden if where == self.FORWARD else self.forbidden_timed
        found[name] = found.get(name, 0) + 1

    def count_modes(self, where: str) -> None:
        """A dispatch mode of the candidate's own on PyTorch's stack (beyond the checked call's recorder): its handler
        runs ops beneath the recorder, where both records are off their stacks (a mode entered at import and never
        left ran F.silu for every call, accepted; the eighth red team). No kernel needs one."""
        if _dispatch_modes() > (1 if where == self.FORWARD and self.recorder is not None else 0):
            self._count(where, "a dispatch mode of the candidate's own (its handler runs beneath both records)")

    def hook_installed(self, called: str) -> None:
        """The candidate installed an interpreter hook (census_reach.watch_interpreter_hooks), at import, in a forward or
        anywhere else: a finding of the checked calls' until they are reported (finish()), of the timed calls' after."""
        if self.everything_allowed:
            return
        name = f"{called} (an interpreter hook: what it runs inside PyTorch calls no record sees)"
        found = self.forbidden if self.result is None else self.forbidden_timed
        found[name] = found.get(name, 0) + 1

    def in_child(self) -> None:
        """In a process forked from the job (census_reach.watch_forks): from now on its PyTorch compute fails."""
        self.where = self.CHILD

    @property
    def depth(self) -> int:
        return self._thread.depth

    @depth.setter
    def depth(self, value: int) -> None:
        self._thread.depth = value

    @contextlib.contextmanager
    def forward(self, recorder: guards.OpRecorder | None = None) -> Iterator[None]:
        self.calls += 1
        self.where, self.recorder = self.FORWARD, recorder
        try:
            yield
        finally:
            self.where, self.recorder = None, None

    @contextlib.contextmanager
    def rearm(self) -> Iterator[None]:
        """Around a Python kernel the candidate registered (census_reach.py), inside a forward: the census and the
        checked call's recorder, each off the stack while its own handler runs the op, are put back on it, and the
        kernel's calls count as the forward's own. Outside a forward (the harness's own work) nothing changes."""
        if self.where not in (self.FORWARD, self.TIMED):
            yield
            return
        depth, self.depth = self.depth, 0
        try:
            with self:
                if self.recorder is not None:
                    with self.recorder:
                        yield
                else:
                    yield
        finally:
            self.depth = depth

    def timed_findings(self) -> list[dict[str, str]]:
        """After a timed batch: the census still armed (its canary seen), and any PyTorch compute outside the
        allow-list that the batch's calls ran."""
        before = self.canaries
        self.arm(None)
        try:
            self.canary()
        finally:
            self.disarm()
        if self.canaries == before:
            return [{"flag": "forbidden_torch_op", "detail": "the op census was switched off or tampered with by the "
                     "time the timed calls ran (its canary after a batch was not seen)"}]
        total = sum(self.forbidden_timed.values())
        if total == self.reported_timed:
            return []
        self.reported_timed = total
        names = ", ".join(sorted(self.forbidden_timed, key=lambda k: -self.forbidden_timed[k])[:8])
        return [{"flag": "forbidden_torch_op", "detail": "the op census (a function mode armed before the import "
                 f"and around every timed call) saw PyTorch compute calls outside the allow-list in timed calls: "
                 f"{names}"}]

    def canary(self) -> None:
        self.where = self.CANARY
        try:
            pristine.torch.exp(pristine.torch.ones(2))
        finally:
            self.where = None

    def arm(self, where: str | None) -> None:
        """On the mode stack again for one timed call (or a batch's canary): between the calls the harness's own torch
        calls do not pass through it, so that it costs the timed batches only what the forward's calls cost."""
        self.__enter__()
        self.where = where

    def disarm(self) -> None:
        self.where = None
        self.__exit__(None, None, None)

    def finish(self) -> list[dict[str, str]]:
        """The checked calls' findings; the mode leaves the stack, to be pushed again around each timed call."""
        if self.result is not None:
            return self.result
        try:
            self.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001 - a census the candidate broke is a finding against it
            self.result = [{"flag": "forbidden_torch_op", "detail": f"the op census was tampered with: {type(exc).__name__}: {exc}"[:500]}]
            return self.result
        self.result = []
        if self.canaries < self.calls:
            self.result.append({"flag": "forbidden_torch_op", "detail": f"the op census saw {self.canaries} of the harness's "
                                f"{self.calls} canary calls: it was switched off or tampered with"})
        if self.forbidden:
            names = ", ".join(f"{k} x{v}" for k, v in sorted(self.forbidden.items(), key=lambda kv: -kv[1])[:8])
            self.result.append({"flag": "forbidden_torch_op", "detail": f"the op census (a function mode armed before the "
                                f"import) saw PyTorch compute calls outside the allow-list in forward: {names}"})
        return self.result


# Python operators on tensors and the ATen op each stands for (reflected and in-place forms too).
_OPERATORS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "div": "div", "floordiv": "floor_divide", "mod": "remainder",
              "pow": "pow", "matmul": "matmul", "neg": "neg", "abs": "abs", "invert": "bitwise_not", "and": "bitwise_and",
              "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift",
              "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}
# ATen names that are no tensor compute (list and dict helpers that share a name with a Python method).
_NOT_COMPUTE = frozenset({"get", "len", "format", "str", "list", "dim", "numel", "is_contiguous", "data_ptr", "element_size",
                          "stride", "storage_offset", "is_floating_point", "is_complex", "__contains__", "keys", "values",
                          # Tensor methods written in Python that compute nothing (counted by name otherwise, _aten_name)
                          "storage", "untyped_storage", "is_shared", "share_memory", "register_hook", "dim_order",
                          "register_post_accumulate_grad_hook", "module_load", "get_device", "is_pinned"})


# _aten_name's answers by the function's identity (the same few functions come back on every call), each with the
# function itself, kept so that its id is never reused: by id and `is`, so that no callable's own __hash__ or __eq__
# can make it pass for another.
_ATEN_NAMES: dict[int, tuple[Any, str | None]] = {}


def _aten_name_cached(func: Any) -> str | None:
    found = _ATEN_NAMES.get(id(func))
    if found is not None and found[0] is func:
        return found[1]
    name = _aten_name(func)
    _ATEN_NAMES[id(func)] = (func, name)
    return name


def _aten_name(func: Any) -> str | None:
    """The ATen op a PyTorch API function stands for (Tensor.__mul__, __rmul__, __imul__ and mul_ -> mul), or None
    for what is not one (attribute getters, __getitem__, the candidate's own functions and ops). An op called through
    torch.ops by its overload (torch.ops.aten._softmax.default, whose __name__ is "_softmax.default") is named by its
    packet, ATen's or prims' alike; an op of another namespace is the candidate's own, and its Python kernel, if it
    has one, is counted from inside (census_reach.py)."""
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        packet = func.overloadpacket if isinstance(func, torch._ops.OpOverload) else func
        namespace, _, op = packet._qualified_op_name.partition("::")
        return None if op in _NOT_COMPUTE else guards.torch_op_name(namespace, op)
    name = getattr(func, "__name__", "") or ""
    if name.startswith("__"):
        bare = name.strip("_")
        for prefix in ("", "r", "i"):
            if bare.startswith(prefix) and bare[len(prefix):] in _OPERATORS:
                return _OPERATORS[bare[len(prefix):]]
        return None
    name = name.rstrip("_")
    if not name or name in _NOT_COMPUTE:
        return None
    if hasattr(torch.ops.aten, name):
        return name
    # PyTorch's own Python functions with no ATen op of their name (F.softsign, F.softmin, F.normalize, F.interpolate,
    # F.cross_entropy...) compute through other calls, made inside this one where the census does not see them: each
    # counts under its own name (the fifth red team: their calls were counted by nothing in timed calls).
    if isinstance(func, pytypes.FunctionType) and str(getattr(func, "__module__", "")).startswith("torch"):
        return name
    return None


# With the Python dispatcher on, an op's Python kernels (OpOverload.py_impl and the tables it fills) run beneath the
# dispatcher, inside whichever record saw the op and off its stack: torch.zeros_like with F.silu as its CPU kernel
# was accepted with no kernel at all (the eighth red team). No kernel needs it on.
_python_dispatcher_on = torch._C._dispatch_tls_is_dispatch_key_included
_PYTHON_DISPATCHER = torch._C.DispatchKey.PythonDispatcher
_dispatch_modes = torch._C._len_torch_dispatch_stack


class _PerThread(threading.local):
    depth = 0  # how many calls the census passed on are running in this thread (their own calls are theirs)


def _taken_over(types: Any, args: tuple, kwargs: dict | None) -> list[str]:
    """What of the candidate's own takes this call over, one finding per type. A type of its own takes the call over
    through its __torch_function__ (then it is in `types`) or, with that disabled as nn.Parameter's is, beneath the
    dispatcher through its __torch_dispatch__ (then only the arguments show it, lists and tuples of them included); its
    handler runs inside this call, unseen: torch.clone of such a box ran torch.softmax, and of such a subclass F.silu
    (the fifth red team, accepted at 1.29x). Every type but a plain tensor's or a parameter's counts, told apart by
    identity (guards.PLAIN_TENSOR_IDS: a metaclass's __eq__ and __hash__ made a subclass equal to torch.Tensor's).
    So does any other argument that is not a value of Python's or PyTorch's own (_PLAIN_VALUE_IDS), however nested in
    lists, tuples and dicts: PyTorch calls its methods (__index__, __float__, __len__, __iter__...) from inside the
    call, while the census is off the stack, and x[index] with torch.softmax in the index's __index__ was seen by
    nothing in timed calls (the seventh red team, accepted at 1.70x)."""
    plain = guards.PLAIN_TENSOR_IDS
    overriding = {id(kind) for kind in types}
    found = [f"__torch_function__ of {_qualname(kind)}" for kind in types if id(kind) not in plain]
    pending: list[tuple[Any, int]] = [(value, 0) for value in (*args, *(kwargs.values() if kwargs else ()))]
    looked = 0
    while pending:
        item, depth = pending.pop()
        kind = type(item)
        looked += 1
        if id(kind) in _CONTAINER_IDS:
            if depth >= _NESTING or looked > _ITEMS:
                found.append(f"an argument nested past what the census looks into ({_qualname(kind)})")
                break
            values = (*item.keys(), *item.values()) if kind is dict else \
                (item.start, item.stop, item.step) if kind is slice else item
            pending.extend((value, depth + 1) for value in values)
        elif id(kind) in plain or id(kind) in _PLAIN_VALUE_IDS:
            continue
        elif isinstance(item, torch.Tensor):
            if id(kind) not in overriding:
                found.append(f"__torch_dispatch__ of {_qualname(kind)}")
        else:
            found.append(f"an argument of type {_qualname(kind)} (its methods run inside the call, unseen)")
    return list(dict.fromkeys(found))


# The argument values that carry no code of the candidate's, by their type's identity: Python's scalars and PyTorch's
# descriptors, and numpy's numeric scalars where numpy is loaded. Each type is kept alive by its module, so no id is
# reused. A list, a tuple, a dict or a slice (exactly those types) is looked into, up to _NESTING levels and
# _ITEMS values.
_PLAIN_VALUE_TYPES: tuple[type, ...] = (
    int, float, bool, complex, str, bytes, type(None), type(Ellipsis), range,
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, torch.Generator, torch.qscheme,
    torch.Stream, torch.Event, torch.cuda.Stream, torch.cuda.Event)
# Not torch.SymInt and its kin: one can wrap any Python object, whose methods PyTorch calls inside the op (x[:s] ran
# the object's guard_int inside Tensor.__getitem__: accepted at 1.51x with no kernel, the eighth red team).
_numpy = sys.modules.get("numpy")
if _numpy is not None:  # its numeric scalars (not its arrays: one of objects is the candidate's objects again)
    _PLAIN_VALUE_TYPES += tuple({t for t in _numpy.sctypeDict.values()
                                 if isinstance(t, type) and issubclass(t, (_numpy.number, _numpy.bool_))})
_PLAIN_VALUE_IDS = frozenset(map(id, _PLAIN_VALUE_TYPES))
# A slice holds any three objects, whose __index__ PyTorch calls from inside the call (x[slice(index, None)]).
_CONTAINER_IDS = frozenset(map(id, (list, tuple, dict, slice)))
_NESTING, _ITEMS = 4, 4096
# The argument types that take no call over (_taken_over finds nothing in them), by identity: the plain tensors and
# values. A list, a tuple, a dict or any other type is looked into by _taken_over.
_SIMPLE_ARGUMENTS = guards.PLAIN_TENSOR_IDS | _PLAIN_VALUE_IDS


def _qualname(kind: Any) -> str:
    return str(getattr(kind, "__qualname__", kind))


def _refuse_in_child(name: str | None, types: Any, args: tuple, kwargs: dict | None) -> None:
    """In a process forked from the candidate's job, PyTorch compute (or a call a type of its own takes over) fails:
    nothing there reaches the verdict, so a helper forked at import ran torch.softmax for every call unseen (the fifth
    red team's x6, accepted). Its own kernels run there as anywhere."""
    taken = _taken_over(types, args, kwargs)
    if name is not None or taken:
        what = name if name is not None else f"a call taken over: {taken[0]}"
        raise RuntimeError(f"PyTorch compute ({what}) in a process forked from the candidate's job: the evaluation "
                           "counts only the job's own process, so compute there must be the candidate's own kernels")


def _own_tensors(model: Any) -> list[torch.Tensor]:
    """The model's parameters and buffers as they are now, read from its modules' own tables without calling any method
    of the candidate's: an override of parameters(), which the harness used to call after each checked call, ran the
    candidate's code in the harness's own time (the ninth red team's c13 and c14b). A parameter made in forward is
    among them (exploit_cpp_alias_output_parameter)."""
    found: list[torch.Tensor] = []
    seen: set[int] = set()
    pending = [model]
    while pending and len(seen) < 100_000:
        module = pending.pop()
        if id(module) in seen or not issubclass(type(module), torch.nn.Module):
            continue
        seen.add(id(module))
        tables = vars(module)
        for name in ("_parameters", "_buffers"):
            table = dict.get(tables, name)
            if issubclass(type(table), dict):
                found.extend(v for v in dict.values(table) if type(v) in (torch.Tensor, torch.nn.Parameter))
        children = dict.get(tables, "_modules")
        if issubclass(type(children), dict):
            pending.extend(dict.values(children))
    return found


def _unbuilt(exc: UnbuiltExtension) -> dict[str, Any]:
    return {"fatal": True, "kind": "unbuilt", "error": str(exc), "specs": [exc.spec]}


def _format_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]


def _poison(sizes: list[int], device: str) -> None:
    """Fill freed allocator blocks of the outputs' sizes with NaN bytes, so a candidate that returns
    uninitialised memory (hoping it holds a previous result) returns NaNs instead. As many blocks per size as the
    memory plan allows for (memory.poison_blocks)."""
    blocks = []
    for nbytes in sizes:
        for _ in range(poison_blocks(sum(sizes))):
            blocks.append(torch.full((max(nbytes, 1),), 0xFF, dtype=torch.uint8, device=device))
    del blocks


def _checked_call(model: Any, args: list[Any], sizes: list[int], payload: dict[str, Any],
                  flags: list[dict[str, str]], census: _Census, kept: list[Any] | None = None,
                  observer: aten_watch.Observer | None = None) -> list[torch.Tensor]:
    """One correctness call with the in-process checks around it (advisory: see the module's docstring). `kept` is a
    copy of the inputs made already (calls 0 and 1 keep theirs as the timed batches' bases): the mutation check
    compares with it instead of a copy of its own (memory.py counts what is left)."""
    device = payload["device"]
    cuda = device == "cuda"

    def flag(name: str, detail: str) -> None:
        if not any(f["flag"] == name for f in flags):
            flags.append({"flag": name, "detail": detail})

    originals = kept if kept is not None else [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    _poison(sizes, device)
    threads_before = guards.python_threads()
    recorder = guards.OpRecorder(frozenset(payload["allowed_ops"]))
    with torch.no_grad():
        with recorder:
            with census.forward(recorder):
                census.count_modes(census.FORWARD)  # one left on the stack before the call (at import, or by the last)
                if observer is not None:
                    observer.arm()
                try:
                    raw = model(*args)
                finally:
                    if observer is not None:
                        observer.disarm()
                        observer.tensor_class_changed()
            live = guards.recorder_is_live(recorder)
        census.canary()
    outs = as_list(raw)
    bad_types = [type(o).__name__ for o in outs if type(o) is not torch.Tensor]
    if bad_types:
        flag("not_a_plain_tensor", f"forward returned {', '.join(bad_types)}, not plain torch.Tensor")
        raise TypeError(f"the candidate returned {', '.join(bad_types)} instead of torch.Tensor outputs")
    dressed = [i for i, o in enumerate(outs) if vars(o)]
    if dressed:
        detail = _ATTRIBUTES.format(what=f"output {dressed[0]}")
        flag("not_a_plain_tensor", detail)
        raise TypeError(detail)
    dressed = [j for j, a in enumerate(args) if type(a) is torch.Tensor and vars(a)]
    if dressed:  # an input given attributes in the forward (the ninth red team's c9: the alias check ran its method)
        detail = _ATTRIBUTES.format(what=f"input {dressed[0]}")
        flag("input_mutated", detail)
        raise TypeError(detail)
    if cuda:
        pristine.torch.cuda.current_stream().synchronize()
    snapshot = [o.clone() for o in outs]
    if cuda:
        pristine.torch.cuda.synchronize()
    time.sleep(_SETTLE_SECONDS)
    changed = [i for i, (o, s) in enumerate(zip(outs, snapshot)) if not guards.bitwise_equal(o, s)]
    if changed:
        flag("side_stream" if cuda else "work_after_return",
             f"output {changed[0]} kept changing after forward returned: work still running"
             + (" on another stream" if cuda else " in the background"))
    new_threads = guards.python_threads() - threads_before
    if new_threads:
        flag("background_thread", f"{len(new_threads)} Python thread(s) started by forward were still alive after it returned")
    if not live:
        flag("forbidden_torch_op", "the candidate disabled the dispatch mode that records PyTorch ops")
    if recorder.forbidden:
        names = ", ".join(f"{k} x{v}" for k, v in recorder.forbidden.most_common(8))
        flag("forbidden_torch_op", f"forward ran PyTorch compute ops outside the allow-list: {names}")
    for found in observer.check() if observer is not None else []:
        flag(found["flag"], found["detail"])
    if recorder.downgrades:
        flag("precision_downgrade", "forward converted to lower precision: " + ", ".join(recorder.downgrades))
    params = _own_tensors(model)
    for i, o in enumerate(outs):
        for j, a in enumerate(args):
            if isinstance(a, torch.Tensor) and guards.overlaps(o, a):
                flag("output_aliases_input", f"output {i} shares memory with input {j}")
        if any(guards.overlaps(o, p) for p in params):
            flag("output_aliases_parameter", f"output {i} shares memory with a parameter or buffer")
    for j, (a, before) in enumerate(zip(args, originals)):
        if isinstance(a, torch.Tensor) and not guards.bitwise_equal(a, before):
            flag("input_mutated", f"input {j} was modified by forward")
    if cuda:
        pristine.torch.cuda.synchronize()
    return outs

