"""One warm Evaluator and one build cache for every agent-loop test: the corpus's C++ candidates
build once (~15 s cold on a small box) and every later evaluation hits the cache."""
from pathlib import Path

import pytest

from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.sandbox import Limits
from agent.loop.tools import Toolbox

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
PROBLEM = (CORPUS / "problems" / "elementwise_silu_bias.py").read_text()

# Light but real: one trial of the problem's inputs plus one extra distribution, short timing.
CONFIG = EvalConfig(device="cpu", compile_baseline=False, trials=1, distributions=("mixed_sign",), min_rounds=2,
                    max_rounds=3, batch_ms=10.0, limits=Limits(wall_seconds=60, memory_bytes=4 << 30))


def candidate(name: str) -> str:
    return (CORPUS / "candidates" / f"{name}.py").read_text()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kstudio-loop-cache")


@pytest.fixture(scope="session")
def evaluator(cache_dir):
    with Evaluator(CONFIG, cache_root=cache_dir) as ev:
        yield ev


@pytest.fixture
def toolbox(evaluator) -> Toolbox:
    return Toolbox(evaluator, CONFIG)
