import pytest

from agent.evaluate import EvalConfig, Evaluator


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator(EvalConfig(device="cpu", compile_baseline=False, iterations=10)) as ev:
        yield ev
