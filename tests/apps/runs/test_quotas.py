"""Per-user quotas (apps/runs/quotas.py): runs in flight, queued runs and GPU seconds per day come from settings;
past one, a run is refused with 429 and the limit named (API and pages), and every budget has a maximum."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.batches.models import Batch
from apps.problems.models import Problem
from apps.problems.services import sha256
from apps.runs.models import Candidate, Run
from tests.apps.batches.conftest import builtin_endpoint  # noqa: F401
from tests.apps.cast import GOOD_CANDIDATE, PROBLEM

pytestmark = pytest.mark.django_db


def stored_problem(owner, name: str = "silu_bias.py") -> Problem:
    """A problem as an upload stores it, without the sandbox check (these tests never run it)."""
    source = PROBLEM.read_text()
    return Problem.objects.create(owner=owner, name=name, source=source, source_hash=sha256(source),
                                  validation={"ok": True})


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def evaluate(user, problem):
    return api(user).post("/api/v1/runs/", {"problem": problem.pk, "kind": "evaluate",
                                            "source": GOOD_CANDIDATE.read_text()}, format="json")


def test_it_refuses_a_run_past_the_users_runs_in_flight_with_429(owner, member, settings):
    settings.KSTUDIO_QUOTA_RUNS_IN_FLIGHT = 2
    problem = stored_problem(owner)
    for status in (Run.Status.RUNNING, Run.Status.QUEUED, Run.Status.FINISHED):
        Run.objects.create(problem=problem, owner=owner, status=status)
    response = evaluate(owner, problem)
    error = response.json()["error"]
    assert response.status_code == 429 and error["code"] == "quota_exceeded"
    assert "2 runs in flight" in error["message"] and "allows 2" in error["message"]
    assert Run.objects.filter(owner=owner).count() == 3
    assert evaluate(member, stored_problem(member)).status_code == 201  # counted per user


def test_it_refuses_a_run_past_the_users_queued_runs(owner, settings, builtin_endpoint):
    settings.KSTUDIO_QUOTA_QUEUED_RUNS = 1
    problem = stored_problem(owner)
    assert evaluate(owner, problem).status_code == 201
    response = api(owner).post("/api/v1/runs/", {"problem": problem.pk, "kind": "agent",
                                                 "endpoint": builtin_endpoint.name}, format="json")
    assert response.status_code == 429 and "1 runs queued" in response.json()["error"]["message"]


def test_it_refuses_a_run_once_the_users_gpu_seconds_of_the_day_are_spent(owner, settings, builtin_endpoint):
    settings.KSTUDIO_QUOTA_GPU_SECONDS_PER_DAY = 100
    problem = stored_problem(owner)
    old = Run.objects.create(problem=problem, owner=owner, kind=Run.Kind.AGENT, status=Run.Status.FINISHED,
                             agent_state={"gpu_seconds": 500.0})
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))  # outside the window
    evaluated = Run.objects.create(problem=problem, owner=owner, status=Run.Status.FINISHED)
    Candidate.objects.create(run=evaluated, turn=1, source="x", source_hash="h",
                             verdict={"seconds": {"session": 50.0, "session.timing": 40.0, "profile": 10.0,
                                      "build": 999.0}})
    response = api(owner).post("/api/v1/runs/", {"problem": problem.pk, "kind": "agent",
                                                 "endpoint": builtin_endpoint.name}, format="json")
    assert response.status_code == 201
    assert Run.objects.get(pk=response.json()["id"]).budgets["gpu_seconds"] == pytest.approx(40.0)  # what is left
    Run.objects.filter(pk=response.json()["id"]).update(status=Run.Status.FINISHED, agent_state={"gpu_seconds": 40.0})
    response = evaluate(owner, problem)
    assert response.status_code == 429 and "100 GPU seconds in the past 24 hours" in response.json()["error"]["message"]


def test_a_batch_past_the_quota_is_refused_whole(owner, settings, builtin_endpoint):
    settings.KSTUDIO_QUOTA_QUEUED_RUNS = 2
    problems = [stored_problem(owner, f"p{i}.py").pk for i in range(3)]
    response = api(owner).post("/api/v1/batches/", {"problems": problems, "endpoint": builtin_endpoint.name},
                               format="json")
    assert response.status_code == 429 and "this request starts 3" in response.json()["error"]["message"]
    assert not Run.objects.exists() and not Batch.objects.exists()


def test_the_problem_page_answers_429_with_the_quota_when_a_run_is_refused(client, owner, settings, builtin_endpoint):
    settings.KSTUDIO_QUOTA_RUNS_IN_FLIGHT = 1
    problem = stored_problem(owner)
    Run.objects.create(problem=problem, owner=owner, status=Run.Status.RUNNING)
    client.force_login(owner)
    response = client.post(f"/runs/optimize/{problem.pk}/", {"endpoint": builtin_endpoint.pk})
    assert response.status_code == 429 and "1 runs in flight" in response.content.decode()
    response = client.post(f"/runs/start/{problem.pk}/", {"source": GOOD_CANDIDATE.read_text()})
    assert response.status_code == 429 and "allows 1" in response.content.decode()


@pytest.mark.parametrize("budgets, field", [({"gpu_seconds": 1e308}, "gpu_seconds"), ({"turns": 10**30}, "turns"),
                                            ({"tokens": 10**9}, "tokens"), ({"agent_wall_seconds": 10**7}, "agent_wall_seconds")])
def test_every_budget_has_a_maximum(owner, settings, builtin_endpoint, budgets, field):
    problem = stored_problem(owner)
    response = api(owner).post("/api/v1/runs/", {"problem": problem.pk, "kind": "agent", "budgets": budgets,
                                                 "endpoint": builtin_endpoint.name}, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"]["budgets"]
    assert "less than or equal" in str(response.json()["error"]["fields"]["budgets"][field])
    assert not Run.objects.exists()


def test_a_run_without_a_gpu_budget_gets_the_studios_maximum(owner, settings, builtin_endpoint):
    settings.KSTUDIO_AGENT_MAX_GPU_SECONDS = 120.0
    response = api(owner).post("/api/v1/runs/", {"problem": stored_problem(owner).pk, "kind": "agent",
                                                 "endpoint": builtin_endpoint.name, "budgets": {"gpu_seconds": 60}},
                               format="json")
    assert response.status_code == 201 and response.json()["budgets"]["gpu_seconds"] == 60
    response = api(owner).post("/api/v1/runs/", {"problem": stored_problem(owner, "b.py").pk, "kind": "agent",
                                                 "endpoint": builtin_endpoint.name}, format="json")
    assert response.json()["budgets"]["gpu_seconds"] == 120.0
