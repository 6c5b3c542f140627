"""One training run on a train worker, top to bottom: claim it, export its data, write its config, run the
trainer (trainer.launch.command) as a child process group, copy its metrics and log into the database while
it runs, stop it when an admin cancels, and register the checkpoint as a model endpoint when it succeeds.

OUT_DIR (settings.KSTUDIO_TRAINING_DIR/run-<id>) holds data/, config.yaml, train.log and what the trainer
writes: metrics.jsonl, stages/, final/, result.json."""
from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.endpoints.models import ModelEndpoint
from apps.training import dataset, supervisor
from apps.training.models import TrainingMetric, TrainingRun

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # how often the database learns of new metrics and log lines, and the run of a cancel
LOG_TAIL_CHARS = 20_000


def output_dir(run_id: int) -> Path:
    return Path(settings.KSTUDIO_TRAINING_DIR) / f"run-{run_id}"


def execute(run_id: int, task_id: str = "", host: str = "") -> str:
    """Run the training run to its end; returns its final status. Does nothing to a run that is no longer
    queued (cancelled before it started, or a message delivered twice)."""
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run_id)
        if run.status != TrainingRun.Status.QUEUED:
            logger.info("training %s is %s, not queued: nothing to do", run_id, run.status)
            return run.status
        run.status, run.started_at, run.worker_host = TrainingRun.Status.RUNNING, timezone.now(), host
        run.celery_task_id = task_id or run.celery_task_id
        run.output_dir = str(output_dir(run_id))
        run.save(update_fields=["status", "started_at", "worker_host", "celery_task_id", "output_dir"])
    out = Path(run.output_dir)
    try:
        argv = _prepare(run, out)
    except (dataset.TrainingDataError, ValueError, OSError) as exc:
        return _finish(run_id, TrainingRun.Status.FAILED, error=f"Preparing the run failed: {exc}")
    proc = supervisor.start(argv, out / "train.log", cwd=settings.BASE_DIR, env=_trainer_env())
    TrainingRun.objects.filter(pk=run_id).update(pid=proc.pid)
    metrics, log = supervisor.LineTail(out / "metrics.jsonl"), supervisor.LineTail(out / "train.log")
    killed = False
    try:
        while True:
            code = proc.poll()
            _copy_progress(run_id, metrics, log)  # after poll(): once it has exited, this read gets its last lines
            if code is not None:
                break
            if not killed and TrainingRun.objects.filter(pk=run_id, status=TrainingRun.Status.CANCELLING).exists():
                supervisor.kill_group(proc)
                killed = True
                continue
            time.sleep(POLL_SECONDS)
    except BaseException as exc:  # our bug or a lost database: no trainer may outlive its supervisor
        supervisor.kill_group(proc, grace_seconds=2)
        _finish(run_id, TrainingRun.Status.FAILED, error=f"The train worker stopped supervising the run: {exc!r}")
        raise
    return _conclude(run_id, out, code, killed)


def _prepare(run: TrainingRun, out: Path) -> list[str]:
    """Write DATA_DIR and config.yaml; the trainer's argv. The trainer's own imports stay out of the web
    process: only the worker reaches here."""
    from trainer.config import PipelineConfig
    from trainer.launch import command

    config = PipelineConfig.from_dict(run.config)  # ConfigError is a ValueError
    out.mkdir(parents=True, exist_ok=True)
    device = settings.KSTUDIO_DEVICE if config.device == "auto" else config.device
    summary = dataset.write(dataset.DataFilters(**run.data_filters), config.stages, device, out / "data")
    TrainingRun.objects.filter(pk=run.pk).update(data_summary=summary, log_tail=(
        f"[studio] exported {summary['trajectories']} trajectories and {summary['problems']} problems to {out / 'data'}\n"))
    config.to_yaml(out / "config.yaml")
    return command(out / "config.yaml", out / "data", out, num_processes=run.num_processes)


def _trainer_env() -> dict[str, str]:
    # Checkpoints are local directories: the trainer must never reach the Hub (it sets the same itself).
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _copy_progress(run_id: int, metrics: supervisor.LineTail, log: supervisor.LineTail) -> None:
    rows = [row for row in map(supervisor.parse_metric, metrics.read()) if row is not None]
    if rows:
        TrainingMetric.objects.bulk_create([
            TrainingMetric(run_id=run_id, stage=r["stage"], step=r["step"], loss=r["loss"], reward=r["reward"],
                           logged_at=r["time"], values=r["values"]) for r in rows])
    lines = log.read()
    if lines:
        with transaction.atomic():
            run = TrainingRun.objects.select_for_update().only("log_tail").get(pk=run_id)
            run.log_tail = supervisor.tail_text(run.log_tail, lines, LOG_TAIL_CHARS)
            run.save(update_fields=["log_tail"])


def _conclude(run_id: int, out: Path, code: int, killed: bool) -> str:
    result = _read_result(out)
    if killed:
        return _finish(run_id, TrainingRun.Status.CANCELLED, error="Cancelled by an admin.", result=result)
    if code == 0 and result.get("status") == "succeeded":
        endpoint = register_endpoint(run_id, Path(result.get("checkpoint") or out / "final"))
        return _finish(run_id, TrainingRun.Status.SUCCEEDED, result=result, endpoint=endpoint)
    error = result.get("error") or f"The trainer exited with status {code} without saying why; see the log."
    return _finish(run_id, TrainingRun.Status.FAILED, error=error, result=result)


def _read_result(out: Path) -> dict[str, Any]:
    try:
        result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):  # killed or crashed before it wrote one
        return {}
    return result if isinstance(result, dict) else {}


def register_endpoint(run_id: int, checkpoint: Path) -> ModelEndpoint:
    """The trained policy as a `transformers` endpoint the agent workers load (agent/loop/policies/transformers_local.py),
    registered disabled: every enabled endpoint is offered to every user, and a fresh checkpoint (a tiny test one,
    a half-trained one) is not a model to offer until an admin has tried it and enables it."""
    run = TrainingRun.objects.get(pk=run_id)
    name = f"trained: {run}"[:100]
    endpoint, _ = ModelEndpoint.objects.update_or_create(name=name, defaults={
        "kind": ModelEndpoint.Kind.TRANSFORMERS, "model": str(checkpoint), "enabled": False,
        "notes": f"Checkpoint of training run {run.pk} (stages: {', '.join(run.stages)}). Disabled until an admin "
                 "enables it: then every user may pick it."})
    return endpoint


def _finish(run_id: int, status: str, error: str = "", result: dict[str, Any] | None = None,
            endpoint: ModelEndpoint | None = None) -> str:
    TrainingRun.objects.filter(pk=run_id).update(status=status, error=error, result=result, endpoint=endpoint,
                                                 finished_at=timezone.now())
    logger.info("training %s %s%s", run_id, status, f": {error}" if error else "")
    return status
