"""A hang or a crash in a problem costs that problem and a restart, never the caller."""
import pytest

from tests.trainer.synthesis import problems
from trainer.synthesis.checks import CheckSettings
from trainer.synthesis.worker import CheckWorker


@pytest.fixture(scope="module")
def worker():
    with CheckWorker(CheckSettings(min_ms=0.0, max_ms=1000.0, compile=False), timeout=300) as w:
        yield w


def test_it_keeps_the_protocol_clean_when_a_problem_prints(worker):
    noisy = problems.problem('print("hello from the problem")\nreturn torch.tanh(x) * 3.0')
    assert worker.check(noisy).ok
    assert worker.check(problems.GOOD).ok


def test_it_survives_a_hang_and_a_crash_and_keeps_checking(worker):
    assert worker.check(problems.GOOD).ok  # started (torch imported) before the timeout is shortened
    restarts = worker.restarts
    worker.timeout = 3
    hung = worker.check(problems.HANGS)
    assert hung.reason == "timeout" and "no answer within 3 s" in hung.detail
    worker.timeout = 300
    crashed = worker.check(problems.CRASHES)
    assert crashed.reason == "crashed" and "exit status 3" in crashed.detail
    assert worker.check(problems.GOOD).ok
    assert worker.restarts == restarts + 2


def test_it_raises_when_the_worker_cannot_start_instead_of_blaming_every_problem(monkeypatch):
    from trainer.synthesis import worker as module

    monkeypatch.setattr(module.sys, "executable", "/bin/false")  # exits at once, never says it is ready
    with CheckWorker(CheckSettings(), timeout=300) as broken:
        with pytest.raises(module.WorkerError, match="did not start"):
            broken.check(problems.GOOD)
