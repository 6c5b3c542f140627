"""Evaluator.check_problem: the upload's sandboxed run of a problem, by the real engine on the CPU.
A good problem reports its outputs; one that crashes, hangs or fails raises ProblemError saying why."""
import os
import time
from pathlib import Path

import pytest

from agent.engine.evaluate import EvalConfig, Evaluator, ProblemError
from agent.engine.sandbox import Limits
from tests.corpus.tiny_problem import FAILING_INPUTS, TEMPLATE

PROBLEM = Path(__file__).resolve().parents[3] / "corpus" / "problems" / "elementwise_silu_bias.py"
@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    cache = Path(os.environ["KSTUDIO_CACHE_DIR"]) if os.environ.get("KSTUDIO_CACHE_DIR") else tmp_path_factory.mktemp("kstudio-cache")
    with Evaluator(EvalConfig(device="cpu", compile_baseline=False), cache_root=cache) as ev:
        yield ev


def test_it_reports_the_outputs_of_a_good_problem(evaluator):
    header = evaluator.check_problem(PROBLEM.read_text(), seconds=60)
    assert [o["shape"] for o in header["outputs"]] == [[1024, 1024]], header["outputs"]
    assert header["hardware"]


def test_it_rejects_a_module_that_raises_on_import(evaluator):
    source = TEMPLATE.format(body="raise RuntimeError('no weights here')")
    with pytest.raises(ProblemError, match="no weights here"):
        evaluator.check_problem(source, seconds=60)


def test_it_rejects_a_get_inputs_that_fails_when_run(evaluator):
    source = FAILING_INPUTS.format(body="")
    with pytest.raises(ProblemError, match="reference problem failed"):
        evaluator.check_problem(source, seconds=60)


def test_a_problem_killed_from_outside_mid_check_is_told_as_such_not_as_a_job_that_stopped_answering(evaluator):
    # As the kernel's out-of-memory killer does to a full-size KernelBench problem on a small machine: SIGKILL, no
    # word from the sandbox's own limits. The user hears what happened and its likely cause.
    source = TEMPLATE.format(body="import os, signal").replace(
        "return x + 1", "os.kill(os.getpid(), signal.SIGKILL)\n        return x + 1")
    with pytest.raises(ProblemError) as info:
        evaluator.check_problem(source, seconds=60)
    message = str(info.value)
    assert "killed by SIGKILL" in message and "ran out of memory" in message, message
    assert "ended without answering" not in message


def test_it_stops_a_module_that_hangs_on_import_within_its_seconds(evaluator):
    source = TEMPLATE.format(body="import time\ntime.sleep(3600)")
    started = time.monotonic()
    with pytest.raises(ProblemError, match="(?i)wall|time"):
        evaluator.check_problem(source, seconds=3)
    assert time.monotonic() - started < 30


def test_it_rejects_an_invalid_module_before_running_it(evaluator):
    with pytest.raises(ProblemError, match="invalid"):
        evaluator.check_problem("import torch\n\ndef get_inputs():\n    return []\n")


def test_it_takes_the_reference_limits_from_the_config():
    assert EvalConfig().reference_limits == Limits(wall_seconds=900, cpu_seconds=3600)
    assert EvalConfig(reference_limits=Limits(wall_seconds=5)).reference_limits.wall_seconds == 5
    with pytest.raises(ValueError, match="reference_limits"):
        EvalConfig(reference_limits={"wall_seconds": 5})
