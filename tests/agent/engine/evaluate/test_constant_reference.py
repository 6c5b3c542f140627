"""A problem whose reference returns one constant whatever its inputs (KernelBench has such problems: a max over a
dimension minus its own mean over a dimension of one): any candidate that writes the constant passes every check, so
the verdict says so (flag constant_reference, raised from the reference's job's findings) and the library keeps no such
kernel. Through the real engine on the CPU."""

import pytest

from agent.engine.evaluate.judge import _constant_reference
from agent.engine.verdict import Flag, Status
from agent.knowledge.library import judge_verdict

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.lin(x).max(dim=1, keepdim=True).values
        return m - m.mean(dim=1, keepdim=True)  # the mean of one element is itself: zero for every finite input


def get_inputs():
    return [torch.randn(128, 64)]


def get_init_inputs():
    return []
'''
# The same module, as its candidate, writing the constant and nothing else.
ZEROS = PROBLEM.replace("class Model(", "class ModelNew(").replace(
    """        m = self.lin(x).max(dim=1, keepdim=True).values
        return m - m.mean(dim=1, keepdim=True)""", """        return torch.zeros(x.shape[0], 1)""")
assert "torch.zeros(x.shape[0], 1)" in ZEROS
VARYING = PROBLEM.replace("return m - m.mean(dim=1, keepdim=True)", "return m")


def test_a_candidate_writing_the_constant_of_a_constant_reference_is_flagged_and_kept_out_of_the_library(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(PROBLEM, ZEROS)
    assert verdict.status is Status.ACCEPTED, verdict.message  # the problem is at fault, not the candidate
    found = [f for f in verdict.flags if f.flag is Flag.CONSTANT_REFERENCE]
    assert found and "(0)" in found[0].detail and f"all {len(verdict.trials)} checked trials" in found[0].detail, verdict.flags
    decision = judge_verdict(verdict.to_dict(), min_speedup=1.0)
    assert not decision.keep and "constant" in decision.reason


def test_a_reference_whose_outputs_vary_raises_no_such_flag(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(VARYING, VARYING.replace("class Model(", "class ModelNew("))
    assert verdict.status is Status.ACCEPTED, verdict.message
    assert Flag.CONSTANT_REFERENCE not in {f.flag for f in verdict.flags}


@pytest.mark.parametrize("constants, raised", [
    ([[0.0], [0.0], [0.0]], True),
    ([[2.5, 1.0], [2.5, 1.0]], True),
    ([[0.0], [1.0]], False),  # a constant per trial, but not the same one: the output depends on the inputs
    ([[0.0], [None]], False),  # one trial's output held several values
    ([[0.0]], False),  # one trial proves nothing about other inputs
    ([None, [0.0]], False),  # a comparison without the reference's findings (an earlier engine's, or a failed call)
])
def test_the_flag_needs_every_trial_to_show_the_same_constants(constants, raised):
    comparisons = [{"index": i, "reference_constants": c} for i, c in enumerate(constants)]
    assert (_constant_reference(comparisons) is not None) is raised
