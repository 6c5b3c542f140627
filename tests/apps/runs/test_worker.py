"""A real Celery worker process runs the run; a worker killed with SIGKILL mid-run loses nothing.

Needs Postgres and Redis (a worker in another process must see the test database and the broker):
`make test` points DATABASE_URL and REDIS_URL at the local services."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from apps.kernels.models import Kernel
from apps.runs.models import Run
from apps.runs.services import start_evaluation
from tests import processes
from tests.apps.cast import GOOD_CANDIDATE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker_env(fast_eval):
    env = processes.studio_env(KSTUDIO_STEP_LEASE_SECONDS="4", CELERY_VISIBILITY_TIMEOUT="15")
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        proc = processes.worker(env, f"test{len(started)}")
        started.append(proc)
        return proc

    yield start
    processes.stop(started)


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
    # The worker reported the evaluation's phases as they started, before its verdict.
    kinds = list(run.events.order_by("seq").values_list("kind", "payload__phase"))
    phases = [phase for kind, phase in kinds if kind == "phase"]
    assert phases[:2] == ["plan", "build"] and "timing" in phases, kinds
    assert [k for k, _ in kinds].index("phase") < [k for k, _ in kinds].index("verification")


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


def test_an_agent_run_resumes_after_its_worker_is_killed_mid_tool_call(worker_env, owner, problem):
    from apps.endpoints.models import ModelEndpoint
    from apps.runs.services import start_agent_run

    wrong = GOOD_CANDIDATE.parent / "fault_py_wrong_shape.py"
    script = [{"text": f"Trying {p.name}.", "tool_calls": [{"name": "write_candidate", "arguments": {"source": p.read_text()}}]}
              for p in (wrong, GOOD_CANDIDATE)] + [{"text": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}]
    endpoint = ModelEndpoint.objects.create(name="script", kind=ModelEndpoint.Kind.SCRIPTED, script=script)
    first = worker_env()
    run = start_agent_run(owner, problem, endpoint, budgets={"turns": 5})
    _wait(run, lambda r: r.events.filter(kind="step_started", payload__stage="act").exists(), 180)
    os.killpg(first.pid, signal.SIGKILL)  # the worker and its sandbox, mid-evaluation of the first candidate
    first.wait()

    worker_env()
    run = _wait(run, lambda r: r.is_terminal, 300)
    assert run.status == Run.Status.FINISHED and run.message.startswith("Submitted"), run.message
    assert _contiguous(run)
    assert run.events.filter(kind="step_started", payload__stage="act", payload__resumed=True).exists()
    # The killed evaluation left nothing behind: each tool call produced exactly one candidate.
    assert list(run.candidates.order_by("turn").values_list("verdict__status", flat=True)) == ["incorrect", "accepted"]
    assert run.trajectory["status"] == "submitted" and Kernel.objects.filter(candidate__run=run).count() == 1


def test_an_embedded_studio_started_again_goes_on_with_the_runs_it_left_unfinished(worker_env, owner, problem, tmp_path):
    # Queued while no worker listens: the message went to Redis, which the embedded studio (no REDIS_URL, an in-memory
    # broker) never reads, as a `make run` stopped with runs queued loses their messages.
    run = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    env = {k: v for k, v in processes.studio_env().items() if k != "REDIS_URL"}
    first, second = tmp_path / "serve-1.log", tmp_path / "serve-2.log"
    studio = processes.spawn(["manage", "serve", "--port", str(processes.free_port())], env, first, interruptible=True)
    try:
        # Ctrl-C at the terminal in the middle of the evaluation: SIGINT to the studio's whole process group, as a
        # terminal sends it. The sandbox's zygote is in a session of its own, so the studio stops and the run is left
        # claimed, not failed by a zygote that died first.
        _wait(run, lambda r: r.events.filter(kind="phase", payload__phase="check").exists(), 240)
        os.killpg(studio.pid, signal.SIGINT)
        studio.wait(timeout=60)
    finally:
        processes.stop([studio])
    run.refresh_from_db()
    assert not run.is_terminal and run.step_token, (run.status, run.message, first.read_text()[-3000:])
    studio = processes.spawn(["manage", "serve", "--port", str(processes.free_port())], env, second)
    try:
        run = _wait(run, lambda r: r.is_terminal, 240)  # taken over at once, not after the claim's 30-minute lease
    finally:
        processes.stop([studio])
    assert run.status == Run.Status.FINISHED and "Accepted" in run.message, (run.message, second.read_text()[-3000:])
    assert "1 unfinished run(s) queued again" in first.read_text() and "1 unfinished run(s) queued again" in second.read_text()
