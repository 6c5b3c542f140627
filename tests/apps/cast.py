"""The shared cast for permission tests (owner, member, stranger, staff) and corpus helpers."""
from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
PROBLEM = CORPUS / "problems" / "elementwise_silu_bias.py"
GOOD_CANDIDATE = CORPUS / "candidates" / "legit_cpp_silu_bias.py"
BAD_BUILD_CANDIDATE = CORPUS / "candidates" / "fault_cpp_build_error.py"


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("member", password="member-pass-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user("stranger", password="stranger-pass-123")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", password="staff-pass-123", is_staff=True)


@pytest.fixture
def problem(owner):
    from apps.problems.services import create_problem

    return create_problem(owner, "silu_bias.py", PROBLEM.read_text())


@pytest.fixture
def run(owner, problem):
    """The owner's run on the problem, with three events already (seq 1-3) for replay tests."""
    from apps.runs.models import Run
    from apps.runs.services import append_event

    run = Run.objects.create(problem=problem, owner=owner)
    for i in range(3):
        append_event(run.pk, "step", {"i": i})
    return run


@pytest.fixture
def fast_eval(settings):
    """Quick evaluations: no torch.compile baseline, few timed iterations."""
    settings.KSTUDIO_DEVICE = "cpu"
    settings.KSTUDIO_COMPILE_BASELINE = False
    settings.KSTUDIO_EVAL_ITERATIONS = 10
    settings.KSTUDIO_CANDIDATE_WALL_SECONDS = 120
    return settings
