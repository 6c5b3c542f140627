"""A reference that is ill-conditioned in float32 (KernelBench level 2's 23_Conv3d_GroupNorm_Mean: the mean of a
normalised tensor is exactly 0, and eager returns its own rounding noise, against an absolute tolerance scaled by that
noise): a candidate that sums in another order is as accurate as eager and passes, judged against the reference in
float64 (flag ill_conditioned_reference), timed calls included; one less accurate than eager, or wrong on a
well-conditioned problem, stays incorrect. Through the real engine on the CPU."""

import pytest

from agent.engine.evaluate.judge import _constant_in_float64
from agent.engine.verdict import Flag, Status

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(dim=1, keepdim=True)
        return centred.mean(dim=1)  # 0 in exact arithmetic: float32 returns rounding noise


def get_inputs():
    return [torch.randn(64, 4096) * 10 + 3]


def get_init_inputs():
    return []
'''
_BODY = "        return centred.mean(dim=1)  # 0 in exact arithmetic: float32 returns rounding noise"
# The same sum in blocks of 64: another rounding, as accurate (KernelBench's kernels all sum in some other order).
BLOCKED = PROBLEM.replace("class Model(", "class ModelNew(").replace(
    _BODY, "        return centred.reshape(x.shape[0], -1, 64).sum(-1).sum(-1) / x.shape[1]")
# Eager's answer plus an error some 30 times eager's own (scaled with the inputs, so every trial sees it).
SLOPPY = PROBLEM.replace("class Model(", "class ModelNew(").replace(
    _BODY, "        return centred.mean(dim=1) + 1e-7 * x.abs().amax(dim=1)")
WELL = PROBLEM.replace(_BODY, "        return centred.abs().mean(dim=1)")
WELL_WRONG = WELL.replace("class Model(", "class ModelNew(").replace(
    "return centred.abs().mean(dim=1)", "return centred.abs().mean(dim=1) * (1 + 1e-3)")
assert len({PROBLEM, BLOCKED, SLOPPY, WELL, WELL_WRONG}) == 5


def test_a_candidate_as_accurate_as_eager_on_an_ill_conditioned_reference_is_accepted_and_flagged(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(PROBLEM, BLOCKED)
    assert verdict.status is Status.ACCEPTED, verdict.message
    held = [t for t in verdict.trials if "ill-conditioned" in t.note]
    assert held and all(t.passed and "within 4x the reference's" in t.note for t in held), [t.note for t in verdict.trials]
    assert any(t.mismatched for t in held)  # it did fail the strict comparison: only the float64 one passed it
    found = [f for f in verdict.flags if f.flag is Flag.ILL_CONDITIONED_REFERENCE]
    assert found and f"on {len(held)} of {len(verdict.trials)} checked trials" in found[0].detail, verdict.flags
    # Every timed call was checked, with bounds widened by the reference's own noise, and agreed.
    assert verdict.timing is not None and verdict.timing.verified_calls > 0
    assert Flag.TIMED_OUTPUT_MISMATCH not in {f.flag for f in verdict.flags}


def test_a_candidate_less_accurate_than_eager_on_an_ill_conditioned_reference_is_incorrect(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(PROBLEM, SLOPPY)
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "more than 4x the reference's" in verdict.message, verdict.message
    assert Flag.ILL_CONDITIONED_REFERENCE not in {f.flag for f in verdict.flags}


def test_a_wrong_candidate_on_a_well_conditioned_reference_is_incorrect_and_told_the_error_is_its_own(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(WELL, WELL_WRONG)
    assert verdict.status is Status.INCORRECT, verdict.message
    assert "the reference is within tolerance of a float64 evaluation here" in verdict.message, verdict.message
    # The first failure ends the float64 re-judging: the verdict is "incorrect" whatever the other trials say.
    assert sum("float64" in t.note for t in verdict.trials) == 1, [t.note for t in verdict.trials]


def test_an_output_that_is_one_constant_in_float64_keeps_the_kernel_out_of_the_library(quick_cpu_evaluator):
    from agent.knowledge.library import judge_verdict

    verdict = quick_cpu_evaluator.evaluate(PROBLEM, BLOCKED)
    found = [f for f in verdict.flags if f.flag is Flag.CONSTANT_REFERENCE]
    # Every trial's float64 answer is 0 (to ~1e-17): writing zeros would pass, so the verdict proves nothing.
    assert found and "in float64 the reference's output is one constant (" in found[0].detail, verdict.flags
    assert not judge_verdict(verdict.to_dict(), min_speedup=0.0).keep
    varying = quick_cpu_evaluator.evaluate(WELL, WELL.replace("class Model(", "class ModelNew("))
    assert Flag.CONSTANT_REFERENCE not in {f.flag for f in varying.flags}


@pytest.mark.parametrize("constants, raised", [
    ([[[0.0, 1e-7]], [[1e-17, 1e-7]], [[-2e-17, 2e-7]]], True),
    ([[[0.0, 1e-7]], [[1.0, 1e-7]]], False),  # a constant per trial, not the same one
    ([[[0.0, 1e-7]], None], False),  # one trial passed strictly or its float64 result varies
    ([[[0.0, 1e-7]]], False),  # one trial proves nothing about other inputs
])
def test_the_float64_constant_needs_every_trial_to_agree_within_the_references_rounding(constants, raised):
    comparisons = [{"index": i, "float64_constants": c} for i, c in enumerate(constants)]
    assert (_constant_in_float64(comparisons) is not None) is raised


def test_on_a_gpu_the_float64_judging_accepts_as_accurate_and_rejects_less_accurate():
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run on the GPU box (benchmarks.md records it)")
    from agent.engine.evaluate import EvalConfig, Evaluator

    config = EvalConfig(device="cuda", compile_baseline=False, allow_any_torch_op=True, min_rounds=2, max_rounds=3)
    with Evaluator(config) as gpu:
        accepted = gpu.evaluate(PROBLEM, BLOCKED)
        assert accepted.status is Status.ACCEPTED, accepted.message
        assert Flag.ILL_CONDITIONED_REFERENCE in {f.flag for f in accepted.flags}
        assert Flag.TIMED_OUTPUT_MISMATCH not in {f.flag for f in accepted.flags}
        sloppy = gpu.evaluate(PROBLEM, SLOPPY)
        assert sloppy.status is Status.INCORRECT and "more than 4x the reference's" in sloppy.message, sloppy.message
