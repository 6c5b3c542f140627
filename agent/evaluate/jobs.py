"""The three jobs that run inside sandboxed children: build, reference, candidate.

The reference and the candidate never share a process: the candidate cannot find the reference's
outputs, and the comparison happens in the trusted parent. Each job writes one result (codec.py).
Everything a candidate does wrong becomes part of its result; only harness bugs raise.
"""
from __future__ import annotations

import hashlib
import os
import platform
import time
import traceback
from typing import Any, BinaryIO

import torch

from agent.build.cache import BuildCache
from agent.build.inline import ExtensionBuildError
from agent.build.toolchain import detect_toolchain
from agent.evaluate import guards, inputs
from agent.evaluate.codec import decode_tensors, write_result
from agent.evaluate.loader import ExtensionRouter, cache_root_from, exec_module
from agent.evaluate.timing import last_timed_calls, time_calls, timed_values

PROBLEM_MODULE = "kstudio_problem"
CANDIDATE_MODULE = "kstudio_candidate"


def derive_seed(seed: int, *labels: object) -> int:
    text = ":".join(str(x) for x in (seed, *labels))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")


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


# ----------------------------------------------------------------------------------------- reference

def reference(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    device, seed, names = payload["device"], payload["seed"], payload["names"]
    _setup_device(device, context["limits"])
    clocks = guards.Clocks()
    problem = exec_module(payload["problem_source"], PROBLEM_MODULE, "problem.py")
    init_inputs = inputs.problem_inputs(problem, derive_seed(seed, "init"), names["get_init_inputs"])
    weights_seed = derive_seed(seed, "weights")
    inputs.seed_everything(weights_seed)
    model = getattr(problem, names["model"])(*init_inputs).to(device).eval()

    trial_inputs, trial_meta = [], []
    for t in range(payload["trials"]):
        trial_seed = derive_seed(seed, "trial", t)
        trial_inputs.append(inputs.problem_inputs(problem, trial_seed, names["get_inputs"]))
        trial_meta.append({"distribution": "problem"})
    for dist in payload["distributions"]:
        dist_seed = derive_seed(seed, "dist", dist)
        base = inputs.problem_inputs(problem, dist_seed, names["get_inputs"])
        trial_inputs.append(inputs.redistribute(base, dist, dist_seed))
        trial_meta.append({"distribution": dist})

    rotate = payload["rotate"]
    # Timing reuses the problem-distribution trial inputs: every timed call rolls them anyway, so
    # no call repeats values, and H100-sized problems do not ship extra input sets between processes.
    value_sets = trial_inputs[: payload["trials"]]
    # The last trial runs after timing (a candidate honest only while checked meets it) on the
    # last timed call's inputs with a sparse in-place change, in that call's own buffer.
    final_seed = derive_seed(seed, "after_timing")
    if payload["timing"]:
        final = inputs.perturb(timed_values(value_sets, payload["iterations"] - 1), final_seed)
    else:
        final = inputs.problem_inputs(problem, final_seed, names["get_inputs"])
    trial_inputs.append(final)
    trial_meta.append({"distribution": "after_timing"})

    trial_outputs = []
    with torch.no_grad():
        for values in trial_inputs:
            out = _as_list(model(*inputs.to_device(values, device)))
            trial_outputs.append([_host_copy(o) for o in out])

    digest_seed = derive_seed(seed, "digest")
    with torch.no_grad():
        value_digests = {i: inputs.digest(_as_list(model(*inputs.to_device(timed_values(value_sets, i), device))), digest_seed)
                         for i in last_timed_calls(payload["iterations"], rotate)}

    header: dict[str, Any] = {
        "hardware": _hardware(device),
        "toolchain": {"torch": torch.__version__, "torch_cuda": torch.version.cuda},
        "outputs": [[{"shape": list(o.shape), "dtype": str(o.dtype), "nbytes": o.numel() * o.element_size()}
                     for o in outs] for outs in trial_outputs[:1]],
        "trials": trial_meta,
        "returns_sequence": None,
    }
    with torch.no_grad():
        sample = model(*inputs.to_device(trial_inputs[0], device))
        header["returns_sequence"] = isinstance(sample, (tuple, list))
        header["work"] = _work_estimate(model, trial_inputs[0], sample, device)
    del sample

    if payload["timing"]:
        header["eager"] = _time_model(model, value_sets, payload, clocks, digest_seed)
        if payload["compile_baseline"]:
            header["compile"] = _time_compiled(model, value_sets, payload, clocks, digest_seed)
    write_result(result, header, {
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "init_inputs": init_inputs,
        "trial_inputs": trial_inputs,
        "trial_outputs": trial_outputs,
        "value_digests": value_digests,
    })


def _time_model(model: Any, value_sets: list[list[Any]], payload: dict[str, Any], clocks: guards.Clocks,
                digest_seed: int) -> dict[str, Any]:
    device = payload["device"]
    buffers, sets = _timing_inputs(value_sets, payload["rotate"], device)
    with torch.no_grad():
        run = time_calls(model, buffers, sets, device=device, iterations=payload["iterations"],
                         warmup_ms=payload["warmup_ms"], clocks=clocks, digest_seed=digest_seed)
    return {"device": run.spread(), "host": run.spread(host=True)}


def _timing_inputs(value_sets: list[list[Any]], rotate: int, device: str) -> tuple[list[list[Any]], list[list[Any]]]:
    """`rotate` input buffers to time on, and the value sets copied into them, on the device."""
    buffers = [inputs.to_device([v.clone() if isinstance(v, torch.Tensor) else v for v in value_sets[0]], device)
               for _ in range(rotate)]
    return buffers, [inputs.to_device(v, device) for v in value_sets]


def _time_compiled(model: Any, value_sets: list[list[Any]], payload: dict[str, Any], clocks: guards.Clocks,
                   digest_seed: int) -> dict[str, Any]:
    started = time.monotonic()
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs.to_device(value_sets[0], payload["device"]))
    except Exception as exc:  # noqa: BLE001 - a problem torch.compile cannot handle has no compile baseline
        return {"error": f"torch.compile failed: {type(exc).__name__}: {exc}"[:2000]}
    compile_seconds = time.monotonic() - started
    timed = _time_model(compiled, value_sets, payload, clocks, digest_seed)
    timed["compile_seconds"] = compile_seconds
    return timed


