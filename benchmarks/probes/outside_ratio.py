"""The speedup an evaluation should approach, measured with no harness at all: a corpus candidate's forward and its
problem's eager forward timed in one plain process, single-threaded, in alternating loops on a few fixed inputs
(docs/benchmarks.md §15, session 20). Our own candidates only: the candidate is imported here, outside any sandbox.

Usage: python benchmarks/probes/outside_ratio.py [--candidate legit_cpp_softmax_rows:softmax_rows] [--pairs 15]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "corpus"


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ms_per_call(forward: Callable[..., Any], inputs: list[list[Any]], calls: int) -> float:
    for args in inputs[:3]:  # first calls: lazy loads and allocator growth
        forward(*args)
    started = time.perf_counter()
    for i in range(calls):
        forward(*inputs[i % len(inputs)])
    return (time.perf_counter() - started) * 1000 / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidate", default="legit_cpp_softmax_rows:softmax_rows")
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    candidate, problem = args.candidate.split(":")
    torch.set_num_threads(1)  # as EvalConfig.threads' default: every job of an evaluation on one thread
    reference = _module(CORPUS / "problems" / f"{problem}.py")
    new = _module(CORPUS / "candidates" / f"{candidate}.py")
    init = reference.get_init_inputs()
    torch.manual_seed(0)
    eager = reference.Model(*init)
    torch.manual_seed(0)
    fast = new.ModelNew(*init)
    inputs = [reference.get_inputs() for _ in range(8)]
    ratios, eager_ms, candidate_ms = [], [], []
    with torch.no_grad():
        for _ in range(args.pairs):
            eager_ms.append(_ms_per_call(eager, inputs, args.calls))
            candidate_ms.append(_ms_per_call(fast, inputs, args.calls))
            ratios.append(eager_ms[-1] / candidate_ms[-1])
    print(f"{candidate} on {problem}, one thread, {args.pairs} pairs of {args.calls}-call loops: eager "
          f"{statistics.median(eager_ms):.3f} ms, candidate {statistics.median(candidate_ms):.3f} ms, speedup vs eager "
          f"median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
