"""The studio's own processes for end-to-end tests: daphne and Celery workers on the test database
(Postgres) and Redis, as in production. Each runs in its own session so a test can kill it whole."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def studio_env(**extra: str) -> dict[str, str]:
    """The environment of a studio process that shares this test's database and Redis (flushed, so no
    message of an earlier test is delivered). Skips the test without Postgres and Redis."""
    if connection.vendor != "postgresql" or settings.EMBEDDED:
        pytest.skip("needs DATABASE_URL (Postgres) and REDIS_URL (make test sets both)")
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    db = connection.settings_dict
    return {**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "KSTUDIO_DEVICE": "cpu", "KSTUDIO_COMPILE_BASELINE": "false", "KSTUDIO_EVAL_MIN_ROUNDS": "2", "KSTUDIO_EVAL_MAX_ROUNDS": "3",
            # as the fast_eval fixture (tests/apps/cast.py): a noisy shared box still keeps what was verified
            "KSTUDIO_LIBRARY_KEEP_NOISY": "true", "KSTUDIO_LIBRARY_MIN_SPEEDUP": "0.01", **extra}


def spawn(argv: list[str], env: dict[str, str], log: Path | None = None, interruptible: bool = False) -> subprocess.Popen:
    """`interruptible`: with SIGINT's default disposition, as a process started at a terminal has it (this test
    process may have inherited or set it ignored, and an ignored SIGINT stays ignored across exec)."""
    out = open(log, "wb") if log else subprocess.DEVNULL
    return subprocess.Popen([sys.executable, "-m", *argv], cwd=ROOT, env=env, start_new_session=True,
                            stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) if interruptible else None)


def worker(env: dict[str, str], name: str, queues: str = "build,gpu,agent", log: Path | None = None) -> subprocess.Popen:
    # solo pool: a step runs in the worker process itself, so killing its group kills the step.
    return spawn(["celery", "-A", "studio", "worker", "-Q", queues, "--pool=solo", "-l", "info", "-n", f"{name}@%h"],
                 env, log)


def daphne(env: dict[str, str], log: Path | None = None) -> tuple[str, subprocess.Popen]:
    """daphne on a free loopback port, once it accepts connections; returns its base URL."""
    port = free_port()
    proc = spawn(["daphne", "-b", "127.0.0.1", "-p", str(port), "studio.asgi:application"], env, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"http://127.0.0.1:{port}", proc
        except OSError:
            time.sleep(0.2)
    stop([proc])
    raise AssertionError(f"daphne did not listen on port {port} within 30 s")


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