def _work_estimate(model: Any, values: list[Any], sample: Any, device: str) -> dict[str, Any]:
    """The least work any correct kernel must do: bytes in and out, and the reference's FLOPs."""
    from torch.utils.flop_counter import FlopCounterMode

    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    moved = sum(t.numel() * t.element_size() for t in tensors)
    moved += sum(o.numel() * o.element_size() for o in _as_list(sample) if isinstance(o, torch.Tensor))
    moved += sum(p.numel() * p.element_size() for p in model.parameters())
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs.to_device(values, device))
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
    clocks = guards.Clocks()  # before any candidate code can replace a clock
    device = payload["device"]
    header: dict[str, Any] = {"stage": "load", "flags": [], "trials": [], "isolation": context["isolation"]}
    tensors: dict[str, Any] = {}
    try:
        _setup_device(device, context["limits"])
        data = decode_tensors(payload["tensors"])
        router = _router(payload, loadable=True)
        try:
            module = exec_module(payload["candidate_source"], CANDIDATE_MODULE, "candidate.py")
        finally:
            header["build_records"] = router.report()
        model, header["weights"] = _build_candidate(module, data, device)
        header["stage"] = "correctness"
        outputs, digests = _run_candidate(model, data, payload, header, clocks)
        tensors = {"trial_outputs": outputs, "digests": digests}
        header["stage"] = "done"
    except ExtensionBuildError as exc:
        header.update(status="build_error", error=str(exc), log=exc.log)
    except BaseException as exc:  # noqa: BLE001 - whatever the candidate raised is its verdict
        header.update(status="runtime_error", error=_format_exception(exc))
    header["tampered"] = clocks.tampered()
    clocks.restore()
    write_result(result, header, tensors)


