import pytest

from tests.apps.cast import fast_eval, member, owner, problem, problem_checked, staff, stranger  # noqa: F401


@pytest.fixture(autouse=True)
def problem_check_in_process(request, monkeypatch):
    """An upload's sandbox check runs eagerly in this process (the real check, no worker needed),
    unless the test asks for `check_worker` (tests/apps/problems/test_check.py)."""
    if "check_worker" in request.fixturenames:
        return
    from apps.problems.tasks import check_problem

    monkeypatch.setattr(check_problem, "apply_async", lambda args=(), kwargs=None, **options: check_problem.apply(args, kwargs))
