"""A live studio for the load benchmarks: Django set up on the configured Postgres and Redis (migrated), a
daphne process on a free loopback port, and a logged-in session or API token for a benchmark user.

Needs DATABASE_URL (Postgres) and REDIS_URL: the point is the production path (channels-redis, psycopg)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_django() -> None:
    """Set Django up against the environment's database (migrated here) and refuse the embedded default."""
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")) or not os.environ.get("REDIS_URL"):
        raise SystemExit("set DATABASE_URL (postgres://...) and REDIS_URL (redis://...): the benchmark measures "
                         "the production path (Postgres, channels-redis)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_daphne(env: dict[str, str], log: Path) -> tuple[str, subprocess.Popen]:
    """daphne serving studio.asgi on a free loopback port, once it accepts connections; returns its base URL."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                 "studio.asgi:application"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daphne exited with {proc.returncode}; see {log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"http://127.0.0.1:{port}", proc
        except OSError:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"daphne did not listen on port {port} within 60 s; see {log}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def bench_user(username: str = "bench"):
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username=username)
    return user


def session_cookie(user) -> str:
    """A logged-in session for the user, as the browser would hold it after logging in."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def machine() -> str:
    import platform

    import psutil

    return (f"{platform.node()}: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
            f"Python {platform.python_version()}")
