"""The jobs that run inside sandboxed children: build, candidate (and ncu profiling); the reference's job is
in reference_job.py.

The candidate's job writes its outputs to a memfd and announces each call's as they are written; the
reference's job runs beside it, in another sandbox, computes the reference outputs and compares on the
device (handoff.py). The candidate never shares a process with reference outputs. Both jobs build weights
and inputs themselves from the same seeds (plan.py). Each job writes one result (codec.py). Everything a
candidate does wrong becomes part of its result; only harness bugs raise.
"""
from __future__ import annotations

import os
import platform
import sys
import time
import traceback
from typing import Any, BinaryIO, Callable

import torch

from agent.build.cache import BuildCache
from agent.build.inline import ExtensionBuildError
from agent.build.toolchain import detect_toolchain
from agent.evaluate import guards
from agent.evaluate.codec import write_result
from agent.evaluate.handoff import CandidateSide
from agent.evaluate.loader import ExtensionRouter, cache_root_from, exec_module
from agent.evaluate.plan import ProblemSetup, TrialPlan, build_model, set_up
from agent.evaluate.tensor_file import TensorFileWriter
from agent.evaluate.timing import TimedRun, time_calls

PROBLEM_MODULE = "kstudio_problem"
CANDIDATE_MODULE = "kstudio_candidate"
# How long a checked call's outputs must stay unchanged after it returned.
_SETTLE_SECONDS = 0.02


class _Phases:
    """Seconds spent in each phase of a job, reported in its header (and the verdict's `seconds`)."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.seconds: dict[str, float] = header.setdefault("phase_seconds", {})
        self.last = time.monotonic()
        # The monotonic clock is the host's, shared by every process: the parent takes these off its own
        # send and receive times to see the job's start-up (fork, namespaces) and exit (CUDA teardown).
        header["began_at"] = self.last

    def add(self, seconds: dict[str, float], prefix: str) -> None:
        """Sub-phases measured elsewhere (inside the last phase), reported beside it."""
        for name, spent in seconds.items():
            self.seconds[f"{prefix}.{name}"] = self.seconds.get(f"{prefix}.{name}", 0.0) + spent

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self.last
        self.last = now


def _as_list(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _router(payload: dict[str, Any], loadable: bool) -> ExtensionRouter:
    toolchain = detect_toolchain(payload.get("cuda_arch"))
    router = ExtensionRouter(toolchain, BuildCache(cache_root_from(payload.get("cache_root"))), loadable)
    router.install()
    return router


def _hardware(device: str) -> dict[str, Any]:
    facts: dict[str, Any] = {"host_cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        facts.update(gpu=props.name, sm_count=props.multi_processor_count, capability=f"{props.major}.{props.minor}",
                     gpu_memory_bytes=props.total_memory, l2_bytes=getattr(props, "L2_cache_size", None))
    return facts


def _setup_device(device: str, limits: dict[str, Any] | Any) -> None:
    if device == "cuda":
        torch.cuda.init()
        fraction = getattr(limits, "gpu_memory_fraction", 0.9)
        torch.cuda.set_per_process_memory_fraction(fraction)


# --------------------------------------------------------------------------------------------- build

def build(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    """Import the candidate with its compile calls routed to the cache; the builds are the point.
    On a host that cannot run what it built, the candidate's later use fails harmlessly here."""
    router = _router(payload, loadable=payload.get("loadable", False))
    header: dict[str, Any] = {"ok": True, "import_error": None}
    started = time.monotonic()
    try:
        exec_module(payload["candidate_source"], CANDIDATE_MODULE, "candidate.py")
    except ExtensionBuildError as exc:
        header.update(ok=False, error=str(exc), log=exc.log)
    except BaseException as exc:  # noqa: BLE001 - the candidate's import failing is a finding
        header["import_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    header.update(seconds=time.monotonic() - started, records=router.report(),
                  toolchain=router.toolchain.to_dict())
    write_result(result, header)


# ------------------------------------------------------------------------ timing (both jobs; reference: reference_job.py)

def _time_model(model: Any, value_sets: list[list[Any]], plan: TrialPlan, device: str,
                clocks: guards.Clocks) -> dict[str, Any]:
    _, run = _timed_run(model, value_sets, plan, device, clocks)
    return {"device": run.spread(), "host": run.spread(host=True), "phase_seconds": run.phase_seconds}


