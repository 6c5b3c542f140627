"""Can the product-scan GPU test fail? `tests/agent/builtin/test_graph.PRODUCTS` (float32 cumprods that overflow
partway, at four of ATen's tile widths) judged by the engine with eager's order of multiplications switched off (the
block scans of before, gcodegen.aten_scan_tile returning None) and then on, the first variant of each. Never evidence
in a verdict.

Usage on the GPU box: PYTHONPATH=$PWD python3 benchmarks/probes/scan_order_probe.py
"""
from __future__ import annotations

from agent.builtin import gcodegen
from agent.builtin.policy import candidate_source, make_plan, variants
from agent.builtin.trace import trace_graph
from agent.engine.evaluate import EvalConfig, Evaluator
from tests.agent.builtin.test_graph import PRODUCTS


def main() -> None:
    with Evaluator(EvalConfig(device="cpu")) as cpu:
        plan = make_plan(trace_graph(cpu, PRODUCTS), "cuda")
    eager_order = gcodegen.aten_scan_tile
    with Evaluator(EvalConfig(device="cuda", compile_baseline=False, min_rounds=2, max_rounds=3)) as gpu:
        for label, tile in (("old order", lambda lines, length: None), ("eager order", eager_order)):
            gcodegen.aten_scan_tile = tile
            variant = variants(plan, "cuda")[0]
            verdict = gpu.evaluate(PRODUCTS, candidate_source(plan, variant, "cuda"))
            print(label, "|", variant.label[:40], "|", verdict.status, (verdict.message or "")[:200], flush=True)
    gcodegen.aten_scan_tile = eager_order


if __name__ == "__main__":
    main()
