"""Which form each reduction of the built-in policy's CUDA plans takes, over a KernelBench checkout (dev box, no GPU):
a block per output, a warp per output (gcodegen.per_warp), several sums joined (gcodegen._with_siblings), split
across blocks, sliced columns, or a thread per output. Which problems a template change reaches, before a device
session measures them. Never evidence in a verdict.

Usage: python benchmarks/probes/reduction_forms_probe.py KERNELBENCH_DIR [--levels 1,2] [--only warp,siblings]
Prints one line per reduction kernel of the first (float4) variant.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import warnings
from pathlib import Path

from agent.builtin import gcodegen, policy, trace
from agent.builtin.codegen import Variant
from agent.builtin.graph import GraphPlan, Kernel


def form(step: Kernel, variant: Variant) -> str:
    reduced = math.prod(step.shape[d] for d in step.params["dims"])
    outputs = math.prod(step.shape) // reduced
    if not gcodegen.is_block_reduction(step, True):
        return "thread"
    if gcodegen.reduce_splits(outputs, reduced) > 1 and step.params["kind"] in gcodegen._SPLIT_KINDS:
        return "split"
    joined = "siblings+" if step.params.get("siblings") else ""
    return joined + ("warp" if gcodegen.per_warp(step, variant) else "block")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--levels", default="1,2,3")
    parser.add_argument("--only", default="", help="forms to print (comma-separated substrings), default all")
    args = parser.parse_args()
    wanted = [w for w in args.only.split(",") if w]
    warnings.filterwarnings("ignore")
    for level in args.levels.split(","):
        for path in sorted((args.root / f"level{level}").glob("*.py")):
            try:
                buf = io.BytesIO()
                trace.trace({"problem_source": path.read_text()}, buf, {})
                plan = policy.make_plan(json.loads(buf.getvalue()), "cuda")
            except Exception:  # noqa: BLE001 - a problem the policy does not plan has no reductions to show
                continue
            if isinstance(plan, policy.RewrittenPlan):
                plan = plan.plan  # the rewritten graph's reductions: its variants are tried first
            if not isinstance(plan, GraphPlan):
                continue
            variant = policy.variants(plan, "cuda")[0]
            for step in gcodegen.fused_steps(plan, True, siblings=variant.vec == gcodegen.WIDTH):
                if not (isinstance(step, Kernel) and step.kind == "reduce"):
                    continue
                kind = form(step, variant)
                if wanted and not any(w in kind for w in wanted):
                    continue
                reduced = math.prod(step.shape[d] for d in step.params["dims"])
                print(f"level{level} {path.stem[:48]:48s} {step.params['kind']:9s} {kind:14s} "
                      f"outputs {math.prod(step.shape) // reduced:>9d} x {reduced}", flush=True)


if __name__ == "__main__":
    main()
