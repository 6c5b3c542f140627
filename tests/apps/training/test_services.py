"""Launching and cancelling: the run row, the message on the `train` queue, and the cancel states."""
from __future__ import annotations

import json

import pytest
from django.conf import settings

from apps.training import services
from apps.training.dataset import DataFilters
from apps.training.models import TrainingMetric, TrainingRun

pytestmark = pytest.mark.django_db


def _config(checkpoint) -> dict:
    from trainer.config import PipelineConfig

    config = PipelineConfig.from_yaml(settings.BASE_DIR / "trainer" / "presets" / "tiny-cpu.yaml").to_dict()
    return {**config, "base_model": str(checkpoint), "stages": ["rft"]}


def test_it_queues_a_launched_run_on_the_train_queue(staff, tiny_checkpoint, django_capture_on_commit_callbacks) -> None:
    if settings.EMBEDDED:
        pytest.skip("needs REDIS_URL: the test reads the message off the broker's train queue")
    import redis

    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.delete("train")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = services.launch(staff, _config(tiny_checkpoint), DataFilters(only_accepted=True), name="first")
        assert TrainingRun.objects.get(pk=run.pk).status == TrainingRun.Status.QUEUED
        assert broker.llen("train") == 0  # nothing is sent before the run is committed
    assert len(callbacks) == 1
    messages = [json.loads(m) for m in broker.lrange("train", 0, -1)]
    broker.delete("train")
    assert [m["headers"]["task"] for m in messages] == ["apps.training.tasks.run_training"]
    assert messages[0]["headers"]["argsrepr"] == f"({run.pk},)"
    run.refresh_from_db()
    assert run.celery_task_id == messages[0]["headers"]["id"]
    assert run.data_filters["only_accepted"] is True and run.name == "first"


def test_it_cancels_a_queued_run_at_once_and_marks_a_running_one_for_its_worker(staff, tiny_checkpoint) -> None:
    queued = TrainingRun.objects.create(owner=staff, config=_config(tiny_checkpoint))
    assert services.cancel(queued)
    queued.refresh_from_db()
    assert queued.status == TrainingRun.Status.CANCELLED and queued.finished_at is not None
    assert not services.cancel(queued)  # already over

    running = TrainingRun.objects.create(owner=staff, config=_config(tiny_checkpoint), status=TrainingRun.Status.RUNNING)
    assert services.cancel(running)
    running.refresh_from_db()
    assert running.status == TrainingRun.Status.CANCELLING
    # Asked again with no worker confirming (it died): marked cancelled, saying so.
    assert services.cancel(running)
    running.refresh_from_db()
    assert running.status == TrainingRun.Status.CANCELLED and "second request" in running.error


def test_it_reports_the_metrics_after_the_last_one_the_page_has(staff, tiny_checkpoint) -> None:
    run = TrainingRun.objects.create(owner=staff, config=_config(tiny_checkpoint), status=TrainingRun.Status.RUNNING,
                                     log_tail="[rft] step 1/2\n")
    first = TrainingMetric.objects.create(run=run, stage="rft", step=1, loss=2.5, logged_at=1.0)
    TrainingMetric.objects.create(run=run, stage="rft", step=2, loss=2.0, logged_at=2.0)
    payload = services.status_payload(run)
    assert [m["step"] for m in payload["metrics"]] == [1, 2] and payload["log"] == "[rft] step 1/2\n"
    assert payload["terminal"] is False and payload["endpoint"] is None
    assert [m["loss"] for m in services.status_payload(run, after=first.pk)["metrics"]] == [2.0]


def test_a_trained_checkpoint_is_registered_disabled_so_no_user_is_offered_it_until_an_admin_enables_it(staff, tmp_path) -> None:
    from apps.endpoints.models import ModelEndpoint
    from apps.problems.forms import AgentRunForm
    from apps.training.execution import register_endpoint

    run = TrainingRun.objects.create(owner=staff, name="tiny", config={"stages": ["rft"]})
    endpoint = register_endpoint(run.pk, tmp_path / "final")
    assert endpoint.kind == ModelEndpoint.Kind.TRANSFORMERS and not endpoint.enabled
    assert endpoint not in AgentRunForm().fields["endpoint"].queryset
