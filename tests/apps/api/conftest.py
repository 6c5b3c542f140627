from __future__ import annotations

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.kernels.models import Kernel
from apps.runs.models import Candidate, Run
from apps.runs.events import append_event
from tests.apps.batches.conftest import builtin_endpoint  # noqa: F401
from tests.apps.cast import GOOD_CANDIDATE


@pytest.fixture(autouse=True)
def fresh_throttle_counts():
    cache.clear()  # throttle counts live in the shared cache
    yield
    cache.clear()


@pytest.fixture
def as_user(request):
    """as_user("owner") -> an APIClient sending that cast member's token (None: anonymous)."""

    def client_for(who: str | None) -> APIClient:
        client = APIClient()
        if who is not None:
            user = request.getfixturevalue(who)
            client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
        return client

    return client_for


@pytest.fixture
def made(owner, problem):
    """A finished run of the owner's with two events, an accepted candidate and its kernel (all private)."""
    run = Run.objects.create(problem=problem, owner=owner, status=Run.Status.FINISHED)
    for kind in ("run_created", "run_finished"):
        append_event(run.pk, kind, {"x": 1})
    verdict = {"status": "accepted", "correct": True, "timing": {"speedup_vs_eager": 1.7, "speedup_vs_compile": 0.9}}
    cand = Candidate.objects.create(run=run, turn=1, source=GOOD_CANDIDATE.read_text(), source_hash="h", backend="cpp",
                                    verdict=verdict)
    kernel = Kernel.objects.create(candidate=cand, problem=problem, owner=owner, name="k", source=cand.source,
                                   source_hash="h", problem_hash=problem.source_hash, backend="cpp", device="cpu",
                                   produced_by=owner, policy="user", hardware={"cpu": "Test CPU 9000"},
                                   speedup_vs_eager=1.7, speedup_vs_compile=0.9, verified_at=timezone.now())
    return {"problem": problem, "run": run, "kernel": kernel}
