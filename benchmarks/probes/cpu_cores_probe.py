"""How many cores a CPU candidate's batches used, whole and calls alone (agent/engine/evaluate/cpu_share.py), with
each timed round's pair of readings: the candidate's batch and its own null batch, as (CPU s, wall s). A look at the
rule's inputs, never evidence in a verdict.

Usage (the dev box):
    PYTHONPATH=$PWD python benchmarks/probes/cpu_cores_probe.py PROBLEM.py CANDIDATE.py [CANDIDATE.py ...] [--rounds 5]
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agent.engine.evaluate import EvalConfig, Evaluator, cpu_share, judge
from agent.engine.sandbox import Limits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("candidates", type=Path, nargs="+")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    shown = judge._cpu_share

    def show(verdict: Any, out: Any, threads: int) -> None:
        cpu, wall = cpu_share.call_cores(out.cpu_rounds, threads)
        print(f"   whole batches {out.cpu_seconds:.3f} s CPU in {out.cpu_wall_seconds:.3f} s; calls alone {cpu:.3f} s "
              f"in {wall:.3f} s over {len(out.cpu_rounds)} rounds", flush=True)
        for (calls, null) in out.cpu_rounds:
            print(f"     batch {calls[0]:.4f} / {calls[1]:.4f} s, own null {null[0]:.4f} / {null[1]:.4f} s", flush=True)
        shown(verdict, out, threads)
    judge._cpu_share = show
    config = EvalConfig(device="cpu", compile_baseline=False, min_rounds=args.rounds, max_rounds=args.rounds,
                        limits=Limits(wall_seconds=60))
    problem = args.problem.read_text()
    with Evaluator(config) as evaluator:
        for path in args.candidates:
            print(f"== {path.name}", flush=True)
            v = evaluator.evaluate(problem, path.read_text())
            t = v.timing
            figures = "" if t is None else (f"cores {t.cpu_cores:.3f} whole, {t.cpu_cores_calls:.3f} calls alone; "
                                            f"{t.speedup_vs_eager:.3f}x vs eager")
            print(f"   {v.status.value} {v.flag_names()} {figures}", flush=True)


if __name__ == "__main__":
    main()
