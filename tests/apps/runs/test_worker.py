"""A real Celery worker process runs the run; a worker killed with SIGKILL mid-run loses nothing.

Needs Postgres and Redis (a worker in another process must see the test database and the broker):
`make test` points DATABASE_URL and REDIS_URL at the local services."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from apps.kernels.models import Kernel
from apps.runs.models import Run
from apps.runs.services import start_evaluation
from tests.apps.cast import GOOD_CANDIDATE

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def worker_env(fast_eval):
    if connection.vendor != "postgresql" or settings.EMBEDDED:
        pytest.skip("needs DATABASE_URL (Postgres) and REDIS_URL (make test sets both)")
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # no messages left over from an earlier session
    db = connection.settings_dict
    env = {**os.environ,
           "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
           "KSTUDIO_DEVICE": "cpu", "KSTUDIO_COMPILE_BASELINE": "false", "KSTUDIO_EVAL_ITERATIONS": "10",
           "KSTUDIO_STEP_LEASE_SECONDS": "4", "CELERY_VISIBILITY_TIMEOUT": "15"}
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        # solo pool: the step runs in the worker process itself, so one SIGKILL of its group kills it mid-step.
        proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "studio", "worker", "-Q", "build,gpu", "--pool=solo",
                                 "-l", "info", "-n", f"test{len(started)}@%h"], cwd=ROOT, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait(run: Run, until, seconds: float) -> Run:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if until(run):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run.pk} stuck: {run.status} at {run.stage}; events "
                         f"{list(run.events.values_list('seq', 'kind'))}")


def _contiguous(run: Run) -> bool:
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    return seqs == list(range(1, len(seqs) + 1)) and seqs[-1] == run.last_seq


def test_it_runs_an_evaluation_in_a_real_worker_process(worker_env, owner, problem):
    worker_env()
    run = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    run = _wait(run, lambda r: r.is_terminal, 180)
    assert run.status == Run.Status.FINISHED and "Accepted" in run.message, run.message
    assert Kernel.objects.filter(candidate__run=run).exists() and _contiguous(run)


def test_it_resumes_a_run_after_its_worker_is_killed_mid_step(worker_env, owner, problem):
    first = worker_env()
    run = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    _wait(run, lambda r: r.events.filter(kind="step_started", payload__stage="evaluate").exists(), 180)
    os.killpg(first.pid, signal.SIGKILL)  # the worker and its sandbox, mid-evaluation
    first.wait()
    run.refresh_from_db()
    assert not run.is_terminal and run.step_token  # the dead worker's claim is still on the run

    worker_env()
    run = _wait(run, lambda r: r.is_terminal, 240)
    assert run.status == Run.Status.FINISHED and "Accepted" in run.message, run.message
    assert _contiguous(run)
    evaluate_steps = run.events.filter(kind="step_started", payload__stage="evaluate")
    assert evaluate_steps.count() >= 2 and evaluate_steps.last().payload["resumed"] is True
    assert run.events.filter(kind="run_finished").count() == 1 and Kernel.objects.filter(candidate__run=run).count() == 1
