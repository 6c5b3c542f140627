""""Profile this candidate" (issue 24): from a candidate's page or the API, a new evaluation of its source with the
profiler on, in a run of the requester's own; its verdict carries the profile table, and it keeps nothing in the
library (the candidate lives in its own run)."""
from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.kernels.models import Kernel
from apps.runs.models import Run
from apps.runs.services import start_evaluation
from tests.apps.cast import GOOD_CANDIDATE
from tests.apps.runs.drive import drive

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_profiling_a_candidate_evaluates_it_again_with_the_profiler_and_keeps_nothing_new(client, owner, problem, fast_eval):
    evaluated = drive(start_evaluation(owner, problem, GOOD_CANDIDATE.read_text()))
    assert evaluated.status == Run.Status.FINISHED and Kernel.objects.count() == 1, evaluated.message
    client.force_login(owner)
    page = client.get(f"/runs/{evaluated.pk}/candidates/1/").content.decode()
    assert 'id="no-profile"' in page and 'id="profile-button"' in page
    response = client.post(f"/runs/{evaluated.pk}/candidates/1/profile/")
    run = Run.objects.latest("pk")
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url() and run.pk != evaluated.pk
    assert run.config["profile"] is True and run.config["profile_of"] == {"run": evaluated.pk, "turn": 1}
    run = drive(run)
    assert run.status == Run.Status.FINISHED and run.message.startswith(f"Profiled candidate 1 of run #{evaluated.pk}"), run.message
    verdict = run.candidates.get().stored_verdict
    assert verdict.accepted and verdict.profile and verdict.profile["tool"].startswith("torch.profiler"), verdict.profile
    assert Kernel.objects.count() == 1 and not run.events.filter(kind__in=["kernel_saved", "kernel_not_kept"]).exists()
    shown = client.get(f"/runs/{run.pk}/candidates/1/").content.decode()
    assert 'id="profile-table"' in shown and 'id="profile-button"' not in shown


def test_anyone_who_sees_the_candidate_may_profile_it_into_a_private_run_of_their_own(client, owner, member, problem):
    evaluated = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    client.force_login(member)
    assert client.post(f"/runs/{evaluated.pk}/candidates/1/profile/").status_code == 404  # not visible to them
    Run.objects.filter(pk=evaluated.pk).update(shared=True)
    assert client.post(f"/runs/{evaluated.pk}/candidates/1/profile/").status_code == 302
    mine = Run.objects.latest("pk")
    assert mine.owner == member and not mine.shared and mine.candidates.get().source == GOOD_CANDIDATE.read_text()
    assert client.post(f"/runs/{evaluated.pk}/candidates/7/profile/").status_code == 404


def test_the_api_profiles_a_candidate_by_turn_and_says_which_turns_exist(owner, stranger, problem):
    evaluated = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    response = api(owner).post(f"/api/v1/runs/{evaluated.pk}/profile/", {"turn": 1}, format="json")
    assert response.status_code == 201 and Run.objects.get(pk=response.json()["id"]).config["profile_of"]["turn"] == 1
    missing = api(owner).post(f"/api/v1/runs/{evaluated.pk}/profile/", {"turn": 9}, format="json")
    assert missing.status_code == 404 and "its candidates are turns [1]" in missing.json()["error"]["message"]
    assert api(owner).post(f"/api/v1/runs/{evaluated.pk}/profile/", {"turn": "x"}, format="json").status_code == 400
    assert api(stranger).post(f"/api/v1/runs/{evaluated.pk}/profile/", {"turn": 1}, format="json").status_code == 404
