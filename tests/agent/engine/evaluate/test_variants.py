"""A problem's input variants (get_input_variants, DESIGN §3) through the real engine on the CPU: every variant is a
checked call and is timed on its own, so a kernel that bakes in the main shape is caught; problems without variants
are judged as before."""
import dataclasses
from pathlib import Path

import pytest

from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.sandbox import Limits
from agent.engine.validation import validate_problem
from agent.engine.verdict import Status

CORPUS = Path(__file__).resolve().parents[3] / "corpus"
PROBLEM = (CORPUS / "problems" / "scale_shift_variants.py").read_text()
CONFIG = EvalConfig(device="cpu", backend="cpp", compile_baseline=False, min_rounds=2, max_rounds=2, batch_ms=5.0,
                    limits=Limits(wall_seconds=60, memory_bytes=4 << 30))


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator(CONFIG, cache_root=tmp_path_factory.mktemp("kstudio-cache")) as ev:
        yield ev


def test_the_problem_check_accepts_get_input_variants_and_refuses_one_with_required_parameters():
    assert validate_problem(PROBLEM).ok
    broken = PROBLEM.replace("def get_input_variants():", "def get_input_variants(n):")
    assert any("get_input_variants" in i.message for i in validate_problem(broken).errors())


def test_a_kernel_that_bakes_in_the_main_shape_is_incorrect_on_a_variant(evaluator):
    candidate = (CORPUS / "candidates" / "exploit_cpp_fixed_shape.py").read_text()
    verdict = evaluator.evaluate(PROBLEM, candidate)
    assert verdict.status is Status.INCORRECT, verdict.message
    main = [t for t in verdict.trials if not t.distribution.startswith("variant")]
    variants = [t for t in verdict.trials if t.distribution.startswith("variant")]
    assert main and all(t.passed for t in main), "right on the main shape"
    assert [t.distribution for t in variants] == ["variant1", "variant2"] and not any(t.passed for t in variants)
    assert "variant1" in verdict.message and "expected shape (512, 512)" in verdict.message


def test_a_kernel_that_serves_every_shape_is_accepted_with_each_variant_timed(evaluator):
    candidate = (CORPUS / "candidates" / "legit_cpp_scale_shift_any_shape.py").read_text()
    verdict = evaluator.evaluate(PROBLEM, candidate)
    assert verdict.accepted, verdict.message
    assert [t.distribution for t in verdict.trials][-2:] == ["variant1", "variant2"]
    timing = verdict.timing
    assert timing is not None and [v["label"] for v in timing.variants] == ["variant1", "variant2"]
    for v in timing.variants:
        assert v["candidate_ms"] > 0 and v["eager_ms"] > 0 and v["speedup_vs_best"] > 0 and v["verified_calls"] > 0
    assert "variant2:" in verdict.message


def test_a_problem_without_variants_is_judged_as_before(evaluator):
    plain = PROBLEM.replace("def get_input_variants():", "def _unused():")
    candidate = (CORPUS / "candidates" / "legit_cpp_scale_shift_any_shape.py").read_text()
    verdict = evaluator.evaluate(plain, candidate, dataclasses.replace(CONFIG, trials=1))
    assert verdict.accepted, verdict.message
    assert not any(t.distribution.startswith("variant") for t in verdict.trials)
    assert verdict.timing is not None and verdict.timing.variants == []


def test_each_phase_is_reported_as_it_starts_and_a_failing_watcher_changes_nothing(evaluator):
    """Progress for the run page and the CLI (progress.py), here on an evaluation with every timed phase."""
    candidate = (CORPUS / "candidates" / "legit_cpp_scale_shift_any_shape.py").read_text()
    seen: list[tuple[str, str, float]] = []
    verdict = evaluator.evaluate(PROBLEM, candidate, on_phase=lambda *phase: seen.append(phase))
    assert verdict.accepted, verdict.message
    phases = [p for p, _, _ in seen]
    order = ["plan", "build", "reference", "candidate", "check", "warm_up", "timing", "variants"]
    assert [p for p in dict.fromkeys(phases) if p in order] == order, phases
    assert phases.count("check") == len(verdict.trials) and phases.count("timing") >= CONFIG.min_rounds
    assert phases.count("variants") == 2 and any("variant2 (2 of 2)" in what for _, what, _ in seen)
    elapsed = [e for _, _, e in seen]
    assert elapsed == sorted(elapsed) and elapsed[-1] < verdict.seconds["total"]

    def broken(*_: object) -> None:
        raise ConnectionError("the watcher's database went away")

    again = evaluator.evaluate(PROBLEM, candidate, on_phase=broken)
    assert again.accepted and again.status is verdict.status, again.message
