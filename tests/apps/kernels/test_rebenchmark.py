"""Re-benchmarking a library kernel (issue 24): its owner starts a fresh evaluation of the kernel's source, and the
verdict's timing joins the kernel's measurements whatever it shows; from the page and the API alike."""
from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.kernels.models import Kernel
from apps.runs import verdicts
from apps.runs.models import Candidate, Run
from apps.runs.services import start_evaluation, start_rebenchmark
from tests.apps.cast import GOOD_CANDIDATE
from tests.apps.runs.drive import drive
from tests.apps.runs.pages import VERDICT

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture
def kernel(owner, problem, fast_eval) -> Kernel:
    """A kernel the library keeps from a real evaluation (cpp on the CPU)."""
    run = drive(start_evaluation(owner, problem, GOOD_CANDIDATE.read_text()))
    assert run.status == Run.Status.FINISHED, run.message
    return Kernel.objects.get()


def test_a_rebenchmark_measures_again_and_adds_its_timing_to_the_same_kernel(owner, kernel):
    run = drive(start_rebenchmark(owner, kernel))
    assert run.status == Run.Status.FINISHED and run.config["rebenchmark_of"] == kernel.pk, run.message
    kernel.refresh_from_db()
    assert Kernel.objects.count() == 1  # the same source on the same hardware: one entry, two measurements
    first, second = kernel.measurements
    assert second["run"] == run.pk and second["run"] != first["run"] and second["status"] == "accepted"
    assert second["timing"]["candidate_ms"] > 0 and second["timing"]["speedup_vs_eager"] > 0
    assert "measurement 2 of kernel" in run.events.get(kind="remeasured").payload["message"]


def test_a_rebenchmark_that_fails_now_is_recorded_with_its_status(owner, kernel):
    run = start_rebenchmark(owner, kernel)
    candidate = run.candidates.get()
    candidate.verdict = {**VERDICT, "status": "incorrect", "correct": False, "timing": None,
                         "hardware": kernel.hardware, "device": kernel.device}
    candidate.save()
    verdicts.finish_with_verdict(run, candidate)
    kernel.refresh_from_db()
    assert [m.get("status") for m in kernel.measurements][-1] == "incorrect"
    assert kernel.measurements[-1]["timing"] == {} and "not timed this time (incorrect)" in \
        run.events.get(kind="remeasured").payload["message"]


def test_the_page_shows_every_measurement_and_offers_the_action_to_the_owner_only(client, owner, member, kernel):
    client.force_login(owner)
    page = client.get(f"/kernels/{kernel.pk}/").content.decode()
    assert 'id="rebenchmark"' in page and 'id="measurements"' in page and f"#{kernel.candidate.run_id}" in page
    response = client.post(f"/kernels/{kernel.pk}/rebenchmark/")
    run = Run.objects.latest("pk")
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.config["rebenchmark_of"] == kernel.pk
    Kernel.objects.filter(pk=kernel.pk).update(shared=True)
    client.force_login(member)
    assert 'id="rebenchmark"' not in client.get(f"/kernels/{kernel.pk}/").content.decode()
    refused = client.post(f"/kernels/{kernel.pk}/rebenchmark/")
    assert refused.status_code == 400 and "Only the owner" in refused.content.decode()


def test_the_api_starts_it_for_the_owner_and_refuses_everyone_else(owner, member, stranger, kernel, settings):
    response = api(owner).post(f"/api/v1/kernels/{kernel.pk}/rebenchmark/")
    assert response.status_code == 201 and Run.objects.get(pk=response.json()["id"]).config["rebenchmark_of"] == kernel.pk
    assert api(owner).get(f"/api/v1/kernels/{kernel.pk}/").json()["measurements"][0]["status"] == "accepted"
    assert api(stranger).post(f"/api/v1/kernels/{kernel.pk}/rebenchmark/").status_code == 404  # not visible
    Kernel.objects.filter(pk=kernel.pk).update(shared=True)
    assert api(member).post(f"/api/v1/kernels/{kernel.pk}/rebenchmark/").status_code == 403  # visible, not theirs
    settings.KSTUDIO_DEVICE = "cuda"
    refused = api(owner).post(f"/api/v1/kernels/{kernel.pk}/rebenchmark/")
    assert refused.status_code == 400 and "would not be comparable" in refused.json()["error"]["message"]
    assert Candidate.objects.filter(run__config__rebenchmark_of=kernel.pk).count() == 1
