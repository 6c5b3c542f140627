"""Everything a user makes is private to them and staff unless shared: pages, event feeds and downloads.
(The websocket's refusals are in runs/test_consumers.py.)"""
import pytest
from django.utils import timezone

from apps.kernels.models import Kernel
from apps.runs.models import Candidate, Run
from apps.runs.services import append_event
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
