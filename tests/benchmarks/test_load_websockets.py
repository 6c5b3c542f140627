"""A small fan-out through the real path (daphne, channels-redis, Postgres, a producer process calling
append_event): 20 clients on one run while 50 events/s are produced for 5 s; every client gets every event
once, in order. The full load (200 clients, 60 s) is benchmarks/load_websockets.py, figures in docs/benchmarks.md."""
from __future__ import annotations

import pytest

from apps.runs.models import Event
from benchmarks.live_studio import session_cookie
from benchmarks.load_websockets import END, fresh_run, measure
from tests import processes
from tests.apps.cast import owner  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def studio(tmp_path):
    env = processes.studio_env()
    url, web = processes.daphne(env, tmp_path / "daphne.log")
    yield url, env
    processes.stop([web])


def test_every_client_gets_every_event_once_and_in_order(studio, owner):
    url, env = studio
    run_id = fresh_run(owner)
    report = measure(url, run_id, session_cookie(owner), clients=20, rate=50, seconds=5, producer_env=env)
    assert report["events"] == 251 == Event.objects.filter(run_id=run_id).count()
    assert Event.objects.filter(run_id=run_id).order_by("-seq").first().kind == END
    assert report["errors"] == [] and report["lost"] == 0 and report["duplicated"] == 0 and report["out_of_order"] == 0
    assert report["deliveries"] == report["expected_deliveries"] == 20 * 251
    assert set(report["latency_ms"]) == {"p50", "p95", "p99", "max", "mean"}
