import pytest

from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.sandbox import Limits

# A quick real engine on the CPU for tests about what a verdict says, not about its figures: any torch op allowed (own
# code as its candidate), two short rounds.
QUICK_CPU = EvalConfig(device="cpu", compile_baseline=False, allow_any_torch_op=True, min_rounds=2, max_rounds=2,
                       batch_ms=5.0, limits=Limits(wall_seconds=60, memory_bytes=4 << 30))


@pytest.fixture(scope="module")
def quick_cpu_evaluator(tmp_path_factory):
    with Evaluator(QUICK_CPU, cache_root=tmp_path_factory.mktemp("kstudio-cache")) as ev:
        yield ev
