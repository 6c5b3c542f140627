"""The run, candidate and diff pages (apps/runs/views.py), rendered by Django against the real database."""
from __future__ import annotations

import pytest

from tests.apps.runs.pages import finished_run  # noqa: F401

pytestmark = pytest.mark.django_db


def test_it_shows_the_verdict_panel_with_flags_in_words_and_the_timing_spread(client, owner, finished_run):
    client.force_login(owner)
    page = client.get(finished_run["run"].get_absolute_url()).content.decode()
    assert "noisy_timing</code>: The speedup" in page and "not a headline" in page
    assert 'id="timing-spread"' in page and "40.0%" in page  # (0.65 - 0.45) / 0.5
    assert "max abs error 6e-07" in page  # the largest of the three trials
    assert 'id="profile-table"' in page and "silu_bias" in page
    assert "No roofline ceilings were measured for x86_64" in page
    assert "0.93 of the harness's null batch taken off the candidate's time" in page  # timing.null_scale below 1
    assert page.count('href="/runs/%d/candidates/' % finished_run["run"].pk) == 2


def test_it_marks_build_errors_on_the_candidate_lines(client, owner, finished_run):
    client.force_login(owner)
    response = client.get(f"/runs/{finished_run['run'].pk}/candidates/1/")
    markers = response.context["markers"]
    assert [(m["line"], m["col"]) for m in markers] == [(12, 5), (13, 45)]
    assert 'data-goto-line="12"' in response.content.decode()


def test_it_diffs_two_candidates_or_the_reference_and_explains_a_bad_choice(client, owner, finished_run):
    client.force_login(owner)
    run = finished_run["run"]
    ok = client.get(f"/runs/{run.pk}/diff/?a=1&b=2")
    assert ok.status_code == 200 and ok.context["left"][0].startswith("candidate 1") and "ModelNew" in ok.context["right"][1]
    assert client.get(f"/runs/{run.pk}/diff/").context["left"][0].startswith("the reference module")
    bad = client.get(f"/runs/{run.pk}/diff/?a=9&b=2")
    assert bad.status_code == 400 and bad.context["error"].startswith("No candidate '9' in run")
    assert "the turns 1, 2" in bad.context["error"] and 'id="diff-error"' in bad.content.decode()


def test_it_hides_candidates_and_diffs_of_a_private_run_from_a_stranger(client, stranger, finished_run):
    client.force_login(stranger)
    run = finished_run["run"]
    assert client.get(f"/runs/{run.pk}/candidates/1/").status_code == 404
    assert client.get(f"/runs/{run.pk}/diff/?a=1&b=2").status_code == 404


def test_tokens_used_are_shown_only_where_a_language_model_spoke(client, owner, finished_run):
    run = finished_run["run"]
    client.force_login(owner)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="tokens-used"' not in page and 'id="no-model"' in page  # a scripted policy speaks no tokens
    run.config = {**run.config, "policy": "openai:vllm"}
    run.save(update_fields=["config"])
    assert 'id="tokens-used"' in client.get(run.get_absolute_url()).content.decode()


def test_the_agent_form_offers_the_device_and_shows_the_default_budgets(client, owner, problem, settings):
    from apps.endpoints.models import ModelEndpoint

    ModelEndpoint.objects.get_or_create(kind="builtin", defaults={"name": "built-in"})
    settings.KSTUDIO_AGENT_MAX_TURNS = 7
    client.force_login(owner)
    page = client.get(problem.get_absolute_url()).content.decode()
    assert 'name="device"' in page and '<option value="cuda">' in page
    assert 'name="turns" value="7"' in page and f'name="tokens" value="{settings.KSTUDIO_AGENT_MAX_TOKENS}"' in page


def test_an_agent_run_started_from_the_page_runs_on_the_chosen_device(client, owner, problem):
    from apps.endpoints.models import ModelEndpoint
    from apps.runs.models import Run

    endpoint, _ = ModelEndpoint.objects.get_or_create(kind="builtin", defaults={"name": "built-in"})
    client.force_login(owner)
    response = client.post(f"/runs/optimize/{problem.pk}/", {"endpoint": endpoint.pk, "device": "cuda", "turns": 2})
    assert response.status_code == 302 and Run.objects.get().config["device"] == "cuda"
