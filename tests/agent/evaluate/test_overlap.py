"""The reference's job beside the candidate's (EvalConfig.overlap_reference, agent/evaluate/handoff.py) judges
exactly as the reference's job run after the candidate's, and a candidate that fails does not leave it waiting.
Python candidates calling GEMMs (allowed by default): nothing to compile."""
import pytest

from agent.evaluate import EvalConfig, Evaluator
from agent.verdict import Status

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(96, 64), torch.randn(64, 80)]


def get_init_inputs():
    return []
'''

RIGHT = PROBLEM.replace("class Model(", "class ModelNew(").replace("return a @ b", "return torch.mm(a, b)")
WRONG = RIGHT.replace("torch.mm(a, b)", "torch.addmm(b[0], a, b)")  # a GEMM (allowed), off by a row of b
RAISES = RIGHT.replace("return torch.mm(a, b)", "raise RuntimeError('the candidate gave up')")


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator(EvalConfig(device="cpu")) as ev:
        yield ev


def _verdicts(evaluator: Evaluator, candidate: str):
    verdicts = {}
    for overlap in (True, False):
        config = EvalConfig(device="cpu", overlap_reference=overlap, compile_baseline=False, seed=1234, iterations=10)
        verdicts[overlap] = evaluator.evaluate(PROBLEM, candidate, config)
    return verdicts[True], verdicts[False]


def _reference_work(verdict) -> float:
    """The reference's job's own phases (device init, set-up, comparison, timing...), sub-phases left out."""
    return sum(v for k, v in verdict.seconds.items()
               if k.startswith("reference.") and k.count(".") == 1 and k != "reference.after_candidate")


def test_beside_or_after_the_candidate_the_reference_gives_the_same_judgement(evaluator):
    beside, after = _verdicts(evaluator, RIGHT)
    assert beside.status is Status.ACCEPTED and after.status is Status.ACCEPTED, (beside.message, after.message)
    assert [(t.distribution, t.passed, t.max_abs_error) for t in beside.trials] == \
        [(t.distribution, t.passed, t.max_abs_error) for t in after.trials]
    # Beside: the reference's set-up and comparison were done while the candidate's job ran, so what is left of
    # it once the candidate's job is over is less than its own work; run after, it is all of that work and more.
    assert beside.seconds["reference.after_candidate"] < _reference_work(beside)
    assert after.seconds["reference.after_candidate"] >= _reference_work(after)
    assert "reference.handoff" in beside.seconds and "reference.handoff" not in after.seconds


def test_a_wrong_candidate_is_incorrect_either_way(evaluator):
    beside, after = _verdicts(evaluator, WRONG)
    assert beside.status is Status.INCORRECT and after.status is Status.INCORRECT
    assert [t.passed for t in beside.trials] == [t.passed for t in after.trials]


@pytest.mark.timeout(120)
def test_a_candidate_that_raises_ends_the_evaluation_without_the_reference_waiting_on_it(evaluator):
    beside, after = _verdicts(evaluator, RAISES)
    assert beside.status is Status.RUNTIME_ERROR and after.status is Status.RUNTIME_ERROR
    assert "the candidate gave up" in beside.message
    assert beside.seconds["total"] < 60
