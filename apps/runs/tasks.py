"""Celery tasks: thin. They take ids, call apps/runs/steps.py, and retry when another worker holds a
fresh claim. Late acks plus reject-on-worker-lost mean a worker killed mid-step gives its message back.
Steps are queued by apps/runs/queues.py, under the name registered here."""
from __future__ import annotations

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.db import InterfaceError, OperationalError

from apps.runs import steps
from apps.runs.engine import close_evaluator
from apps.runs.queues import RUN_STEP
from apps.runs.services import resume_unfinished_runs as resume


# A step that cannot reach the database (Postgres restarting) is retried with backoff instead of lost.
@shared_task(name=RUN_STEP, bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=2, retry_backoff_max=30)
def run_step(self, run_id: int, stage: str) -> None:
    outcome = steps.execute(run_id, stage)
    if outcome.retry_in is not None:
        raise self.retry(countdown=outcome.retry_in)


@shared_task(acks_late=True)
def resume_unfinished_runs() -> int:
    return resume()


@worker_ready.connect
def _resume_on_start(sender: object = None, **kwargs: object) -> None:
    # Runs a dead worker left claimed resume as soon as a worker is back (their claims expire first).
    resume()


@worker_shutdown.connect
def _close_sandbox(sender: object = None, **kwargs: object) -> None:
    close_evaluator()
