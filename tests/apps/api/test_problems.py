import pytest

from apps.problems.models import Problem
from apps.runs.models import Run
from tests.apps.cast import PROBLEM

pytestmark = pytest.mark.django_db


def test_it_creates_a_problem_from_source_after_checking_it(as_user, owner):
    response = as_user("owner").post("/api/v1/problems/", {"name": "silu.py", "source": PROBLEM.read_text()})
    assert response.status_code == 201, response.json()
    body = response.json()
    problem = Problem.objects.get(pk=body["id"])
    assert problem.owner == owner and body["source_hash"] == problem.source_hash and body["owner"] == "owner"
    assert body["validation"]["ok"] is True


def test_it_rejects_a_module_that_is_not_a_problem_with_its_issues(as_user):
    response = as_user("owner").post("/api/v1/problems/", {"name": "bad.py", "source": "import torch\nx = 1\n"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "rejected" and "not a valid problem" in error["message"] and error["issues"]
    assert not Problem.objects.exists()


def test_it_names_the_missing_field(as_user):
    response = as_user("owner").post("/api/v1/problems/", {"name": "x.py"})
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "invalid" and "source" in error["fields"]
    assert "source" in error["message"]


def test_it_lists_and_filters_problems_by_hash_and_name(as_user, problem):
    client = as_user("owner")
    assert client.get(f"/api/v1/problems/?source_hash={problem.source_hash}").json()["count"] == 1
    assert client.get("/api/v1/problems/?source_hash=0000").json()["count"] == 0
    assert client.get("/api/v1/problems/?name=silu").json()["results"][0]["id"] == problem.pk


def test_it_pages_lists(as_user, owner):
    for i in range(3):
        Problem.objects.create(owner=owner, name=f"p{i}", source="x", source_hash=f"{i}")
    page = as_user("owner").get("/api/v1/problems/?page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and "page=2" in page["next"]


def test_the_owner_deletes_a_problem_with_its_runs_and_kernels(as_user, made):
    response = as_user("owner").delete(f"/api/v1/problems/{made['problem'].pk}/")
    assert response.status_code == 204
    assert not Problem.objects.exists() and not Run.objects.exists()
