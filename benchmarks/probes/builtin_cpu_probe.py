"""The built-in policy's first CPU candidate for a problem, written by one or more trees of this repository, timed
against eager side by side in one process, outside the studio (no harness, no sandbox: the kernel and eager alone).

Each tree writes its source in a process of its own (PYTHONPATH=tree: its planner and code generator); the sources
are then built and timed here, round-robin with eager, on the problem's own inputs and weights, with the thread count
PyTorch has (eager's too). The figures are medians of the rounds; the studio's verdict is the measurement that counts,
this probe says where a generated kernel stands before it goes there.

Usage: python benchmarks/probes/builtin_cpu_probe.py PROBLEM.py [--trees . /path/to/old/tree] [--rounds 7]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

WRITE = """
import sys
from pathlib import Path
from agent.builtin.policy import candidate_source, make_plan, variants
from agent.builtin.trace import trace_graph
from agent.engine.evaluate import EvalConfig, Evaluator
with Evaluator(EvalConfig(device="cpu", compile_baseline=False, min_rounds=2, max_rounds=3, batch_ms=10.0)) as ev:
    traced = trace_graph(ev, Path(sys.argv[1]).read_text())
plan = make_plan(traced, "cpu")
variant = variants(plan, "cpu")[0]
Path(sys.argv[2]).write_text(candidate_source(plan, variant, "cpu"))
print(variant.label)
"""


def write_candidate(tree: Path, problem: Path, out: Path) -> str:
    """The tree's first CPU variant for the problem, written to `out`; returns the variant's label."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", WRITE, str(problem), str(out)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{tree} could not write a candidate for {problem.name}:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seconds(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(__file__).resolve().parents[2]])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    problem = load(args.problem.resolve(), "problem")
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).eval()
    inputs = problem.get_inputs()
    runs: dict[str, Callable[[], Any]] = {"eager": lambda: model(*inputs)}
    with tempfile.TemporaryDirectory() as folder:
        for n, tree in enumerate(args.trees):
            path = Path(folder) / f"candidate{n}.py"
            label = write_candidate(tree.resolve(), args.problem.resolve(), path)
            candidate = load(path, f"candidate{n}").ModelNew(*problem.get_init_inputs()).eval()
            candidate.load_state_dict(model.state_dict())
            with torch.no_grad():
                error = max((a - b).abs().max().item() for a, b in zip(torch.atleast_1d(model(*inputs)),
                                                                       torch.atleast_1d(candidate(*inputs))))
            print(f"{tree}: {label}; largest difference from eager {error:.3g}")
            runs[str(tree)] = (lambda c: lambda: c(*inputs))(candidate)
        times: dict[str, list[float]] = {name: [] for name in runs}
        with torch.no_grad():
            for name, run in runs.items():
                run()  # warm: the first call's allocations and page faults
            for _ in range(args.rounds):
                for name, run in runs.items():
                    times[name].append(seconds(run))
    eager = statistics.median(times["eager"])
    print(f"{args.problem.name}, {torch.get_num_threads()} threads, {args.rounds} rounds (medians):")
    for name, spent in times.items():
        median = statistics.median(spent)
        print(f"  {name}: {median * 1e3:.1f} ms ({min(spent) * 1e3:.1f}-{max(spent) * 1e3:.1f}), "
              f"{eager / median:.2f}x vs eager")


if __name__ == "__main__":
    main()
