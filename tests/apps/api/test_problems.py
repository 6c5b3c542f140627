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
    # An API client has no editor: the message says what is wrong itself, never "errors marked in the code".
    assert "marked in the code" not in error["message"] and "no class `Model`" in error["message"]
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


def _members_work_on(problem, member):
    """A member's finished run with an accepted candidate and its kernel, on someone else's shared problem."""
    from django.utils import timezone

    from apps.kernels.models import Kernel
    from apps.runs.models import Candidate

    run = Run.objects.create(problem=problem, owner=member, status=Run.Status.FINISHED)
    candidate = Candidate.objects.create(run=run, turn=1, source="class ModelNew: pass\n", source_hash="h",
                                         verdict={"status": "accepted"})
    kernel = Kernel.objects.create(candidate=candidate, problem=problem, owner=member, name="k", source=candidate.source,
                                   source_hash="h", problem_hash=problem.source_hash, backend="cpp", device="cpu",
                                   produced_by=member, policy="user", verified_at=timezone.now())
    return run, kernel


def test_deleting_a_shared_problem_is_refused_while_other_users_have_work_on_it(as_user, made, member):
    from apps.kernels.models import Kernel

    problem = made["problem"]
    Problem.objects.filter(pk=problem.pk).update(shared=True)
    run, kernel = _members_work_on(problem, member)
    response = as_user("owner").delete(f"/api/v1/problems/{problem.pk}/")
    error = response.json()["error"]
    assert response.status_code == 409 and error["code"] == "in_use"
    assert "1 run(s) and 1 kernel(s)" in error["message"] and "Nothing was deleted" in error["message"]
    assert Problem.objects.filter(pk=problem.pk).exists() and Run.objects.count() == 2 and Kernel.objects.count() == 2
    assert as_user("member").get(f"/api/v1/kernels/{kernel.pk}/").status_code == 200


def test_deleting_a_user_never_deletes_other_users_runs_on_their_shared_problem(problem, member, owner):
    from django.db.models import RestrictedError

    Problem.objects.filter(pk=problem.pk).update(shared=True)
    Run.objects.create(problem=problem, owner=owner, status=Run.Status.FINISHED)
    theirs = Run.objects.create(problem=problem, owner=member, status=Run.Status.FINISHED)
    with pytest.raises(RestrictedError):
        owner.delete()
    assert Run.objects.filter(pk=theirs.pk).exists() and Problem.objects.filter(pk=problem.pk).exists()
    theirs.delete()
    owner.delete()  # once nobody else depends on it, the owner goes with all of theirs
    assert not Problem.objects.exists() and not Run.objects.exists()
