"""Size limits: a module over KSTUDIO_MAX_UPLOAD_BYTES is refused with its size and the limit, from a file or
the editor (the API's: api/test_limits.py); a request body over KSTUDIO_MAX_REQUEST_BYTES is refused with 413 before Django reads it
(declared or chunked), through the real ASGI application."""
from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.problems.models import Problem
from tests.apps.cast import PROBLEM

LIMIT = 1000


@pytest.fixture
def small_limit(settings):
    settings.KSTUDIO_MAX_UPLOAD_BYTES = LIMIT
    return settings


def _oversized(size: int = LIMIT + 1) -> str:
    return PROBLEM.read_text() + "#" * (size - len(PROBLEM.read_text().encode()))


@pytest.mark.django_db
def test_the_upload_page_refuses_an_oversized_file_or_paste_with_the_limit(client, owner, small_limit):
    client.force_login(owner)
    big = _oversized().encode()
    response = client.post("/problems/new/", {"file": SimpleUploadedFile("big.py", big), "model_name": "Model",
                                              "get_inputs_name": "get_inputs", "get_init_inputs_name": "get_init_inputs"})
    assert response.status_code == 400 and f"is {LIMIT + 1:,} bytes, over the {LIMIT:,}-byte limit" in response.content.decode()
    response = client.post("/problems/new/", {"source": _oversized(), "model_name": "Model",
                                              "get_inputs_name": "get_inputs", "get_init_inputs_name": "get_init_inputs"})
    assert response.status_code == 400 and f"over the {LIMIT:,}-byte limit" in response.content.decode()
    assert not Problem.objects.exists()


def _post(path: str, chunks: list[bytes], declared: int | None) -> tuple[int, dict[bytes, bytes], bytes, int]:
    """POST through studio.asgi's application; returns status, headers, body and how many chunks it read."""
    from studio.asgi import application

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    if declared is not None:
        headers.append((b"content-length", str(declared).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "headers": headers,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}

    async def scenario():
        app = ApplicationCommunicator(application, scope)
        for i, chunk in enumerate(chunks):
            await app.send_input({"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1})
        start = await app.receive_output(30)
        body = await app.receive_output(30)
        unread = app.input_queue.qsize()
        await app.wait(30)
        return start["status"], dict(start["headers"]), body["body"], len(chunks) - unread

    return async_to_sync(scenario)()


def test_a_declared_body_over_the_cap_is_refused_before_it_is_read():
    cap = settings.KSTUDIO_MAX_REQUEST_BYTES
    status, headers, body, read = _post("/api/v1/problems/", [b"{}"], declared=cap + 1)
    assert status == 413 and headers[b"content-type"] == b"application/json" and read == 0
    message = json.loads(body)["error"]
    assert message["code"] == "too_large" and f"at most {cap:,} bytes per request" in message["message"]
    assert f"{cap + 1:,} bytes" in message["message"]
    status, headers, body, _ = _post("/problems/new/", [b"x"], declared=cap + 1)
    assert status == 413 and headers[b"content-type"].startswith(b"text/plain")
    assert f"at most {cap:,} bytes per request" in body.decode()


def test_a_chunked_body_is_refused_once_it_passes_the_cap():
    cap = settings.KSTUDIO_MAX_REQUEST_BYTES
    chunk = b" " * (1024 * 1024)
    chunks = [chunk] * (cap // len(chunk) + 4)
    status, _, body, read = _post("/api/v1/problems/", chunks, declared=None)
    assert status == 413 and json.loads(body)["error"]["code"] == "too_large"
    assert read <= cap // len(chunk) + 1  # it stopped reading at the cap, not at the end


def test_a_body_under_the_cap_reaches_django():
    # No CSRF token: Django itself answers (403), so the cap let the request through.
    status, _, body, _ = _post("/accounts/login/", [b"username=a&password=b"], declared=21)
    assert status == 403 and b"CSRF" in body
