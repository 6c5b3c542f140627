"""Launching, cancelling and reporting training runs (the admin form and the pages call these)."""
from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.training.dataset import DataFilters
from apps.training.models import TrainingMetric, TrainingRun
from apps.training.tasks import run_training


def launch(user: AbstractBaseUser, config: dict[str, Any], filters: DataFilters, num_processes: int = 1,
           name: str = "") -> TrainingRun:
    """Create a queued run; its task goes to the `train` queue once the run is committed (the worker must
    find it). `config` is a validated PipelineConfig as plain data."""
    run = TrainingRun.objects.create(owner=user, name=name, config=config, data_filters=filters.to_dict(),
                                     num_processes=num_processes)
    transaction.on_commit(lambda: _enqueue(run.pk, run_training))
    return run


def _enqueue(run_id: int, task: Any) -> None:
    result = task.apply_async((run_id,))
    TrainingRun.objects.filter(pk=run_id).update(celery_task_id=result.id or "")


def cancel(run: TrainingRun) -> bool:
    """Stop a run. A queued one is cancelled at once (its task finds it so and does nothing); a running one
    is marked cancelling, and the train worker watching it kills the trainer's process group and marks it
    cancelled; one already cancelling is marked cancelled (its worker died). Returns False when it is over."""
    with transaction.atomic():
        locked = TrainingRun.objects.select_for_update().get(pk=run.pk)
        if locked.status == TrainingRun.Status.QUEUED:
            locked.status, locked.finished_at, locked.error = TrainingRun.Status.CANCELLED, timezone.now(), "Cancelled before it started."
            locked.save(update_fields=["status", "finished_at", "error"])
            return True
        if locked.status == TrainingRun.Status.RUNNING:
            locked.status = TrainingRun.Status.CANCELLING
            locked.save(update_fields=["status"])
            return True
        if locked.status == TrainingRun.Status.CANCELLING:
            # Asked twice: the worker that should stop it is gone (a worker that died mid-run leaves it running).
            locked.status, locked.finished_at = TrainingRun.Status.CANCELLED, timezone.now()
            locked.error = ("Marked cancelled on a second request: its train worker had not confirmed the stop (if "
                            f"the worker on {locked.worker_host or 'its host'} is alive, it still stops the trainer).")
            locked.save(update_fields=["status", "finished_at", "error"])
            return True
    return False


def status_payload(run: TrainingRun, after: int = 0) -> dict[str, Any]:
    """What the run page polls: the state, the log tail, and the metrics rows after id `after`."""
    metrics = [{"id": m.pk, "stage": m.stage, "step": m.step, "loss": m.loss, "reward": m.reward}
               for m in TrainingMetric.objects.filter(run=run, pk__gt=after).order_by("pk")[:5000]]
    endpoint = None
    if run.endpoint_id is not None:
        endpoint = {"name": run.endpoint.name, "url": reverse("admin:endpoints_modelendpoint_change", args=[run.endpoint_id])}
    return {"status": run.status, "terminal": run.is_terminal, "error": run.error, "log": run.log_tail,
            "data": run.data_summary, "metrics": metrics, "endpoint": endpoint,
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None}
