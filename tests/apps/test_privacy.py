"""Everything a user makes is private to them and staff unless shared: pages, event feeds and downloads.
(The websocket's refusals are in runs/test_consumers.py.)"""
import pytest
from django.utils import timezone

from apps.kernels.models import Kernel
from apps.runs.models import Candidate, Run
from apps.runs.events import append_event
from tests.apps.cast import GOOD_CANDIDATE

pytestmark = pytest.mark.django_db


@pytest.fixture
def made(owner, problem):
    run = Run.objects.create(problem=problem, owner=owner, status=Run.Status.FINISHED)
    append_event(run.pk, "secret", {"x": 1})
    cand = Candidate.objects.create(run=run, turn=1, source=GOOD_CANDIDATE.read_text(), source_hash="h", backend="cpp",
                                    verdict={"status": "accepted"})
    kernel = Kernel.objects.create(candidate=cand, problem=problem, owner=owner, name="k", source=cand.source,
                                   source_hash="h", problem_hash=problem.source_hash, backend="cpp", device="cpu",
                                   produced_by=owner, policy="user", verified_at=timezone.now())
    return {"problem": problem, "run": run, "kernel": kernel}


def _urls(made):
    p, r, k = made["problem"].pk, made["run"].pk, made["kernel"].pk
    return [f"/problems/{p}/", f"/runs/{r}/", f"/runs/{r}/events/", f"/kernels/{k}/", f"/kernels/{k}/download/"]


@pytest.mark.parametrize("who, visible", [("owner", True), ("staff", True), ("stranger", False), ("member", False)])
def test_it_shows_private_things_only_to_their_owner_and_staff(client, made, request, who, visible):
    client.force_login(request.getfixturevalue(who))
    for url in _urls(made):
        assert client.get(url).status_code == (200 if visible else 404), url
    assert (made["problem"].name in client.get("/problems/").content.decode()) == visible
    assert (b"silu_bias" in client.get("/kernels/").content) == visible


def test_it_shows_shared_things_to_every_user(client, made, member):
    for obj in made.values():
        type(obj).objects.filter(pk=obj.pk).update(shared=True)
    client.force_login(member)
    for url in _urls(made):
        assert client.get(url).status_code == 200, url


def test_it_sends_anonymous_visitors_to_the_login_page(client, made):
    for url in _urls(made):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_does_not_let_a_stranger_start_or_cancel_runs_on_private_things(client, made, stranger):
    client.force_login(stranger)
    assert client.post(f"/runs/start/{made['problem'].pk}/", {"source": GOOD_CANDIDATE.read_text()}).status_code == 404
    assert client.post(f"/runs/{made['run'].pk}/cancel/").status_code == 404
    assert Run.objects.count() == 1


def test_it_downloads_a_kernel_as_one_module_with_its_provenance(client, made, owner):
    client.force_login(owner)
    response = client.get(f"/kernels/{made['kernel'].pk}/download/")
    text = response.content.decode()
    assert response["Content-Disposition"].endswith('.py"')
    assert "# Kernel Studio kernel" in text and "class ModelNew" in text and made["problem"].source_hash in text
    compile(text, "kernel.py", "exec")  # parses as one module (never executed here)


def test_a_shared_problems_page_lists_only_the_runs_and_kernels_the_viewer_may_see(client, made, member):
    from apps.problems.models import Problem

    Problem.objects.filter(pk=made["problem"].pk).update(shared=True)
    client.force_login(member)
    page = client.get(f"/problems/{made['problem'].pk}/").content.decode()
    assert f"/runs/{made['run'].pk}/" not in page and f"/kernels/{made['kernel'].pk}/" not in page
    assert f"/runs/{made['run'].pk}/" not in client.get("/runs/").content.decode()
    Run.objects.filter(pk=made["run"].pk).update(shared=True)
    assert f"/runs/{made['run'].pk}/" in client.get(f"/problems/{made['problem'].pk}/").content.decode()


