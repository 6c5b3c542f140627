"""A cap on the size of every HTTP request body, enforced before Django sees the request.

Django's ASGI handler reads a whole body into a spooled temporary file and parses it before any middleware
runs. Here a declared Content-Length over the cap is refused at once, and a body without one (chunked) is
counted as it arrives and refused when it passes the cap, with a message stating the limit.
daphne (Twisted) itself buffers a request's body to a temporary file before the application sees it, so in
production the proxy in front sets the same cap on the wire (nginx: `client_max_body_size`)."""
from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    """ASGI middleware: answers 413, with the limit stated, to a request body over `limit` bytes.
    API paths get the API's error format; pages get plain text."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self._refuse(scope, send, declared)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge:
            if started:  # cannot happen with Django (it reads the body first), but never send two responses
                raise
            await self._refuse(scope, send, None)

    async def _refuse(self, scope: Scope, send: Send, size: int | None) -> None:
        sent = f"The request body is {size:,} bytes" if size is not None else "The request body is too large"
        message = (f"{sent}; the studio accepts at most {self.limit:,} bytes per request. Send a smaller module "
                   "(or fewer sources per batch).")
        if scope.get("path", "").startswith("/api/"):
            body = json.dumps({"error": {"code": "too_large", "message": message, "fields": {}}}).encode()
            content_type = b"application/json"
        else:
            body = (message + "\n").encode()
            content_type = b"text/plain; charset=utf-8"
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # Django answers a malformed header itself
    return None
