"""Why a problem's built-in candidates fail: every variant of the built-in policy's plan through the real engine,
untimed, with each trial's figures and note (the float64 re-judging of an ill-conditioned reference says its errors
there). A debugging look, never evidence in a verdict.

Usage (the GPU box, or here with --device cpu on a scaled-down copy of the problem):
    PYTHONPATH=$PWD python3 benchmarks/probes/variant_verdicts.py PROBLEM.py [--device cuda]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from agent.builtin.policy import candidate_source, make_plan, variants
from agent.builtin.trace import trace_graph
from agent.engine.evaluate.config import EvalConfig
from agent.engine.evaluate.evaluator import Evaluator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    source = args.problem.read_text()
    with Evaluator(EvalConfig(device=args.device, compile_baseline=False, timing=False)) as evaluator:
        plan = make_plan(trace_graph(evaluator, source), args.device)
        for n, variant in enumerate(variants(plan, args.device), 1):
            started = time.monotonic()
            verdict = evaluator.evaluate(source, candidate_source(plan, variant, args.device))
            print(f"== variant {n} ({variant.label}): {verdict.status.value} {verdict.flag_names()} "
                  f"({time.monotonic() - started:.1f} s) {verdict.message[:300]}", flush=True)
            for t in verdict.trials:
                print(f"   trial {t.index} {t.distribution}: {'passed' if t.passed else 'FAILED'}, max abs "
                      f"{t.max_abs_error:.3g} (atol {t.atol:.3g}), {t.mismatched} of {t.numel} out. {t.note}", flush=True)


if __name__ == "__main__":
    main()
