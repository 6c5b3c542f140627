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


@pytest.fixture(scope="session")
def problem_checked():
    """The silu problem through the real upload check (validation, then a run in the sandbox), once per session:
    the check's answer for one source does not change between tests, so each test's row reuses it."""
    from apps.problems.services import check_problem

    return check_problem("silu_bias.py", PROBLEM.read_text(), in_process=True)


@pytest.fixture
def problem(owner, problem_checked):
    """The owner's silu problem, stored as an upload stores it (tests/apps/problems test the check itself)."""
    from apps.problems.services import store_problem

    return store_problem(owner, problem_checked)


@pytest.fixture
def run(owner, problem):
    """The owner's run on the problem, with three events already (seq 1-3) for replay tests."""
    from apps.runs.models import Run
    from apps.runs.events import append_event

    run = Run.objects.create(problem=problem, owner=owner)
    for i in range(3):
        append_event(run.pk, "step", {"i": i})
    return run


@pytest.fixture
def fast_eval(settings):
    """Quick evaluations: no torch.compile baseline, few timed iterations."""
    settings.KSTUDIO_DEVICE = "cpu"
    settings.KSTUDIO_COMPILE_BASELINE = False
    settings.KSTUDIO_EVAL_MIN_ROUNDS = 2
    settings.KSTUDIO_EVAL_MAX_ROUNDS = 3
    settings.KSTUDIO_CANDIDATE_WALL_SECONDS = 120
    # Real evaluations on a shared test box time noisily and a small CPU kernel may not beat PyTorch: tests of
    # other things keep what was verified (tests/apps/kernels/test_services.py tests the library's rule).
    settings.KSTUDIO_LIBRARY_KEEP_NOISY = True
    settings.KSTUDIO_LIBRARY_MIN_SPEEDUP = 0.01
    return settings
