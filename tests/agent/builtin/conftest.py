import pytest

from agent.engine.evaluate import EvalConfig, Evaluator


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator(EvalConfig(device="cpu", compile_baseline=False, min_rounds=2, max_rounds=3, batch_ms=10.0)) as ev:
        yield ev
