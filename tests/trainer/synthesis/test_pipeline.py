"""The loop keeps distinct problems, counts every rejection, and refuses near-duplicates of what exists."""
from agent.engine.validation import validate_problem
from trainer.synthesis.config import SynthesisConfig
from trainer.synthesis.dedup import fingerprint
from trainer.synthesis.pipeline import synthesize

# A window any real runtime falls in, so what is kept does not depend on this machine's speed or load
# (the window itself is tested in test_checks.py); torch.compile is left to test_cli.py's end-to-end run.
WIDE = {"min_ms": 0.0, "max_ms": 10_000.0, "compile_check": False}


def test_it_keeps_distinct_valid_problems_and_counts_every_rejection_then_refuses_them_as_existing():
    first = synthesize(SynthesisConfig(count=4, seed=21, **WIDE))
    assert first.report.kept == len(first.problems) == 4
    assert sum(first.report.rejected.values()) == first.report.attempts - 4
    assert len({p.name for p in first.problems}) == len({p.source for p in first.problems}) == 4
    assert len({fingerprint("", p.source).signature for p in first.problems}) == 4
    for p in first.problems:
        assert validate_problem(p.source).ok and p.origin == "synthetic" and p.device == "cpu"
        assert 1 <= len(p.ops) <= 5 and p.checks["eager_ms"] > 0

    # The same seed composes the same candidates again: those kept before are now existing problems.
    attempts = first.report.attempts
    again = synthesize(SynthesisConfig(count=attempts, seed=21, max_attempts=attempts, **WIDE),
                       existing=[(p.name, p.source) for p in first.problems])
    assert again.report.rejected["near_duplicate"] >= 4
    assert "the same ops" in again.report.first_detail["near_duplicate"]
    assert not {p.source for p in again.problems} & {p.source for p in first.problems}