def _format_exception(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    # Keep the candidate's frames and the message; our harness frames are noise to the reader.
    text = "".join(lines)
    return text[-6000:]


def _build_candidate(module: Any, data: dict[str, Any], device: str) -> tuple[Any, str]:
    if not hasattr(module, "ModelNew"):
        raise AttributeError("the candidate module defines no class ModelNew")
    inputs.seed_everything(data["weights_seed"])
    model = module.ModelNew(*data["init_inputs"])
    state = data["state_dict"]
    mine = model.state_dict() if hasattr(model, "state_dict") else {}
    weights = "seeded"
    if state and set(mine) == set(state) and all(mine[k].shape == state[k].shape for k in state):
        model.load_state_dict(state)
        weights = "copied"
    if hasattr(model, "to"):
        model = model.to(device)
    if hasattr(model, "eval"):
        model.eval()
    return model, weights


def _poison(shapes: list[dict[str, Any]], device: str) -> None:
    """Fill freed allocator blocks of the output's sizes with NaN bytes, so a candidate that returns
    uninitialised memory (hoping it holds a previous result) returns NaNs instead."""
    blocks = []
    for meta in shapes:
        for _ in range(4):
            blocks.append(torch.full((max(meta["nbytes"], 1),), 0xFF, dtype=torch.uint8, device=device))
    del blocks


def _run_candidate(model: Any, data: dict[str, Any], payload: dict[str, Any], header: dict[str, Any],
                   clocks: guards.Clocks) -> tuple[list[list[torch.Tensor]], dict[int, list[torch.Tensor]]]:
    device = payload["device"]
    flags: list[dict[str, str]] = header["flags"]
    params = [*model.parameters(), *model.buffers()] if hasattr(model, "parameters") else []
    outputs: list[list[torch.Tensor]] = []

    def flag(name: str, detail: str) -> None:
        if not any(f["flag"] == name for f in flags):
            flags.append({"flag": name, "detail": detail})

    *checked, final = data["trial_inputs"]
    for index, values in enumerate(checked):
        outputs.append(_checked_call(model, values, index, payload, header, clocks, params, flag))

    digests: dict[int, list[torch.Tensor]] = {}
    last_buffer = None
    if payload["timing"]:
        header["stage"] = "timing"
        buffers, sets = _timing_inputs(data["trial_inputs"][: payload["trials"]], payload["rotate"], device)
        with torch.no_grad():
            run = time_calls(model, buffers, sets, device=device, iterations=payload["iterations"],
                             warmup_ms=payload["warmup_ms"], clocks=clocks, digest_seed=data["digest_seed"])
        header["timing"] = {"device": run.spread(), "host": run.spread(host=True)}
        digests = run.digests
        if payload.get("profile"):
            header["profile"] = _profile(model, buffers[0], device)
        last_buffer = buffers[(payload["iterations"] - 1) % payload["rotate"]]
        del sets
    header["stage"] = "correctness"
    outputs.append(_checked_call(model, final, len(checked), payload, header, clocks, params, flag, into=last_buffer))
    tampered = clocks.tampered()
    if tampered:
        flag("timer_tampering", "replaced " + ", ".join(tampered))
    return outputs, digests


def _checked_call(model: Any, values: list[Any], index: int, payload: dict[str, Any], header: dict[str, Any],
                  clocks: guards.Clocks, params: list[torch.Tensor], flag: Any,
                  into: list[Any] | None = None) -> list[torch.Tensor]:
    """One correctness call with every in-process check around it; returns the outputs on the CPU.
    With `into`, the values are written in place into those (already seen) input buffers."""
    device = payload["device"]
    cuda = device == "cuda"
    sync = clocks.originals["torch.cuda.synchronize"]
    if into is None:
        args = inputs.to_device(values, device)
    else:
        args = into
        for dst, src in zip(args, values):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
    originals = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    _poison(payload["output_meta"], device)
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
    clocks.sleep(0.02)
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
    return [_host_copy(o) for o in outs]


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    """Always a copy: .cpu() of a CPU tensor is the tensor itself, which a later call may overwrite."""
    return t.detach().to("cpu", copy=True)


def _profile(model: Any, args: list[Any], device: str) -> dict[str, Any]:
    from agent.profiling import torch_profiler_summary

    with torch.no_grad():
        return torch_profiler_summary(lambda: model(*args), device=device)


# --------------------------------------------------------------------------------------- ncu profile

def ncu_profile(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    """Nsight Compute summary of one candidate call (duration, DRAM/SM throughput, occupancy...)."""
    import subprocess
    import sys

    from agent.evaluate.codec import encode_tensors
    from agent.profiling import ncu_command, parse_ncu_csv

    data = decode_tensors(payload["tensors"])
    job_file, csv_file = "/tmp/profile_payload.pt", "/tmp/ncu.csv"
    with open(job_file, "wb") as f:
        f.write(encode_tensors({**data, "candidate_source": payload["candidate_source"],
                                "cache_root": payload["cache_root"], "cuda_arch": payload["cuda_arch"]}))
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
