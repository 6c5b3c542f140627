"""Each filter rejects a crafted bad problem with its named reason; a good problem passes them all.
The checks run in a real worker process (one for the whole file: it imports torch once)."""
import pytest

from tests.trainer.synthesis import problems
from trainer.synthesis.checks import CheckSettings, check_source
from trainer.synthesis.worker import CheckWorker


@pytest.fixture(scope="module")
def worker():
    # A window every crafted problem's real work falls in on any machine (the window has its own test below);
    # the slow one sleeps 200 ms.
    with CheckWorker(CheckSettings(min_ms=0.0, max_ms=100.0), timeout=300) as w:
        yield w


def test_it_passes_a_good_problem_and_reports_what_it_measured(worker):
    outcome = worker.check(problems.GOOD)
    assert outcome.ok and outcome.reason is None, outcome.detail
    assert outcome.output_shape == [256, 512] and outcome.eager_ms > 0 and outcome.compile_ms > 0


def test_two_runs_that_differ_only_by_noise_below_the_tolerance_count_as_deterministic():
    settings = CheckSettings(min_ms=0.0, max_ms=1000.0, compile=False)
    assert check_source(problems.ROUNDING_NOISE, settings).ok
    strict = check_source(problems.ROUNDING_NOISE, CheckSettings(min_ms=0.0, max_ms=1000.0, compile=False, rtol=0.0, atol=0.0))
    assert strict.reason == "nondeterministic" and "rtol 0.0, atol 0.0" in strict.detail


@pytest.mark.parametrize(("source", "reason", "says"), [
    (problems.NONDETERMINISTIC, "nondeterministic", "two runs with the same seed and inputs differ"),
    (problems.CONSTANT, "constant_output", "outputs are (nearly) equal to 0"),
    (problems.IGNORES_INPUT, "constant_output", "it ignores its input"),
    (problems.NON_FINITE, "non_finite", "are NaN or inf"),
    (problems.ALIASED, "aliased_output", "shares memory with an input"),
    (problems.EAGER_ERROR, "eager_error", "running forward in eager raised RuntimeError"),
    (problems.TOO_SLOW, "too_slow", "is above the window's 100.0 ms"),
    (problems.COMPILE_MISMATCH, "compile_mismatch", "torch.compile differs from eager by up to 1"),
    (problems.COMPILE_ERROR, "compile_error", "torch.compile raised"),
], ids=["nondeterministic", "constant", "ignores_input", "non_finite", "aliased", "eager_error", "too_slow",
        "compile_mismatch", "compile_error"])
def test_it_rejects_a_bad_problem_with_its_reason(worker, source, reason, says):
    outcome = worker.check(source)
    assert not outcome.ok and outcome.reason == reason, outcome.detail
    assert says in outcome.detail


def test_it_rejects_runtimes_outside_the_window():
    # Windows no real runtime can fall in, so the verdict does not depend on this machine's speed or load.
    fast = check_source(problems.GOOD, CheckSettings(min_ms=1e9, max_ms=2e9, compile=False))
    assert fast.reason == "too_fast" and "below the window's 1000000000.0 ms" in fast.detail
    slow = check_source(problems.GOOD, CheckSettings(min_ms=0.0, max_ms=1e-9, compile=False))
    assert slow.reason == "too_slow" and slow.eager_ms > 1e-9
