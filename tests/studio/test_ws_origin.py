"""The websocket Origin check (studio/ws_origin.py) matches Django's CSRF check: the full origin (scheme, host and
port) must be the studio's own, or one of CSRF_TRUSTED_ORIGINS; and unmatched websocket paths are refused at the
handshake, never a server error."""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.testing import WebsocketCommunicator

from studio.ws_origin import SameOriginValidator


class Accept(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.accept()


def _connects(origin: str | None, host: str = "127.0.0.1:8000", scheme: str = "ws", extra=()) -> bool:
    headers = [(b"host", host.encode()), *extra]
    if origin is not None:
        headers.append((b"origin", origin.encode()))

    async def attempt() -> bool:
        communicator = WebsocketCommunicator(SameOriginValidator(Accept.as_asgi()), "/ws/runs/1/", headers=headers)
        communicator.scope["scheme"] = scheme
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    return async_to_sync(attempt)()


def test_our_own_origin_is_accepted():
    assert _connects("http://127.0.0.1:8000")
    assert _connects("https://127.0.0.1:8000", scheme="wss")
    assert _connects("http://localhost", host="localhost")


@pytest.mark.parametrize("origin", ["http://127.0.0.1:9999", "http://127.0.0.1", "https://127.0.0.1:8000",
                                    "http://evil.example", "http://127.0.0.1:8000.evil.example", "null", "", None])
def test_another_port_scheme_or_host_is_refused(origin):
    assert not _connects(origin)


def test_a_host_outside_allowed_hosts_is_refused_even_when_the_origin_matches_it():
    assert not _connects("http://evil.example:8000", host="evil.example:8000")


def test_trusted_origins_are_accepted_exactly_or_by_their_wildcard(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://studio.example", "https://*.corp.example"]
    assert _connects("https://studio.example")
    assert _connects("https://app.corp.example")
    assert not _connects("http://app.corp.example") and not _connects("https://studio.example:444")


def test_behind_a_trusted_tls_proxy_the_https_origin_is_ours(settings):
    proto = [(b"x-forwarded-proto", b"https")]
    assert not _connects("https://127.0.0.1:8000", extra=proto)  # the header is ignored unless trusted
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert _connects("https://127.0.0.1:8000", extra=proto) and not _connects("http://127.0.0.1:8000", extra=proto)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/runs/abc/", "/ws/runs/1/extra/", "/", "/ws/runs/99999999999999999999/"])
def test_an_unmatched_or_unknown_websocket_path_is_refused_at_the_handshake(path):
    from studio.asgi import application

    async def attempt() -> tuple[bool, object]:
        communicator = WebsocketCommunicator(application, path, headers=[(b"host", b"127.0.0.1:8000"),
                                                                         (b"origin", b"http://127.0.0.1:8000")])
        connected, code = await communicator.connect()
        await communicator.disconnect()
        return connected, code

    connected, code = async_to_sync(attempt)()
    assert not connected and code in (4403, 4404)