def _timed_run(model: Any, value_sets: list[list[Any]], plan: TrialPlan, device: str,
               clocks: guards.Clocks, before_timed: Callable[[], None] | None = None) -> tuple[list[list[Any]], TimedRun]:
    """The timing protocol (timing.py) on `rotate` fresh buffers; returns the buffers and the run."""
    buffers, sets = _timing_inputs(value_sets, plan.rotate)
    with torch.no_grad():
        run = time_calls(model, buffers, sets, device=device, iterations=plan.iterations,
                         warmup_ms=plan.warmup_ms, clocks=clocks, digest_seed=plan.digest_seed,
                         before_timed=before_timed)
    return buffers, run


def _timing_inputs(value_sets: list[list[Any]], rotate: int) -> tuple[list[list[Any]], list[list[Any]]]:
    """`rotate` input buffers to time on (the values are copied into them per call), and the value sets."""
    buffers = [[v.clone() if isinstance(v, torch.Tensor) else v for v in value_sets[0]] for _ in range(rotate)]
    return buffers, value_sets


def _time_compiled(model: Any, value_sets: list[list[Any]], plan: TrialPlan, device: str,
                   clocks: guards.Clocks) -> dict[str, Any]:
    started = time.monotonic()
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*value_sets[0])
    except Exception as exc:  # noqa: BLE001 - a problem torch.compile cannot handle has no compile baseline
        return {"error": f"torch.compile failed: {type(exc).__name__}: {exc}"[:2000]}
    compile_seconds = time.monotonic() - started
    timed = _time_model(compiled, value_sets, plan, device, clocks)
    timed["compile_seconds"] = compile_seconds
    return timed


def _work_estimate(model: Any, values: list[Any], device: str) -> dict[str, Any]:
    """The least work any correct kernel must do: bytes in and out, and the reference's FLOPs."""
    from torch.utils.flop_counter import FlopCounterMode

    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    moved = sum(t.numel() * t.element_size() for t in tensors)
    moved += sum(p.numel() * p.element_size() for p in model.parameters())
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        sample = model(*values)
    moved += sum(o.numel() * o.element_size() for o in _as_list(sample) if isinstance(o, torch.Tensor))
    work: dict[str, Any] = {"bytes": moved, "flops": int(counter.get_total_flops())}
    if device == "cuda":
        work["copy_bytes_per_s"] = _measured_bandwidth()
    return work


