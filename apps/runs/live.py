"""Pushing committed events to the browsers watching a run (the channel layer group of the run)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

log = logging.getLogger(__name__)

# The embedded in-memory channel layer lives in the web server's event loop; a worker thread must
# hand it messages on that loop (asyncio queues are not thread-safe). Consumers register it.
_web_loop: asyncio.AbstractEventLoop | None = None


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


def register_loop(loop: asyncio.AbstractEventLoop) -> None:
    global _web_loop
    _web_loop = loop


def publish(run_id: int, message: dict[str, Any]) -> None:
    """Best effort: the database is the record; a browser that misses this push replays it on reconnect."""
    layer = get_channel_layer()
    if layer is None:
        return

    async def send() -> None:
        await layer.group_send(group_name(run_id), {"type": "run.event", "event": message})

    try:
        if settings.EMBEDDED and _web_loop is not None and _web_loop.is_running():
            asyncio.run_coroutine_threadsafe(send(), _web_loop)
        else:
            async_to_sync(send)()
    except Exception:  # noqa: BLE001 - a push failure must never fail the step that committed the event
        log.exception("could not push event %s of run %s to the channel layer", message.get("seq"), run_id)
