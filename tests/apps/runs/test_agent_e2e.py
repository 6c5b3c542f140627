"""The agent end to end, all real: a tiny random Qwen2 served by `transformers serve` on loopback, a
Celery worker process running the run's steps, daphne serving the run's websocket, Postgres and Redis.
The model writes gibberish; the run must survive it, stream it, stop at its budget and keep the record."""
from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from apps.endpoints.models import ModelEndpoint
from apps.runs.models import Run
from apps.runs.services import start_agent_run
from tests import processes

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def studio(tmp_path, fast_eval):
    env = processes.studio_env()
    url, web = processes.daphne(env, tmp_path / "daphne.log")
    procs = [web, processes.worker(env, "e2e", log=tmp_path / "worker.log")]
    yield url
    processes.stop(procs)


def watch(url: str, run: Run, session: str, seconds: float) -> list[dict]:
    """Every event of the run as a websocket client receives it, until the run has finished."""
    import websocket

    ws = websocket.create_connection(url.replace("http://", "ws://") + f"/ws/runs/{run.pk}/?after=0",
                                     cookie=f"sessionid={session}", origin=url, timeout=seconds)
    events: list[dict] = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            events.append(json.loads(ws.recv()))
            if events[-1]["kind"] == "run_finished":
                return events
    finally:
        ws.close()
    raise AssertionError(f"no run_finished within {seconds} s; got {[e['kind'] for e in events]}")


def test_the_studio_runs_the_agent_against_a_real_served_model_and_streams_it(studio, tiny_server, owner, problem):
    endpoint = ModelEndpoint.objects.create(name="tiny", kind=ModelEndpoint.Kind.OPENAI, base_url=tiny_server.base_url,
                                            model=tiny_server.model, max_tokens=24, temperature=1.0, timeout_seconds=60)
    client = Client()
    client.force_login(owner)
    run = start_agent_run(owner, problem, endpoint, budgets={"turns": 2})

    events = watch(studio, run, client.cookies["sessionid"].value, seconds=240)

    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), "the websocket delivered every event once, in order"
    kinds = [e["kind"] for e in events]
    assert kinds.count("assistant") == 2, events[-1]["payload"]
    assert "token" in kinds and kinds.index("token") < kinds.index("assistant")
    first = next(e["payload"] for e in events if e["kind"] == "assistant")
    streamed = "".join(e["payload"]["text"] for e in events if e["kind"] == "token" and e["payload"]["turn"] == 0)
    if not first["tool_calls"]:
        assert streamed == first["text"], "the streamed tokens add up to the turn's text"
    assert first["completion_tokens"] > 0
    # Gibberish is an observation the model reads next turn, never a crash.
    assert "observation" in kinds or "tool_result" in kinds
    finished = events[-1]["payload"]
    assert finished["status"] == "finished" and "turn budget spent (2 of 2 turns)" in finished["message"]

    run.refresh_from_db()
    record = run.trajectory
    assert record["turns"] == 2 and record["policy"] == f"openai:{tiny_server.model}"
    assert [m["role"] for m in record["messages"]][:3] == ["system", "user", "assistant"]
    assert record["completion_tokens"] > 0 and len(record["turn_rewards"]) == 2
