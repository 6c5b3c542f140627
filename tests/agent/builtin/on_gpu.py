"""The GPU half of the built-in policy's tests: every CUDA variant of a plan through the real engine on the box's GPU
(skipped where there is none; benchmarks.md records the box's runs)."""
from __future__ import annotations

import pytest

from agent.builtin.policy import candidate_source, make_plan, variants
from agent.builtin.trace import trace_graph
from agent.engine.evaluate import EvalConfig, Evaluator


def assert_every_cuda_variant_accepted(evaluator: Evaluator, source: str) -> None:
    """`evaluator` (the CPU one) traces; a CUDA evaluator judges each variant, every timed call's output checked.

    One exception, by design: a channels-last variant that lets cuDNN use TF32 (PyTorch's default) may be
    `incorrect`, because cuDNN's NHWC heuristics can pick a TF32 kernel whose 10-bit mantissa leaves float32's
    tolerance (gcodegen.graph_variants); the policy then measures the full-float32 fallback after it, so that fallback
    must be accepted. Any other outcome of any variant fails."""
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run on the GPU box (benchmarks.md records it)")
    plan = make_plan(trace_graph(evaluator, source), "cuda")
    options = variants(plan, "cuda")
    with Evaluator(EvalConfig(device="cuda", compile_baseline=False, min_rounds=2, max_rounds=3)) as gpu:
        for n, variant in enumerate(options):
            verdict = gpu.evaluate(source, candidate_source(plan, variant, "cuda"))
            if verdict.accepted:
                continue
            tf32_layout = variant.layout == "channels_last" and variant.tf32
            covered = any(later.fallback and not later.tf32 for later in options[n + 1:])
            assert tf32_layout and covered and verdict.status.value == "incorrect", \
                (variant.label, verdict.status, verdict.message)
