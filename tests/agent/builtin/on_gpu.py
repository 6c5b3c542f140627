"""The GPU half of the built-in policy's tests: every CUDA variant of a plan through the real engine on the box's GPU
(skipped where there is none; benchmarks.md records the box's runs)."""
from __future__ import annotations

import pytest

from agent.builtin.policy import candidate_source, make_plan, variants
from agent.builtin.trace import trace_graph
from agent.engine.evaluate import EvalConfig, Evaluator


def assert_every_cuda_variant_accepted(evaluator: Evaluator, source: str) -> None:
    """`evaluator` (the CPU one) traces; a CUDA evaluator judges each variant, every timed call's output checked."""
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run on the GPU box (benchmarks.md records it)")
    plan = make_plan(trace_graph(evaluator, source), "cuda")
    with Evaluator(EvalConfig(device="cuda", compile_baseline=False, min_rounds=2, max_rounds=3)) as gpu:
        for variant in variants(plan, "cuda"):
            verdict = gpu.evaluate(source, candidate_source(plan, variant, "cuda"))
            assert verdict.accepted, (variant.label, verdict.status, verdict.message)
