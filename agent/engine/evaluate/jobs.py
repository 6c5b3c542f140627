"""Jobs that run inside sandboxed children, and the helpers the evaluation's jobs share: the ncu profile,
the extension router, the device's set-up and the problem's least work (the build's jobs are in
agent/engine/build/job.py). The candidate's job is candidate_job.py, the reference's reference_job.py; how an
evaluation drives them is session.py.
"""
from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import time
from typing import Any, BinaryIO

import torch

from agent.engine.build.cache import BuildCache
from agent.engine.hardware import host_facts
from agent.engine.build.toolchain import detect_toolchain
from agent.engine.evaluate.codec import write_result
from agent.engine.evaluate.loader import ExtensionRouter, cache_root_from, exec_module
from agent.engine.evaluate.plan import ProblemSetup, TrialPlan, build_model, set_up

PROBLEM_MODULE = "kstudio_problem"
CANDIDATE_MODULE = "kstudio_candidate"


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


def extension_router(payload: dict[str, Any], loadable: bool) -> ExtensionRouter:
    toolchain = detect_toolchain(payload.get("cuda_arch"))
    router = ExtensionRouter(toolchain, BuildCache(cache_root_from(payload.get("cache_root"))), loadable)
    router.install()
    return router


def hardware_facts(device: str) -> dict[str, Any]:
    facts: dict[str, Any] = host_facts()  # the CPU's model name and cores, not just "x86_64"
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        facts.update(gpu=props.name, sm_count=props.multi_processor_count, capability=f"{props.major}.{props.minor}",
                     gpu_memory_bytes=props.total_memory, l2_bytes=getattr(props, "L2_cache_size", None))
    return facts


# mallopt's parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _steady_allocator() -> None:
    """Fix glibc malloc's mmap and trim thresholds, which it otherwise moves as a process frees memory: the same
    4 MiB tensor op then costs a fresh, page-faulting mapping in one process and a reused heap block in another.
    Measured here, one process ran x * sigmoid(x) + 1 on 1M floats in 2.5 ms and another, with a different
    allocation history, in 11-20 ms; that made the candidate's job time the same code ~1.8x slower than the
    reference's on the CPU (docs/benchmarks.md §15). Both jobs fix them alike."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to fix
        return
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # allocations below 32 MiB from the heap, reused
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)  # and the heap's top kept, not returned and faulted in again


def setup_device(device: str, limits: dict[str, Any] | Any, threads: int | None = None) -> None:
    """The device, the thread count every job of an evaluation uses alike, and compiler caches of the job's own
    (inductor's and Triton's, in a fresh directory: never shared with another job, docs/threat-model.md)."""
    _steady_allocator()
    # A temporary directory of the job's own, for everything torch derives from it (inductor's precompiled
    # headers live under gettempdir() whatever TORCHINDUCTOR_CACHE_DIR says, and /tmp/torchinductor_<user> may be
    # a read-only path of the host's).
    private = tempfile.mkdtemp(prefix="kstudio-job-")
    os.environ["TMPDIR"] = tempfile.tempdir = private
    for variable in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        os.environ[variable] = tempfile.mkdtemp(prefix=f"{variable.split('_')[0].lower()}-", dir=private)
    if threads:
        torch.set_num_threads(threads)
    if device == "cpu":
        # Subnormals flushed to zero, in both jobs' threads of computation (one: `threads`): a wide timed call (keyed.py,
        # inputs x100) puts a silu's exp(-x) and its like into the subnormal range for one element in eight, where x86
        # takes a microcode assist of ~100 cycles each, and the call then took ~5x a plain call's time in eager and
        # candidate alike: the figure would be the subnormals' cost. Outputs move by less than 1e-37, far under any
        # tolerance; a candidate that turns it off in its process only slows itself.
        torch.set_flush_denormal(True)
    if device == "cuda":
        torch.cuda.init()
        fraction = getattr(limits, "gpu_memory_fraction", 0.9)
        torch.cuda.set_per_process_memory_fraction(fraction)


# The build's jobs (discovery and compiles) are in agent/engine/build/job.py.


def work_estimate(model: Any, values: list[Any], device: str) -> dict[str, Any]:
    """The least work any correct kernel must do: bytes in and out, and the reference's FLOPs."""
    from torch.utils.flop_counter import FlopCounterMode

    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    moved = sum(t.numel() * t.element_size() for t in tensors)
    moved += sum(p.numel() * p.element_size() for p in model.parameters())
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        sample = model(*values)
    moved += sum(o.numel() * o.element_size() for o in _as_list(sample) if isinstance(o, torch.Tensor))
    # The roofs are the device's measured peaks (peaks.py, a job of ours), not measured here: this job runs the
    # problem's code, and two more GiB on the device here would count against the memory plan.
    return {"bytes": moved, "flops": int(counter.get_total_flops())}


# ------------------------------------------------------------------------- ncu profile (not the verdict)

def problem_setup(payload: dict[str, Any], plan: TrialPlan, device: str) -> ProblemSetup:
    """For the ncu profile only (profile_child.py), which is a picture for the user and no part of a verdict:
    the problem's weights and inputs set up in the process that then imports the candidate."""
    problem = exec_module(payload["problem_source"], PROBLEM_MODULE, "problem.py")
    setup = set_up(problem, plan, device)
    sys.modules.pop(PROBLEM_MODULE, None)
    return setup


def build_candidate(module: Any, setup: ProblemSetup, plan: TrialPlan, device: str) -> tuple[Any, str]:
    if not hasattr(module, "ModelNew"):
        raise AttributeError("the candidate module defines no class ModelNew")
    model = build_model(module.ModelNew, setup.init_inputs, plan.weights_seed, device)
    state = setup.model.state_dict()
    mine = model.state_dict() if hasattr(model, "state_dict") else {}
    if state and set(mine) == set(state) and all(mine[k].shape == state[k].shape for k in state):
        model.load_state_dict(state)
    return model, "profiled"


# --------------------------------------------------------------------------------------- ncu profile

def ncu_profile(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    """Nsight Compute summary of one candidate call (duration, DRAM/SM throughput, occupancy...)."""
    import json
    import subprocess

    from agent.engine.profiling import ncu_command, parse_ncu_csv

    job_file, csv_file = "/tmp/profile_payload.json", "/tmp/ncu.csv"
    with open(job_file, "w") as f:
        json.dump(payload, f)
    command = ncu_command([sys.executable, "-m", "agent.engine.evaluate.profile_child", job_file], csv_file)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=payload.get("seconds", 300))
    try:
        with open(csv_file) as f:
            summary = parse_ncu_csv(f.read())
    except OSError:
        summary = {"tool": "ncu", "kernels": [], "note": "ncu wrote no report"}
    if proc.returncode != 0 or not summary.get("kernels"):
        summary["error"] = (proc.stderr or proc.stdout)[-2000:]
    write_result(result, {"profile": summary})
