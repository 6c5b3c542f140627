"""The training pages and the admin's launch form, through the test client: staff only, the form's errors on the
page, a launch that lands on the run's page."""
from __future__ import annotations

import pytest
from django.urls import reverse

from apps.training.models import TrainingMetric, TrainingRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="admin-pass-123")


@pytest.fixture
def trainer(django_user_model):
    """Staff with the training-run permissions the admin asks for (view, and change to cancel)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("trainer", password="trainer-pass-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_trainingrun", "change_trainingrun"]))
    return user


@pytest.fixture
def run(admin_user):
    return TrainingRun.objects.create(owner=admin_user, config={"stages": ["grpo_single", "rft"]},
                                      status=TrainingRun.Status.RUNNING, log_tail="[pipeline] stage 1/2: grpo_single\n")


def test_it_shows_training_to_staff_with_the_permission_only(client, member, trainer, run) -> None:
    client.force_login(member)
    for url in (reverse("training:list"), run.get_absolute_url(), reverse("training:status", args=[run.pk])):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url
    assert "Training</a>" not in client.get(reverse("problems:list")).content.decode()
    client.force_login(trainer)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="loss-chart"' in page and 'id="reward-chart"' in page and "grpo_single → rft" in page
    assert "chart.umd.min.js" in page and 'id="cancel-button"' in page
    assert "Training</a>" in client.get(reverse("problems:list")).content.decode()


def test_it_serves_the_polled_status_and_refuses_a_bad_cursor(client, trainer, run) -> None:
    TrainingMetric.objects.create(run=run, stage="grpo_single", step=1, loss=0.1, reward=-1.0, logged_at=1.0)
    client.force_login(trainer)
    url = reverse("training:status", args=[run.pk])
    data = client.get(url).json()
    assert data["status"] == "running" and data["metrics"][0]["reward"] == -1.0 and "stage 1/2" in data["log"]
    response = client.get(url + "?after=x")
    assert response.status_code == 400 and "whole number" in response.json()["error"]


def test_it_cancels_from_the_page(client, trainer, run) -> None:
    client.force_login(trainer)
    assert client.get(reverse("training:cancel", args=[run.pk])).status_code == 405
    response = client.post(reverse("training:cancel", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.CANCELLING


def test_staff_without_the_training_permission_are_refused_the_pages_as_by_the_admin(client, staff, run) -> None:
    from django.contrib.auth.models import Permission

    client.force_login(staff)
    assert client.get(reverse("admin:training_trainingrun_changelist")).status_code == 403
    for url in (reverse("training:list"), run.get_absolute_url(), reverse("training:status", args=[run.pk])):
        assert client.get(url).status_code == 403, url
    assert client.post(reverse("training:cancel", args=[run.pk])).status_code == 403
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.RUNNING
    assert "Training</a>" not in client.get(reverse("problems:list")).content.decode()
    # The view permission alone shows the pages but not the cancel button, and cancel stays refused.
    staff.user_permissions.add(Permission.objects.get(codename="view_trainingrun"))
    page = client.get(run.get_absolute_url())
    assert page.status_code == 200 and 'id="cancel-button"' not in page.content.decode()
    assert client.post(reverse("training:cancel", args=[run.pk])).status_code == 403
    assert "Training</a>" in client.get(reverse("problems:list")).content.decode()


def test_it_cancels_from_the_admin_list(client, admin_user, run) -> None:
    client.force_login(admin_user)
    response = client.post(reverse("admin:training_trainingrun_changelist"),
                           {"action": "cancel_runs", "_selected_action": [run.pk]}, follow=True)
    assert "Asked 1 run(s) to stop" in response.content.decode()
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.CANCELLING


def test_the_admin_launch_form_shows_what_to_fix(client, admin_user, tmp_path) -> None:
    client.force_login(admin_user)
    url = reverse("admin:training_trainingrun_add")
    page = client.get(url).content.decode()
    assert 'id="launch-form"' in page and "tiny-cpu" in page and "grpo_multi" in page
    response = client.post(url, {"preset": "tiny-cpu", "base_model": str(tmp_path), "num_processes": "1",
                                 "max_problems": "10"})
    page = response.content.decode()
    assert response.status_code == 200 and "Choose at least one stage to run." in page and "has no config.json" in page
    assert not TrainingRun.objects.exists()


def test_the_admin_launch_form_queues_a_run_and_opens_its_page(client, admin_user, tiny_checkpoint, problem,
                                                              django_capture_on_commit_callbacks, monkeypatch) -> None:
    from apps.training import tasks

    sent = []
    monkeypatch.setattr(tasks.run_training, "apply_async", lambda args, **kw: sent.append(args) or _Result())
    client.force_login(admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:training_trainingrun_add"), {
            "name": "warm-up", "preset": "tiny-cpu", "stages": ["grpo_single"], "base_model": str(tiny_checkpoint),
            "num_processes": "1", "max_steps": "2", "max_problems": "10"})
    run = TrainingRun.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert sent == [(run.pk,)] and run.owner == admin_user and run.config["grpo_single"]["max_steps"] == 2


class _Result:
    id = "task-id"
