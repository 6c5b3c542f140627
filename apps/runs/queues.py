"""Queueing a run's steps (DESIGN §6): which queue serves each stage, and sending the step there once the
transaction that asked for it commits.

Steps are sent by their task's name, which apps/runs/tasks.py registers: whoever queues a step (a web process
starting a run) never imports the code that runs it (the evaluation engine, torch)."""
from __future__ import annotations

from celery import current_app
from django.db import transaction

from apps.runs.models import Run

RUN_STEP = "apps.runs.tasks.run_step"

# Compiling on CPU workers, evaluating on GPU workers, model turns on the agent queue.
QUEUES = {Run.Stage.BUILD: "build", Run.Stage.EVALUATE: "gpu", Run.Stage.THINK: "agent", Run.Stage.ACT: "gpu"}


def enqueue(run_id: int, stage: str) -> None:
    current_app.send_task(RUN_STEP, (run_id, stage), queue=QUEUES[Run.Stage(stage)])


def schedule(run_id: int, stage: str) -> None:
    """Enqueue the step once the current transaction commits (a task must find what it was sent for)."""
    transaction.on_commit(lambda: enqueue(run_id, stage))