def test_a_members_run_on_a_shared_problem_is_theirs_not_the_problem_owners(client, made, member, owner):
    from apps.problems.models import Problem

    Problem.objects.filter(pk=made["problem"].pk).update(shared=True)
    client.force_login(member)
    response = client.post(f"/runs/start/{made['problem'].pk}/", {"source": GOOD_CANDIDATE.read_text()})
    assert response.status_code == 302
    theirs = Run.objects.exclude(pk=made["run"].pk).get()
    assert theirs.owner == member and not theirs.shared
    client.force_login(owner)
    assert client.get(f"/runs/{theirs.pk}/").status_code == 404
    assert client.get(f"/runs/{theirs.pk}/events/").status_code == 404


@pytest.mark.parametrize("who", ["member", "stranger"])
def test_only_the_owner_or_staff_cancel_a_run_even_a_shared_one(client, made, request, who, staff):
    Run.objects.filter(pk=made["run"].pk).update(shared=True, status=Run.Status.RUNNING)
    client.force_login(request.getfixturevalue(who))
    assert client.post(f"/runs/{made['run'].pk}/cancel/").status_code == 404
    assert client.post(f"/runs/optimize/{made['problem'].pk}/", {}).status_code == 404  # the problem is private
    assert Run.objects.get(pk=made["run"].pk).status == Run.Status.RUNNING
    client.force_login(staff)
    assert client.post(f"/runs/{made['run'].pk}/cancel/").status_code == 302
    assert Run.objects.get(pk=made["run"].pk).status == Run.Status.CANCELLED


@pytest.mark.parametrize("who", ["owner", "member", "stranger", None])
def test_the_admin_is_closed_to_users_who_are_not_staff(client, made, request, who):
    if who:
        client.force_login(request.getfixturevalue(who))
    for url in ("/admin/", f"/admin/runs/run/{made['run'].pk}/change/", "/admin/kernels/kernel/",
                "/admin/endpoints/modelendpoint/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), (who, url)


def test_staff_reach_the_admin_pages_their_permissions_allow(client, made, staff, django_user_model):
    client.force_login(staff)  # staff without model permissions: the index, nothing more
    assert client.get("/admin/").status_code == 200
    assert client.get(f"/admin/runs/run/{made['run'].pk}/change/").status_code == 403
    client.force_login(django_user_model.objects.create_superuser("root", password="root-pass-123"))
    assert client.get(f"/admin/runs/run/{made['run'].pk}/change/").status_code == 200


def test_page_forms_refuse_a_post_without_the_csrf_token(made, owner):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    Run.objects.filter(pk=made["run"].pk).update(status=Run.Status.RUNNING)
    assert client.post(f"/runs/{made['run'].pk}/cancel/").status_code == 403
    assert client.post("/accounts/tokens/", {"action": "create"}).status_code == 403
    assert Run.objects.get(pk=made["run"].pk).status == Run.Status.RUNNING
    client.get(f"/runs/{made['run'].pk}/")  # sets the CSRF cookie, as a browser's first visit does
    token = client.cookies["csrftoken"].value
    assert client.post(f"/runs/{made['run'].pk}/cancel/", HTTP_X_CSRFTOKEN=token).status_code == 302
    assert Run.objects.get(pk=made["run"].pk).status == Run.Status.CANCELLED


def test_the_api_under_a_session_cookie_needs_the_csrf_token_and_under_a_token_does_not(made, owner):
    from django.test import Client
    from rest_framework.authtoken.models import Token

    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    Run.objects.filter(pk=made["run"].pk).update(status=Run.Status.RUNNING)
    response = client.post(f"/api/v1/runs/{made['run'].pk}/cancel/")
    error = response.json()["error"]
    assert response.status_code == 403 and error["code"] == "csrf_failed" and "X-CSRFToken" in error["message"]
    assert Run.objects.get(pk=made["run"].pk).status == Run.Status.RUNNING
    # A token is not sent by browsers on their own, so a token request needs no CSRF token.
    key = Token.objects.create(user=owner).key
    response = Client(enforce_csrf_checks=True).post(f"/api/v1/runs/{made['run'].pk}/cancel/",
                                                     HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
