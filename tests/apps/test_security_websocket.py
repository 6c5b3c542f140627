"""The run websocket behind real daphne (Postgres, Redis): only pages of our own origin may open it (a foreign or
missing Origin is refused at the handshake, whoever's cookie it carries), and only users who may see the run
are accepted: the owner, staff, and everyone once the run is shared. Also the request-size cap as daphne serves it."""
from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client

from apps.runs.models import Run
from tests.apps.cast import run  # noqa: F401
from tests import processes

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def studio_url(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        env = processes.studio_env()
    url, web = processes.daphne(env, tmp_path_factory.mktemp("daphne") / "daphne.log")
    yield url
    processes.stop([web])


def _session(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _open(studio_url: str, run: Run, user=None, origin: str | None = "own") -> tuple[int, list[int]]:
    """(101 and the seqs replayed) when the handshake succeeds, else (its HTTP status, [])."""
    import websocket

    url = studio_url.replace("http://", "ws://") + f"/ws/runs/{run.pk}/?after=0"
    options = {"cookie": f"sessionid={_session(user)}" if user else None, "timeout": 20}
    if origin is None:
        options["suppress_origin"] = True
    elif origin == "https-own":  # our host and port over https: another scheme, another origin
        options["origin"] = studio_url.replace("http://", "https://")
    elif origin == "other-port":  # the same host on another port: another origin, as for the CSRF check
        host, port = studio_url.rsplit(":", 1)
        options["origin"] = f"{host}:{int(port) + 1}"
    else:
        options["origin"] = studio_url if origin == "own" else origin
    try:
        ws = websocket.create_connection(url, **options)
    except websocket.WebSocketBadStatusException as exc:
        return exc.status_code, []
    try:
        return 101, [json.loads(ws.recv())["seq"] for _ in range(3)]
    finally:
        ws.close()


def test_the_owner_and_staff_watch_from_our_own_origin(studio_url, run, owner, staff):
    assert _open(studio_url, run, owner) == (101, [1, 2, 3])
    assert _open(studio_url, run, staff) == (101, [1, 2, 3])


@pytest.mark.parametrize("origin", ["http://evil.example", "null", None, "other-port", "https-own"])
def test_a_foreign_or_missing_origin_is_refused_even_with_the_owners_cookie(studio_url, run, owner, origin):
    assert _open(studio_url, run, owner, origin=origin) == (403, [])


def test_strangers_members_and_anonymous_visitors_are_refused_a_private_run(studio_url, run, stranger, member):
    assert _open(studio_url, run, stranger) == (403, [])
    assert _open(studio_url, run, member) == (403, [])
    assert _open(studio_url, run, None) == (403, [])
    Run.objects.filter(pk=run.pk).update(shared=True)
    assert _open(studio_url, run, member) == (101, [1, 2, 3])
    assert _open(studio_url, run, None) == (403, [])  # shared means every user, not the public


def test_daphne_refuses_a_body_over_the_cap_declared_or_chunked(studio_url):
    import httpx

    cap = settings.KSTUDIO_MAX_REQUEST_BYTES
    response = httpx.post(studio_url + "/api/v1/problems/", content=b"x" * (cap + 1), timeout=60,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and f"at most {cap:,} bytes" in response.json()["error"]["message"]

    def chunks():
        for _ in range(cap // 65536 + 2):
            yield b" " * 65536

    response = httpx.post(studio_url + "/problems/new/", content=chunks(), timeout=60)
    assert response.status_code == 413 and f"at most {cap:,} bytes" in response.text
