import pytest

from apps.runs.models import Run
from apps.runs.events import append_event
from tests.apps.cast import GOOD_CANDIDATE
from tests.apps.runs.drive import drive

pytestmark = pytest.mark.django_db


def test_it_starts_an_evaluation_that_a_worker_step_finishes(as_user, problem, fast_eval):
    response = as_user("owner").post("/api/v1/runs/", {"problem": problem.pk, "kind": "evaluate",
                                                       "source": GOOD_CANDIDATE.read_text()})
    assert response.status_code == 201, response.json()
    run = drive(Run.objects.get(pk=response.json()["id"]))
    body = as_user("owner").get(f"/api/v1/runs/{run.pk}/").json()
    assert body["status"] == "finished" and body["best"]["status"] == "accepted" and body["best"]["kernel"]
    assert body["best_speedup"] == pytest.approx(run.best_speedup)


def test_it_starts_an_agent_run_with_budgets_on_the_asked_device(as_user, problem, settings, builtin_endpoint):
    settings.KSTUDIO_DEVICE = "cuda"
    endpoint = builtin_endpoint
    response = as_user("owner").post("/api/v1/runs/", {"problem": problem.pk, "kind": "agent", "endpoint": endpoint.name,
                                                       "budgets": {"turns": 2}, "device": "cpu"}, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.kind == "agent" and run.budgets["turns"] == 2 and run.config["device"] == "cpu"
    assert run.events.get(seq=1).payload["config"]["device"] == "cpu"


def test_it_says_what_an_agent_run_lacks(as_user, problem):
    response = as_user("owner").post("/api/v1/runs/", {"problem": problem.pk, "kind": "agent", "budgets": {"turns": 0}},
                                     format="json")
    fields = response.json()["error"]["fields"]
    assert response.status_code == 400 and "budgets" in fields
    response = as_user("owner").post("/api/v1/runs/", {"problem": problem.pk, "kind": "agent"}, format="json")
    assert "endpoint" in response.json()["error"]["fields"]
    assert not Run.objects.exists()


def test_the_owner_cancels_a_run(as_user, problem):
    run = Run.objects.create(problem=problem, owner=problem.owner)
    response = as_user("owner").post(f"/api/v1/runs/{run.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"


def test_it_pages_events_by_seq(as_user, made):
    run = made["run"]
    for i in range(3):
        append_event(run.pk, "note", {"i": i})
    client = as_user("owner")
    first = client.get(f"/api/v1/runs/{run.pk}/events/?after=0&limit=2").json()
    assert [e["seq"] for e in first["events"]] == [1, 2] and first["has_more"] and first["next_after"] == 2
    rest = client.get(f"/api/v1/runs/{run.pk}/events/?after={first['next_after']}").json()
    assert [e["seq"] for e in rest["events"]] == [3, 4, 5] and not rest["has_more"]
    assert client.get(f"/api/v1/runs/{run.pk}/events/?after=x").json()["error"]["fields"] == {
        "after": ["Must be a whole number, not 'x'."]}


def test_it_filters_runs(as_user, made):
    client = as_user("owner")
    assert client.get(f"/api/v1/runs/?problem={made['problem'].pk}&status=finished").json()["count"] == 1
    assert client.get("/api/v1/runs/?status=queued").json()["count"] == 0
    assert client.get("/api/v1/runs/?kind=agent").json()["count"] == 0
