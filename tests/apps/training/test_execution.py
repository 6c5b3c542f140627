"""A training run end to end: the real trainer (`accelerate launch -m trainer run`) on a tiny model, started by
a real Celery worker of the `train` queue; its failure and its cancellation.

Needs Postgres and Redis for the worker (`make test` sets both)."""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from apps.endpoints.models import ModelEndpoint
from apps.training import execution, services
from apps.training.dataset import DataFilters
from apps.training.models import TrainingRun
from tests import processes

pytestmark = pytest.mark.django_db(transaction=True)


def _config(checkpoint: Path, **rft) -> dict:
    from trainer.config import PipelineConfig

    config = PipelineConfig.from_yaml(settings.BASE_DIR / "trainer" / "presets" / "tiny-cpu.yaml").to_dict()
    config["rft"].update({"max_steps": 2, **rft})
    return {**config, "base_model": str(checkpoint), "stages": ["rft"]}


def _wait(run: TrainingRun, until, seconds: float) -> TrainingRun:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if until(run):
            return run
        time.sleep(0.5)
    raise AssertionError(f"training {run.pk} stuck at {run.status}; log:\n{run.log_tail[-3000:]}")


def test_a_train_worker_trains_the_model_and_registers_its_checkpoint(staff, tiny_checkpoint, finished_agent_run,
                                                                     tmp_path) -> None:
    env = processes.studio_env(KSTUDIO_TRAINING_DIR=str(tmp_path / "training"))
    worker = processes.worker(env, "train", queues="train", log=tmp_path / "worker.log")
    try:
        run = services.launch(staff, _config(tiny_checkpoint), DataFilters(only_accepted=True), name="rft on one run")
        run = _wait(run, lambda r: r.is_terminal, 420)
    finally:
        processes.stop([worker])
    assert run.status == TrainingRun.Status.SUCCEEDED, f"{run.error}\n{run.log_tail[-3000:]}"
    out = tmp_path / "training" / f"run-{run.pk}"
    assert run.output_dir == str(out) and run.data_summary == {"trajectories": 1, "problems": 1}
    assert run.celery_task_id and run.pid and run.started_at <= run.finished_at
    # Every step the trainer logged is a row, in order, with its loss.
    steps = list(run.metrics.values_list("stage", "step"))
    assert steps == [("rft", 1), ("rft", 2)]
    assert all(loss is not None and loss > 0 for loss in run.metrics.values_list("loss", flat=True))
    assert "[pipeline] done" in run.log_tail and run.result["status"] == "succeeded"
    # The checkpoint is an endpoint the agent workers can load.
    endpoint = run.endpoint
    assert endpoint.kind == ModelEndpoint.Kind.TRANSFORMERS and not endpoint.enabled  # an admin offers it
    assert endpoint.model == str(out / "final") and endpoint.name == "trained: training {0} (rft on one run)".format(run.pk)
    assert (out / "final" / "config.json").is_file() and (out / "final" / "tokenizer_config.json").is_file()
    endpoint.full_clean()


def test_it_fails_with_the_trainers_own_message(staff, tiny_checkpoint, finished_agent_run, training_dir) -> None:
    # The one trajectory is 1.3x faster than eager: a 5x bar leaves rejection fine-tuning nothing to train on.
    config = _config(tiny_checkpoint)
    config["data"]["min_speedup"] = 5.0
    run = TrainingRun.objects.create(owner=staff, config=config, data_filters=DataFilters().to_dict())
    assert execution.execute(run.pk) == TrainingRun.Status.FAILED
    run.refresh_from_db()
    assert "no trajectory passed rejection fine-tuning's filters" in run.error and "min_speedup" in run.error
    assert run.endpoint is None and run.result["status"] == "failed" and not run.metrics.exists()


def test_it_leaves_a_run_that_is_no_longer_queued_alone(staff, tiny_checkpoint, training_dir) -> None:
    run = TrainingRun.objects.create(owner=staff, config=_config(tiny_checkpoint), status=TrainingRun.Status.CANCELLED)
    assert execution.execute(run.pk) == TrainingRun.Status.CANCELLED
    assert not training_dir.exists()


def test_cancelling_kills_the_trainers_process_group(staff, tiny_checkpoint, finished_agent_run, training_dir,
                                                      monkeypatch) -> None:
    # This test is about process handling, so the trainer is a stand-in: a launcher that starts a child in its group
    # and waits on it, as `accelerate launch` does. The real trainer's runs are the tests above.
    pid_file = training_dir.parent / "child.pid"
    script = (f"import subprocess, sys, pathlib\n"
              f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
              f"pathlib.Path({str(pid_file)!r}).write_text(str(child.pid))\n"
              f"print('launcher up', flush=True)\n"
              f"child.wait()\n")
    monkeypatch.setattr("trainer.launch.command", lambda *args, **kwargs: [sys.executable, "-c", script])
    run = TrainingRun.objects.create(owner=staff, config=_config(tiny_checkpoint), data_filters=DataFilters().to_dict())

    def cancel_when_started() -> None:
        try:
            deadline = time.monotonic() + 60
            while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
                time.sleep(0.1)
            services.cancel(TrainingRun.objects.get(pk=run.pk))
        finally:
            connection.close()

    canceller = threading.Thread(target=cancel_when_started)
    canceller.start()
    try:
        status = execution.execute(run.pk)
    finally:
        canceller.join()
    assert status == TrainingRun.Status.CANCELLED
    run.refresh_from_db()
    assert run.error == "Cancelled by an admin." and run.endpoint is None and "launcher up" in run.log_tail
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while _alive(child):
        assert time.monotonic() < deadline, f"the trainer's child {child} outlived the cancel"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie awaiting init's reaping is dead
    except (ProcessLookupError, FileNotFoundError):
        return False
