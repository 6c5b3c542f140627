"""The reference's job: the problem's own outputs, the comparison with the candidate's, the baselines' timing.

It runs beside the candidate's job (handoff.py says how the two take turns on the device): it sets the problem
up while the candidate's job does the same, computes each reference output when the candidate announces its
own for that call, and compares them on the device. The reference outputs live only in this process, which
no candidate can reach (another sandbox, another pid namespace, not dumpable), and each is freed once
compared. Eager and torch.compile are timed only after the candidate's job is over and its processes gone.

Without the handoff's descriptors (the problem check, or a sequential evaluation) the candidate's layout, if
any, comes in the payload and everything runs in one go.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict
from typing import Any, BinaryIO

import torch

from agent.evaluate import guards, inputs
from agent.evaluate.codec import write_result
from agent.evaluate.compare import compare_outputs
from agent.evaluate.handoff import ReferenceSide
from agent.evaluate.jobs import (PROBLEM_MODULE, _as_list, _hardware, _Phases, _setup_device, _time_model,
                                 _time_compiled, _work_estimate)
from agent.evaluate.loader import exec_module
from agent.evaluate.plan import ProblemSetup, TrialPlan, set_up
from agent.evaluate.tensor_file import TensorFileError, TensorFileReader
from agent.evaluate.timing import last_timed_calls, timed_values
from agent.sandbox import isolation


def reference(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    # Our own code and the user's problem only: nothing here needs to be traced, so nothing may trace it.
    isolation._libc.prctl(isolation.PR_SET_DUMPABLE, 0, 0, 0, 0)
    device = payload["device"]
    plan = TrialPlan.from_payload(payload["plan"])
    header: dict[str, Any] = {"labels": plan.labels(), "comparisons": []}
    phases = _Phases(header)
    _setup_device(device, context["limits"])
    header.update(hardware=_hardware(device), toolchain={"torch": torch.__version__, "torch_cuda": torch.version.cuda})
    phases.mark("device_init")
    clocks = guards.Clocks()
    problem = exec_module(payload["problem_source"], PROBLEM_MODULE, "problem.py")
    setup = set_up(problem, plan, device)
    fds = context["fds"]
    side = ReferenceSide(*fds[1:4]) if len(fds) >= 4 else None
    layout = payload.get("candidate_outputs")
    reader = TensorFileReader(fds[0]) if fds and (side is not None or layout is not None) else None
    phases.mark("problem_setup")
    check = _Check(setup, plan, device, reader, (payload.get("rtol"), payload.get("atol_scale")), header, phases)

    with torch.no_grad():
        check.first_call()
        header["work"] = _work_estimate(setup.model, setup.checked[0], device)
        phases.mark("work_estimate")
        if side is not None:
            layout = _follow(side, check)
            header["handoff_problems"] = side.problems
            phases.mark("handoff")
        if layout is None:
            check.reader = None  # the candidate did not finish: no comparison, but the problem still runs
        else:
            check.announced(layout)
        check.rest()
        phases.mark("compare")

    if plan.timing and layout is not None and payload.get("time_baselines", True):
        header["eager"] = _time_model(setup.model, setup.value_sets, plan, device, clocks)
        phases.mark("eager_timing")
        phases.add(header["eager"].pop("phase_seconds"), "eager_timing")
        if payload["compile_baseline"]:
            header["compile"] = _time_compiled(setup.model, setup.value_sets, plan, device, clocks)
            phases.mark("compile_timing")
    write_result(result, header)


def _follow(side: ReferenceSide, check: _Check) -> list[Any] | None:
    """Compare while the candidate's job runs; returns the final layout the parent relays once it is over.

    Announced outputs are compared one call at a time, looking for new messages between calls, so that a request
    for the device is met within one comparison: what is still queued then waits until the candidate's timing
    is over (the next thing it announces, or the parent's word), when the candidate's job is busy with its last
    checked call and its exit anyway."""
    queue: deque[Any] = deque()
    gate_open = timing_over = False
    try:
        while True:
            idle = not queue or (gate_open and not timing_over)
            for event, value in side.poll(None if idle else 0):
                if event == "control":
                    return value  # whatever is still queued is in the final layout too
                if event == "timing":
                    check.device_idle()
                    side.open_gate()
                    gate_open = True
                else:
                    timing_over = timing_over or gate_open
                    queue.append(value)
            if queue and (not gate_open or timing_over):
                check.announced(queue.popleft())
    finally:
        side.open_gate()


class _Check:
    """The reference's calls, each computed once and compared with the candidate's outputs as they come."""

    def __init__(self, setup: ProblemSetup, plan: TrialPlan, device: str, reader: TensorFileReader | None,
                 tolerances: tuple[float | None, float | None], header: dict[str, Any], phases: _Phases) -> None:
        self.setup, self.plan, self.device, self.reader = setup, plan, device, reader
        self.tolerances, self.header, self.phases = tolerances, header, phases
        self.inputs = [*setup.checked, setup.final]  # call i's inputs; the last runs after the timing
        self.done: set[int] = set()
        self.held: dict[int, list[torch.Tensor]] = {}

    def first_call(self) -> None:
        """Call 0 runs at once: its outputs' shapes go in the header, and a problem that cannot run fails
        here, before any candidate output is waited for."""
        raw = self.setup.model(*self.inputs[0])
        self.header["outputs"] = [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in _as_list(raw)]
        self.header["returns_sequence"] = isinstance(raw, (tuple, list))
        self.held[0] = _as_list(raw)

    def announced(self, layout: Any) -> None:
        """Take entries the candidate wrote; compare every call whose outputs are now all there."""
        if self.reader is None:
            return
        try:
            keys = self.reader.add(layout)
        except TensorFileError as exc:
            self.header.setdefault("layout_errors", []).append(str(exc))
            return
        for index in sorted({k[1] for k in keys if len(k) == 3 and k[0] == "trial" and isinstance(k[1], int)}):
            if 0 <= index < len(self.inputs):
                self._call(index)
        if any(k and k[0] == "digest" for k in keys):
            self._timed_digests()  # written after the candidate's timing: the device is free again

    def _timed_digests(self) -> None:
        if self.plan.timing and self.reader is not None and "timed_outputs_match" not in self.header:
            self.header["timed_outputs_match"] = self.timed_outputs_match()

    def device_idle(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def rest(self) -> None:
        """Every call not compared yet (the problem must run on all of its inputs whatever the candidate did),
        and the timed calls' digests if they came only with the final layout."""
        for index in range(len(self.inputs)):
            self._call(index)
        self._timed_digests()

    def _call(self, index: int) -> None:
        if index in self.done:
            return
        self.done.add(index)
        outs = self.held.pop(index, None) or _as_list(self.setup.model(*self.inputs[index]))
        if self.reader is not None and self.reader.has(("trial", index, 0)):
            loaded = time.monotonic()
            got = self.reader.device_tensors(self.device, "trial", index)
            self.phases.add({"load": time.monotonic() - loaded}, "compare")
            self.header["comparisons"].append({"index": index, **asdict(compare_outputs(outs, got, *self.tolerances))})

    def timed_outputs_match(self) -> bool:
        assert self.reader is not None
        model, plan = self.setup.model, self.plan
        return all(
            compare_outputs(inputs.digest(_as_list(model(*timed_values(self.setup.value_sets, i))), plan.digest_seed),
                            self.reader.tensors("digest", i), *self.tolerances).passed
            for i in last_timed_calls(plan.iterations, plan.rotate))

