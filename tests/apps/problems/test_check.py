"""An upload is imported and run once in a real worker's sandbox before anything is created: the
embedded worker (threads of this process, in-memory broker) without REDIS_URL, a worker process on
Redis with it. A module that crashes or hangs is refused with a clear message and leaves no rows."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from apps.problems.models import Problem
from apps.core.errors import Refused
from apps.problems.services import create_problem
from tests.apps.cast import PROBLEM
from tests.corpus.tiny_problem import FAILING_INPUTS, TEMPLATE

ROOT = Path(__file__).resolve().parents[3]
@pytest.fixture(scope="module")
def check_worker(django_db_setup, django_db_blocker):
    if django_settings.EMBEDDED:
        from studio.celery import app

        worker = app.WorkController(pool_cls="threads", concurrency=1, queues=["build"], hostname="check@localhost",
                                    loglevel="INFO")
        import threading

        threading.Thread(target=worker.start, name="check-worker", daemon=True).start()
        yield
        worker.stop(in_sighandler=False)
        return
    import redis
    from django.db import connection

    redis.Redis.from_url(django_settings.REDIS_URL).flushdb()
    db = connection.settings_dict
    env = {**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
           "KSTUDIO_DEVICE": "cpu"}
    proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "studio", "worker", "-Q", "build", "--pool=solo",
                             "-l", "info", "-n", "check@%h"], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    yield
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def quick(settings):
    settings.KSTUDIO_PROBLEM_CHECK_SECONDS = 5
    return settings


@pytest.mark.django_db
def test_it_creates_a_good_problem_with_what_the_run_learnt(check_worker, owner):
    problem = create_problem(owner, "silu_bias.py", PROBLEM.read_text())
    assert problem.validation["run"]["outputs"] == [{"shape": [1024, 1024], "dtype": "torch.float32"}]


@pytest.mark.django_db
def test_it_refuses_a_module_that_raises_on_import(check_worker, owner, quick):
    source = TEMPLATE.format(body="raise RuntimeError('the weights file is missing')")
    with pytest.raises(Refused) as caught:
        create_problem(owner, "crash.py", source)
    assert "failed" in caught.value.message and "the weights file is missing" in caught.value.message
    assert "upload it again" in caught.value.message and caught.value.source == source
    assert not Problem.objects.exists()


@pytest.mark.django_db
def test_it_refuses_a_get_inputs_that_fails_when_run(check_worker, owner, quick):
    source = FAILING_INPUTS.format(body="")
    with pytest.raises(Refused, match="mat1 and mat2|size"):
        create_problem(owner, "bad_inputs.py", source)
    assert not Problem.objects.exists()


@pytest.mark.django_db
def test_it_refuses_a_module_that_hangs_on_import(check_worker, owner, quick):
    started = time.monotonic()
    with pytest.raises(Refused, match="wall-clock limit") as caught:
        create_problem(owner, "hang.py", TEMPLATE.format(body="import time\ntime.sleep(3600)"))
    assert "within 5 s" in caught.value.message and time.monotonic() - started < 30
    assert not Problem.objects.exists()


@pytest.mark.django_db
def test_it_says_so_when_no_worker_answers(owner, quick, monkeypatch):
    from celery.exceptions import TimeoutError as NoAnswer

    from apps.problems.tasks import check_problem

    class Pending:
        def get(self, timeout, **kwargs):
            raise NoAnswer("no answer")

    monkeypatch.setattr(check_problem, "apply_async", lambda *a, **kw: Pending())
    with pytest.raises(Refused, match="no worker answered within 35 s"):
        create_problem(owner, "silu_bias.py", PROBLEM.read_text())
    assert not Problem.objects.exists()
