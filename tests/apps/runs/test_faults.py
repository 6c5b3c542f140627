"""Infrastructure faults in the middle of a run: the worker SIGKILLed, Redis restarted, Postgres restarted.
Each run must still finish, with its events numbered 1..n without gap or repeat and one verdict.

The test starts its own Postgres (initdb/pg_ctl from /usr/lib/postgresql/*/bin) and Redis on free ports in
a temporary directory, so restarting them touches nothing else; the worker is a real Celery process and
the run is created by the studio's own service in a `manage.py shell` process on that database. Skips
with a reason where the Postgres server binaries or redis-server are missing."""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import processes
from tests.apps.cast import GOOD_CANDIDATE, PROBLEM

ROOT = processes.ROOT


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _as_postgres_user(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` system user then."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


@dataclass
class Services:
    tmp: Path
    pg_bin: Path
    pg_port: int
    redis_port: int
    redis: subprocess.Popen | None = None

    @property
    def database_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.pg_port}/kstudio_faults"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def start_postgres(self) -> None:
        log = self.tmp / "postgres.log"
        _run(_as_postgres_user([str(self.pg_bin / "pg_ctl"), "-D", str(self.tmp / "pg"), "-l", str(log), "-w", "-t", "60",
                                "-o", f"-p {self.pg_port} -k {self.tmp} -c listen_addresses=127.0.0.1 "
                                "-c fsync=off -c full_page_writes=off", "start"]))

    def stop_postgres(self, mode: str = "fast") -> None:
        subprocess.run(_as_postgres_user([str(self.pg_bin / "pg_ctl"), "-D", str(self.tmp / "pg"), "-m", mode, "-w", "stop"]),
                       check=False, capture_output=True)

    def start_redis(self) -> None:
        # As a production broker: what is queued survives a restart (append-only file, no snapshots).
        self.redis = subprocess.Popen(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                                       "--dir", str(self.tmp)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        _wait_for_port(self.redis_port, "redis-server")

    def stop_redis(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.kill()
            self.redis.wait()


def _wait_for_port(port: int, what: str, seconds: float = 30) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on port {port} within {seconds} s")


def _run(argv: list[str], **kwargs: object) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{argv[:6]} failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def services() -> Iterator[Services]:
    pg_bin = _pg_bin()
    if pg_bin is None or not (pg_bin / "initdb").exists():
        pytest.skip("needs the Postgres server binaries (/usr/lib/postgresql/*/bin/initdb, Debian's postgresql package)")
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server (Debian's redis-server package)")
    # Directly under /tmp (pytest's own temp root is private to this user): the postgres system user
    # writes its data directory and socket here.
    tmp = Path(tempfile.mkdtemp(prefix="kstudio-faults-"))
    tmp.chmod(0o777)
    svc = Services(tmp, pg_bin, processes.free_port(), processes.free_port())
    try:
        _run(_as_postgres_user([str(pg_bin / "initdb"), "-D", str(tmp / "pg"), "-U", "postgres", "--auth=trust",
                                "--no-sync", "-E", "UTF8"]))
        svc.start_postgres()
        svc.start_redis()
        _run([str(pg_bin / "createdb"), "-h", "127.0.0.1", "-p", str(svc.pg_port), "-U", "postgres", "kstudio_faults"])
        _run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=_env(svc), timeout=300)
        yield svc
    finally:
        svc.stop_redis()
        svc.stop_postgres("immediate")
        shutil.rmtree(tmp, ignore_errors=True)


def _env(svc: Services) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    # A dead worker's claim is taken over after 4 s; Redis gives an unacknowledged message back after 15 s.
    return {**env, "DATABASE_URL": svc.database_url, "REDIS_URL": svc.redis_url, "KSTUDIO_DEVICE": "cpu",
            "KSTUDIO_COMPILE_BASELINE": "false", "KSTUDIO_EVAL_MIN_ROUNDS": "2", "KSTUDIO_EVAL_MAX_ROUNDS": "3", "KSTUDIO_STEP_LEASE_SECONDS": "4",
            "CELERY_VISIBILITY_TIMEOUT": "15", "DB_POOL_MIN": "1"}


_CREATE_RUN = """
import json, sys
from django.contrib.auth import get_user_model
from apps.problems.models import Problem
from apps.problems.services import sha256
from apps.runs.services import start_evaluation
problem_source, candidate_source = json.loads(sys.stdin.read())
owner, _ = get_user_model().objects.get_or_create(username="faults")
problem = Problem.objects.create(owner=owner, name="silu_bias.py", source=problem_source, source_hash=sha256(problem_source))
print("RUN", start_evaluation(owner, problem, candidate_source).pk)
"""


def _start_run(svc: Services, candidate: str | None = None) -> int:
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", _CREATE_RUN], cwd=ROOT, env=_env(svc),
                          input=json.dumps([PROBLEM.read_text(), candidate or GOOD_CANDIDATE.read_text()]), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.split("RUN")[-1].strip())


def _query(svc: Services, sql: str, *args: object) -> list[tuple]:
    import psycopg

    with psycopg.connect(svc.database_url.replace("postgres://", "postgresql://"), connect_timeout=5) as conn:
        return conn.execute(sql, args).fetchall()


def _events(svc: Services, run_id: int) -> list[tuple[int, str, dict]]:
    return _query(svc, "SELECT seq, kind, payload FROM runs_event WHERE run_id = %s ORDER BY seq", run_id)


def _wait(svc: Services, run_id: int, until, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if until(_events(svc, run_id)):
                return
        except Exception:  # noqa: BLE001 - Postgres may be restarting: ask again
            pass
        time.sleep(0.3)
    status = _query(svc, "SELECT status, stage, message FROM runs_run WHERE id = %s", run_id)
    raise AssertionError(f"run {run_id}: {what} not seen within {seconds} s; run {status}; events "
                         f"{[(s, k) for s, k, _ in _events(svc, run_id)]}")


def _started(stage: str):
    def seen(events: list[tuple[int, str, dict]]) -> bool:
        return any(kind == "step_started" and payload.get("stage") == stage for _, kind, payload in events)
    return seen


_evaluating = _started("evaluate")


def _finished(events: list[tuple[int, str, dict]]) -> bool:
    return any(kind == "run_finished" for _, kind, _ in events)


def _assert_finished_once_without_gaps(svc: Services, run_id: int) -> list[tuple[int, str, dict]]:
    events = _events(svc, run_id)
    seqs = [seq for seq, _, _ in events]
    assert seqs == list(range(1, len(seqs) + 1)), f"events not numbered 1..n: {seqs}"
    assert [k for _, k, _ in events].count("run_finished") == 1
    (status, message, last_seq), = _query(svc, "SELECT status, message, last_seq FROM runs_run WHERE id = %s", run_id)
    assert status == "finished" and "Accepted" in message, (status, message)
    assert last_seq == seqs[-1]
    verdicts = _query(svc, "SELECT verdict->>'status' FROM runs_candidate WHERE run_id = %s", run_id)
    assert verdicts == [("accepted",)]
    return events


@pytest.fixture
def workers(services: Services, tmp_path) -> Iterator:
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        proc = processes.worker(_env(services), f"faults{len(started)}", log=tmp_path / f"worker{len(started)}.log")
        started.append(proc)
        return proc

    yield start
    processes.stop(started)


def test_it_resumes_a_run_after_its_worker_is_sigkilled_mid_evaluation(services, workers):
    first = workers()
    run_id = _start_run(services)
    _wait(services, run_id, _evaluating, 180, "the evaluate step")
    os.killpg(first.pid, signal.SIGKILL)  # the worker and its sandbox, mid-step
    first.wait()
    workers()
    _wait(services, run_id, _finished, 240, "run_finished")
    events = _assert_finished_once_without_gaps(services, run_id)
    evaluate = [p for _, k, p in events if k == "step_started" and p.get("stage") == "evaluate"]
    assert len(evaluate) >= 2 and evaluate[-1]["resumed"] is True


def test_it_finishes_a_run_when_redis_restarts_mid_build(services, workers):
    workers()
    # A candidate this studio has not built yet (a new comment: a new source hash), so the build step has
    # work to do while Redis goes away; its result schedules the evaluate step through the restarted Redis.
    run_id = _start_run(services, GOOD_CANDIDATE.read_text() + f"\n# run {time.time_ns()}\n")
    _wait(services, run_id, _started("build"), 180, "the build step")
    services.stop_redis()  # SIGKILL: the worker's broker connection breaks under it
    time.sleep(1)
    services.start_redis()
    _wait(services, run_id, _finished, 240, "run_finished")
    events = _assert_finished_once_without_gaps(services, run_id)
    assert [p.get("stage") for _, k, p in events if k == "step_started"][:2] == ["build", "evaluate"]


def test_it_finishes_a_run_when_postgres_restarts_mid_evaluation(services, workers):
    workers()
    run_id = _start_run(services)
    _wait(services, run_id, _evaluating, 180, "the evaluate step")
    services.stop_postgres("fast")  # every open connection (the worker's pool) is closed under it
    time.sleep(1)
    services.start_postgres()
    _wait(services, run_id, _finished, 240, "run_finished")
    _assert_finished_once_without_gaps(services, run_id)
