import csv
import json
import io

import pytest

from apps.batches.completion import finish_batch_if_done
from apps.batches.models import Batch
from apps.problems.models import Problem
from apps.runs.models import Candidate, Run
from tests.apps.cast import PROBLEM

pytestmark = pytest.mark.django_db


@pytest.fixture
def builtin(builtin_endpoint):
    return builtin_endpoint.name


def test_it_starts_a_batch_from_problem_ids_and_new_sources(as_user, problem, builtin):
    source = PROBLEM.read_text().replace("def get_inputs", "# a variant\ndef get_inputs")
    response = as_user("owner").post("/api/v1/batches/", {
        "name": "mine", "problems": [problem.pk], "sources": [{"name": "variant.py", "source": source}],
        "endpoint": builtin, "budgets": {"turns": 2}, "device": "cpu"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["progress"] == {"total": 2, "done": 0, "status": "running",
                                "counts": {"queued": 2, "running": 0, "finished": 0, "failed": 0, "cancelled": 0}}
    batch = Batch.objects.get(pk=body["id"])
    runs = Run.objects.filter(batch_item__batch=batch)
    assert runs.count() == 2 and {r.budgets["turns"] for r in runs} == {2} and {r.config["device"] for r in runs} == {"cpu"}
    assert Problem.objects.filter(name="variant", owner=problem.owner).exists()


def test_a_bad_source_creates_nothing(as_user, problem, builtin):
    response = as_user("owner").post("/api/v1/batches/", {
        "problems": [problem.pk], "sources": [{"name": "bad.py", "source": "x = 1\n"}], "endpoint": builtin},
        format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "rejected"
    assert not Batch.objects.exists() and not Run.objects.exists() and Problem.objects.count() == 1


def test_it_refuses_problems_the_user_cannot_see_and_an_unknown_endpoint(as_user, problem, builtin):
    response = as_user("stranger").post("/api/v1/batches/", {"problems": [problem.pk], "endpoint": builtin}, format="json")
    assert response.status_code == 400 and "problems" in response.json()["error"]["fields"]
    response = as_user("owner").post("/api/v1/batches/", {"problems": [problem.pk], "endpoint": "nope"}, format="json")
    assert "endpoint" in response.json()["error"]["fields"]
    assert not Batch.objects.exists()


def _finished_batch(as_user, problem, builtin):
    batch_id = as_user("owner").post("/api/v1/batches/", {"problems": [problem.pk], "endpoint": builtin},
                                     format="json").json()["id"]
    run = Run.objects.get(batch_item__batch_id=batch_id)
    cand = Candidate.objects.create(run=run, turn=1, source="s", source_hash="h", verdict={
        "status": "accepted", "correct": True, "timing": {"speedup_vs_eager": 2.5, "speedup_vs_compile": 1.25,
                                                          "speedup_vs_best": 1.2, "sol_fraction": 0.4}})
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, best_candidate=cand, best_speedup=2.5)
    finish_batch_if_done(run.pk)  # as the step that ends a run does
    return batch_id


def test_it_reports_a_finished_batch_as_json_and_csv(as_user, problem, builtin):
    batch_id = _finished_batch(as_user, problem, builtin)
    client = as_user("owner")
    detail = client.get(f"/api/v1/batches/{batch_id}/").json()
    assert detail["status"] == "finished" and detail["progress"]["done"] == 1
    report = client.get(f"/api/v1/batches/{batch_id}/report/").json()
    assert report["summary"]["correctness_rate"] == 1.0 and report["summary"]["fast_p"]["2"] == 1.0
    assert report["summary"]["geomean_speedup_vs_compile"] == pytest.approx(1.25)
    assert report["configuration"]["endpoint"] == builtin
    response = client.get(f"/api/v1/batches/{batch_id}/report/?format=csv")
    assert response["Content-Type"].startswith("text/csv") and "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["problem"], r["verdict"], r["correct"], r["speedup_vs_eager"]) for r in rows] == [
        (problem.name, "accepted", "True", "2.5")]
    assert (rows[0]["speedup_vs_best"], rows[0]["sol_fraction"]) == ("1.2", "0.4")


def test_the_report_headlines_the_best_of_baseline_and_the_speed_of_light(as_user, problem, builtin):
    batch_id = _finished_batch(as_user, problem, builtin)
    summary = as_user("owner").get(f"/api/v1/batches/{batch_id}/report/").json()["summary"]
    assert summary["fast_p_vs_best"]["1"] == 1.0 and summary["fast_p_vs_best"]["1.5"] == 0.0
    assert summary["geomean_speedup_vs_best"] == pytest.approx(1.2)
    assert summary["geomean_sol_fraction"] == pytest.approx(0.4)


def test_the_openapi_schema_describes_the_headline_and_the_speed_of_light(as_user):
    schema = as_user("owner").get("/api/v1/schema/?format=json").json()["components"]["schemas"]
    assert {"speedup_vs_best", "sol_fraction"} <= set(schema["ReportRow"]["properties"])
    assert {"fast_p_vs_best", "geomean_speedup_vs_best", "geomean_sol_fraction"} <= set(schema["ReportSummary"]["properties"])
    timing = schema["VerdictTiming"]["properties"]  # a run's best verdict (GET /api/v1/runs/{id}/)
    assert {"speedup_vs_best", "sol_fraction", "variants"} <= set(timing)
    assert {"label", "candidate_ms", "speedup_vs_best"} <= set(schema["VariantTiming"]["properties"])


def test_only_the_owner_cancels_a_batch_and_strangers_do_not_see_it(as_user, problem, builtin):
    batch_id = as_user("owner").post("/api/v1/batches/", {"problems": [problem.pk], "endpoint": builtin},
                                     format="json").json()["id"]
    assert as_user("stranger").get(f"/api/v1/batches/{batch_id}/report/").status_code == 404
    assert as_user("stranger").post(f"/api/v1/batches/{batch_id}/cancel/").status_code == 404
    Batch.objects.filter(pk=batch_id).update(shared=True)
    assert as_user("member").post(f"/api/v1/batches/{batch_id}/cancel/").status_code == 403
    response = as_user("owner").post(f"/api/v1/batches/{batch_id}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert Run.objects.get(batch_item__batch_id=batch_id).status == "cancelled"


def test_a_problem_in_a_batch_cannot_be_deleted(as_user, problem, builtin):
    as_user("owner").post("/api/v1/batches/", {"problems": [problem.pk], "endpoint": builtin}, format="json")
    response = as_user("owner").delete(f"/api/v1/problems/{problem.pk}/")
    assert response.status_code == 409 and response.json()["error"]["code"] == "in_use"
    assert Problem.objects.filter(pk=problem.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_another_users_writes_proceed_while_a_slow_batch_is_checked_on_postgres(owner, member, builtin_endpoint):
    from django.db import connection

    from tests.apps.api.batch_lock import scenario

    if connection.vendor != "postgresql":
        pytest.skip("needs DATABASE_URL (Postgres); the SQLite case runs in its own process below")
    result = scenario(owner, member, builtin_endpoint.name)
    assert result["checked_in_transaction"] == [False, False], "a sandbox check ran inside a transaction"
    assert result["write_status"] == 201 and result["write_seconds"] < 10 and result["batch_status"] == 201


def test_another_users_writes_proceed_while_a_slow_batch_is_checked_on_sqlite(tmp_path):
    """The embedded default: SQLite takes its write lock at BEGIN, so a check inside a transaction would stop
    every other user's writes (they failed with "database is locked" after the timeout)."""
    import os
    import subprocess
    import sys

    from tests.processes import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(SQLITE_PATH=str(tmp_path / "studio.sqlite3"), DJANGO_SETTINGS_MODULE="studio.settings")
    done = subprocess.run([sys.executable, "-m", "tests.apps.api.batch_lock", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["vendor"] == "sqlite" and result["write_status"] == 201 and result["write_seconds"] < 5
    assert result["checked_in_transaction"] == [False, False] and result["batch_status"] == 201


def test_it_caps_the_number_of_new_sources_with_a_clear_400(as_user, builtin, settings):
    settings.KSTUDIO_BATCH_MAX_SOURCES = 2
    sources = [{"name": f"p{i}.py", "source": PROBLEM.read_text()} for i in range(3)]
    response = as_user("owner").post("/api/v1/batches/", {"sources": sources, "endpoint": builtin}, format="json")
    error = response.json()["error"]
    assert response.status_code == 400 and "at most 2 new sources, not 3" in str(error["fields"]["sources"])
    assert not Problem.objects.exists() and not Batch.objects.exists()