def _measured_bandwidth() -> float:
    """A device-to-device copy (bytes read + written per second): the memory roof."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end))
    return 2 * src.numel() / (best / 1000)


# ----------------------------------------------------------------------------------------- candidate

def candidate(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    """Set up the problem's weights and inputs from the seed, then load and run the candidate. Its
    outputs go to the memfd the parent handed over (context["fds"][0]); its findings to the header."""
    clocks = guards.Clocks()  # before any candidate code can replace a clock
    device = payload["device"]
    plan = TrialPlan.from_payload(payload["plan"])
    header: dict[str, Any] = {"stage": "problem", "flags": [], "trials": [], "isolation": context["isolation"]}
    phases = _Phases(header)
    writer = TensorFileWriter(context["fds"][0])
    side = CandidateSide(*context["fds"][1:3])
    try:
        _setup_device(device, context["limits"])
        phases.mark("device_init")
        try:
            setup = _problem_setup(payload, plan, device)
        except BaseException as exc:  # noqa: BLE001 - the problem's own failure, reported as such
            header.update(status="problem_error", error=_format_exception(exc))
            raise _Stop from exc
        phases.mark("problem_setup")
        header["stage"] = "load"
        router = _router(payload, loadable=True)
        try:
            module = exec_module(payload["candidate_source"], CANDIDATE_MODULE, "candidate.py")
        finally:
            header["build_records"] = router.report()
        model, header["weights"] = _build_candidate(module, setup, plan, device)
        phases.mark("load")
        header["stage"] = "correctness"
        _run_candidate(model, setup, plan, payload, header, clocks, writer, side, phases)
        header["stage"] = "done"
    except _Stop:
        pass
    except ExtensionBuildError as exc:
        header.update(status="build_error", error=str(exc), log=exc.log)
    except BaseException as exc:  # noqa: BLE001 - whatever the candidate raised is its verdict
        header.update(status="runtime_error", error=_format_exception(exc))
    header["tampered"] = clocks.tampered()
    clocks.restore()
    header["outputs"] = writer.layout
    header["ended_at"] = time.monotonic()
    write_result(result, header)


class _Stop(Exception):
    """The job ends early with its finding already in the header."""


def _problem_setup(payload: dict[str, Any], plan: TrialPlan, device: str) -> ProblemSetup:
    """The reference's weights and every input, built before any candidate code runs; the problem's
    module is then forgotten, so the candidate cannot import the reference model by name."""
    problem = exec_module(payload["problem_source"], PROBLEM_MODULE, "problem.py")
    setup = set_up(problem, plan, device)
    sys.modules.pop(PROBLEM_MODULE, None)
    return setup


def _format_exception(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    # Keep the candidate's frames and the message; our harness frames are noise to the reader.
    text = "".join(lines)
    return text[-6000:]


def _build_candidate(module: Any, setup: ProblemSetup, plan: TrialPlan, device: str) -> tuple[Any, str]:
    if not hasattr(module, "ModelNew"):
        raise AttributeError("the candidate module defines no class ModelNew")
    model = build_model(module.ModelNew, setup.init_inputs, plan.weights_seed, device)
    state = setup.model.state_dict()
    mine = model.state_dict() if hasattr(model, "state_dict") else {}
    weights = "seeded"
    if state and set(mine) == set(state) and all(mine[k].shape == state[k].shape for k in state):
        model.load_state_dict(state)
        weights = "copied"
    setup.model = None  # the reference model is not the candidate's to call
    return model, weights


def _poison(sizes: list[int], device: str) -> None:
    """Fill freed allocator blocks of the outputs' sizes with NaN bytes, so a candidate that returns
    uninitialised memory (hoping it holds a previous result) returns NaNs instead."""
    blocks = []
    for nbytes in sizes:
        for _ in range(4):
            blocks.append(torch.full((max(nbytes, 1),), 0xFF, dtype=torch.uint8, device=device))
    del blocks


def _run_candidate(model: Any, setup: ProblemSetup, plan: TrialPlan, payload: dict[str, Any], header: dict[str, Any],
                   clocks: guards.Clocks, writer: TensorFileWriter, side: CandidateSide, phases: _Phases) -> None:
    device = payload["device"]
    flags: list[dict[str, str]] = header["flags"]
    params = [*model.parameters(), *model.buffers()] if hasattr(model, "parameters") else []
    # Before the first call there is no earlier result to reuse; after it, poison blocks of its outputs' sizes.
    sizes: list[int] = []

    def flag(name: str, detail: str) -> None:
        if not any(f["flag"] == name for f in flags):
            flags.append({"flag": name, "detail": detail})

    def checked(index: int, values: list[Any], into: list[Any] | None = None) -> None:
        before = len(writer.layout)

        def write(outs: list[torch.Tensor]) -> None:
            written = time.monotonic()
            for j, out in enumerate(outs):
                writer.put(["trial", index, j], out)
            phases.add({"write": time.monotonic() - written}, "checked_calls")

        outs = _checked_call(model, values, index, sizes, payload, header, clocks, params, flag, write, into=into)
        sizes[:] = [o.numel() * o.element_size() for o in outs]
        side.announce(writer.layout[before:])  # the reference's job compares them while the next call runs

    for index, values in enumerate(setup.checked):
        checked(index, values)
    phases.mark("checked_calls")

    last_buffer = None
    if plan.timing:
        header["stage"] = "timing"
        # The timed loop has the device to itself: the reference's job compares what it was given, then waits
        # until this job is over (handoff.py); the warm-up meanwhile measures nothing.
        side.request_gate()

        def gate() -> None:
            header["gate"] = side.wait_for_gate(payload.get("gate_seconds", 60.0))

        buffers, run = _timed_run(model, setup.value_sets, plan, device, clocks, before_timed=gate)
        header["timing"] = {"device": run.spread(), "host": run.spread(host=True)}
        phases.add(run.phase_seconds, "timing")
        before = len(writer.layout)
        for i, digest in run.digests.items():
            for j, values in enumerate(digest):
                writer.put(["digest", i, j], values)
        side.announce(writer.layout[before:])
        if payload.get("profile"):
            header["profile"] = _profile(model, buffers[0], device)
        last_buffer = buffers[(plan.iterations - 1) % plan.rotate]
        phases.mark("timing")
    header["stage"] = "correctness"
    checked(len(setup.checked), setup.final, into=last_buffer)
    phases.mark("checked_calls")
    tampered = clocks.tampered()
    if tampered:
        flag("timer_tampering", "replaced " + ", ".join(tampered))


def _checked_call(model: Any, values: list[Any], index: int, sizes: list[int], payload: dict[str, Any],
                  header: dict[str, Any], clocks: guards.Clocks, params: list[torch.Tensor], flag: Any,
                  write: Callable[[list[torch.Tensor]], None], into: list[Any] | None = None) -> list[torch.Tensor]:
    """One correctness call with every in-process check around it; returns its outputs, which `write` has
    handed on. With `into`, the values are written in place into those (already seen) input buffers."""
    device = payload["device"]
    cuda = device == "cuda"
    sync = clocks.originals["torch.cuda.synchronize"]
    if into is None:
        args = values
    else:
        args = into
        for dst, src in zip(args, values):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
    originals = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    _poison(sizes, device)
    threads_before = guards.python_threads()
    recorder = guards.OpRecorder(frozenset(payload["allowed_ops"]))
    with torch.no_grad():
        with recorder:
            raw = model(*args)
            live = guards.recorder_is_live(recorder)
    outs = _as_list(raw)
    bad_types = [type(o).__name__ for o in outs if type(o) is not torch.Tensor]
    if bad_types:
        flag("not_a_plain_tensor", f"forward returned {', '.join(bad_types)}, not plain torch.Tensor")
        raise TypeError(f"the candidate returned {', '.join(bad_types)} instead of torch.Tensor outputs")
    # Work after return: what the caller's stream sees at return vs after everything finished.
    if cuda:
        clocks.originals["torch.cuda.current_stream"]().synchronize()
    snapshot = [o.clone() for o in outs]
    if cuda:
        clocks.originals["torch.cuda.current_stream"]().synchronize()
        sync()
    # Work still running after the return shows as outputs that change while the host waits. The outputs are
    # handed on meanwhile (what was handed on does not matter if they change: that alone rejects the candidate),
    # so on large outputs the copy is the wait, and only small ones sleep for the rest of it.
    settling = clocks.perf_counter()
    write(outs)
    left = _SETTLE_SECONDS - (clocks.perf_counter() - settling)
    if left > 0:
        clocks.sleep(left)
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
    if recorder.downgrades:
        flag("precision_downgrade", "forward converted to lower precision: " + ", ".join(recorder.downgrades))
    # Parameters are read after the call: forward may have registered new ones.
    params = [*model.parameters(), *model.buffers()] if hasattr(model, "parameters") else params
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
        sync()
    header["trials"].append({"index": index, "threads": len(new_threads)})
    return outs


def _profile(model: Any, args: list[Any], device: str) -> dict[str, Any]:
    from agent.profiling import torch_profiler_summary

    with torch.no_grad():
        return torch_profiler_summary(lambda: model(*args), device=device)


# --------------------------------------------------------------------------------------- ncu profile

def ncu_profile(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    """Nsight Compute summary of one candidate call (duration, DRAM/SM throughput, occupancy...)."""
    import json
    import subprocess

    from agent.profiling import ncu_command, parse_ncu_csv

    job_file, csv_file = "/tmp/profile_payload.json", "/tmp/ncu.csv"
    with open(job_file, "w") as f:
        json.dump(payload, f)
    command = ncu_command([sys.executable, "-m", "agent.evaluate.profile_child", job_file], csv_file)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=payload.get("seconds", 300))
    try:
        with open(csv_file) as f:
            summary = parse_ncu_csv(f.read())
    except OSError:
        summary = {"tool": "ncu", "kernels": [], "note": "ncu wrote no report"}
    if proc.returncode != 0 or not summary.get("kernels"):
        summary["error"] = (proc.stderr or proc.stdout)[-2000:]
    write_result(result, {"profile": summary})
