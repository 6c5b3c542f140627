"""`manage.py synthesize_problems`: runs the real pipeline, stores the kept problems, prints the report."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.problems.models import Origin, Problem
from apps.problems.synthetic import EXAMPLES
from trainer.synthesis.dedup import fingerprint

pytestmark = pytest.mark.django_db


def test_it_synthesizes_and_stores_problems_for_the_owner_with_the_report(owner):
    out = StringIO()
    # A window any real runtime falls in: what is kept must not depend on this machine's speed or load.
    # torch.compile is checked in tests/trainer/synthesis/test_cli.py's end-to-end run; skipped here for time.
    call_command("synthesize_problems", "--count", "2", "--owner", "owner", "--seed", "3", "--min-ms", "0",
                 "--max-ms", "10000", "--no-compile-check", stdout=out)
    text = out.getvalue()
    assert "stored 2, already there 0, invalid 0" in text and "rejected:" in text and "near_duplicate" in text
    stored = list(Problem.objects.filter(owner=owner))
    assert len(stored) == 2 and {p.origin for p in stored} == {Origin.SYNTHETIC}
    assert all(p.validation["synthesis"]["eager_ms"] > 0 and p.validation["synthesis"]["ops"] for p in stored)
    examples = {fingerprint("", path.read_text()).signature for path in EXAMPLES.glob("*.py")}
    assert not {fingerprint("", p.source).signature for p in stored} & examples


def test_it_says_what_is_wrong_with_the_owner_or_the_count(owner):
    with pytest.raises(CommandError, match="No user 'ghost'"):
        call_command("synthesize_problems", "--count", "2", "--owner", "ghost")
    with pytest.raises(CommandError, match="count=0"):
        call_command("synthesize_problems", "--count", "0", "--owner", "owner")
