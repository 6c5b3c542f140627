"""Celery task of the `train` queue (studio/settings.py routes it): thin, it takes the run's id.

Acknowledged on receipt, unlike the run steps: a training run holds its worker for hours, longer than the
broker's visibility timeout, and a late-acked message would be handed to a second worker while the first still
trains. A worker that dies mid-run leaves the run `running`; an admin cancels it and launches it again."""
from __future__ import annotations

import socket

from celery import shared_task

from apps.training import execution


@shared_task(bind=True, acks_late=False)
def run_training(self, run_id: int) -> str:
    return execution.execute(run_id, task_id=self.request.id or "", host=self.request.hostname or socket.gethostname())
