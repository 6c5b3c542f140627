"""Which CUDA kernels eager, torch.compile and the built-in policy's candidates launch for a problem, and their device
time per call (torch.profiler over five calls after three warm ones): where a candidate loses to torch.compile. A look
for the next template, never evidence in a verdict.

Usage on the GPU box: PYTHONPATH=$PWD python3 benchmarks/probes/kernel_census_probe.py PROBLEM.py [--variants 1,2]
"""
from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

from agent.builtin import policy, trace
from agent.engine.evaluate.loader import exec_module
from kb_problem import load_problem  # the probe's directory is on sys.path when it runs as a script

CALLS = 5


def census(name: str, forward: Callable[..., Any], inputs: list[Any]) -> None:
    with torch.no_grad():
        for _ in range(3):
            forward(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(CALLS):
                forward(*inputs)
            torch.cuda.synchronize()
    kernels = [(e.key, e.device_time_total / 1000 / CALLS, e.count // CALLS) for e in prof.key_averages()
               if e.device_time_total > 0]
    kernels.sort(key=lambda k: -k[1])
    print(f"== {name}: {sum(k[1] for k in kernels):.3f} ms per call on the device", flush=True)
    for key, ms, count in kernels:
        print(f"   {ms:8.3f} ms  x{count}  {key[:160]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--variants", default="1", help="the built-in variants to look at, 1-based (default 1)")
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    source = args.problem.read_text()
    problem, model, inputs = load_problem(args.problem, "census_problem")
    census("eager", model, inputs)
    if not args.no_compile:
        census("torch.compile", torch.compile(model), inputs)
    buf = io.BytesIO()
    trace.trace({"problem_source": source}, buf, {})
    plan = policy.make_plan(json.loads(buf.getvalue()), "cuda")
    every = policy.variants(plan, "cuda")
    for n in [int(v) for v in args.variants.split(",")]:
        candidate = exec_module(policy.candidate_source(plan, every[n - 1], "cuda"), f"census_{n}", f"variant{n}.py")
        new = candidate.ModelNew(*problem.get_init_inputs()).cuda().eval()
        new.load_state_dict(model.state_dict())
        census(f"variant {n} ({every[n - 1].label})", new, inputs)


if __name__ == "__main__":
    main()
