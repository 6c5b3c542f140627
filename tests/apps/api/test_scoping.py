"""Every resource answers its owner and staff, hides private things from others (404, not 403), shows shared
things to every user, and lets only the owner change them."""
import pytest

from apps.problems.models import Problem
from apps.runs.models import Run

pytestmark = pytest.mark.django_db


def _details(made):
    p, r, k = made["problem"].pk, made["run"].pk, made["kernel"].pk
    return [f"/api/v1/problems/{p}/", f"/api/v1/runs/{r}/", f"/api/v1/runs/{r}/events/", f"/api/v1/kernels/{k}/",
            f"/api/v1/kernels/{k}/download/"]


LISTS = ["/api/v1/problems/", "/api/v1/runs/", "/api/v1/kernels/"]


@pytest.mark.parametrize("who, visible", [("owner", True), ("staff", True), ("member", False), ("stranger", False)])
def test_it_shows_private_things_only_to_their_owner_and_staff(as_user, made, who, visible):
    client = as_user(who)
    for url in _details(made):
        response = client.get(url)
        assert response.status_code == (200 if visible else 404), url
        if not visible:
            assert response.json()["error"]["code"] == "not_found"
    for url in LISTS:
        assert client.get(url).json()["count"] == (1 if visible else 0), url


def test_it_shows_shared_things_to_every_user(as_user, made):
    for obj in made.values():
        type(obj).objects.filter(pk=obj.pk).update(shared=True)
    client = as_user("member")
    for url in _details(made):
        assert client.get(url).status_code == 200, url
    assert all(client.get(url).json()["count"] == 1 for url in LISTS)


def test_it_refuses_anonymous_requests_with_the_error_format(as_user, made):
    for url in [*LISTS, *_details(made), "/api/v1/batches/", "/api/v1/endpoints/"]:
        response = as_user(None).get(url)
        assert response.status_code == 401, url
        assert response.json()["error"]["code"] == "not_authenticated"
        assert "Token" in response.json()["error"]["message"]


def test_it_refuses_a_wrong_token(made):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = client.get("/api/v1/problems/")
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"


def test_a_member_can_see_a_shared_run_but_not_cancel_it_or_delete_its_problem(as_user, made):
    Problem.objects.filter(pk=made["problem"].pk).update(shared=True)
    Run.objects.filter(pk=made["run"].pk).update(shared=True, status=Run.Status.RUNNING)
    client = as_user("member")
    response = client.post(f"/api/v1/runs/{made['run'].pk}/cancel/")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    assert client.delete(f"/api/v1/problems/{made['problem'].pk}/").status_code == 403
    assert Run.objects.get(pk=made["run"].pk).status == Run.Status.RUNNING and Problem.objects.exists()


def test_a_stranger_cannot_start_a_run_on_a_private_problem(as_user, made):
    from tests.apps.cast import GOOD_CANDIDATE

    response = as_user("stranger").post("/api/v1/runs/", {"problem": made["problem"].pk, "kind": "evaluate",
                                                          "source": GOOD_CANDIDATE.read_text()})
    assert response.status_code == 400
    assert "problem" in response.json()["error"]["fields"]
    assert Run.objects.count() == 1
