"""A problem with few outputs (keyed.FEW_OUTPUTS) through the real engine on the CPU: its timed calls' inputs are fresh
draws per call in both jobs, so no table of every rolled pool draw's outputs can answer them, and a candidate whose
job mixes its inputs otherwise is caught by the check of every timed call."""

from agent.engine.verdict import Status

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)  # 256 outputs, each linear in the input: the kind a table of mixes could answer


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return []
'''
OWN_CODE = PROBLEM.replace("class Model(", "class ModelNew(")
# The table-maker's first step: its own job mixes from the rolled pool draws it could have tabulated, not fresh ones.
POOLED_MIX = '''
import agent.engine.evaluate.keyed as _keyed

_init = _keyed.Pools.__init__


def _pooled(self, seed, fresh=False, **others):
    _init(self, seed, False, **others)


_keyed.Pools.__init__ = _pooled
''' + OWN_CODE


def test_a_problem_with_few_outputs_is_timed_on_fresh_mixes_alike_in_both_jobs(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(PROBLEM, OWN_CODE)
    assert verdict.status is Status.ACCEPTED, verdict.message
    assert verdict.timing is not None and verdict.timing.verified_calls > 0


def test_a_candidate_whose_job_mixes_from_the_pools_instead_is_caught(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(PROBLEM, POOLED_MIX)
    assert verdict.status in (Status.REJECTED, Status.INCORRECT), verdict.message
    assert "timed_output_mismatch" in verdict.flag_names(), verdict.message
