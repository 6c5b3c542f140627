"""The run page's websocket: replay what the browser missed, then stream live events, without gap or duplicate.

Order matters: join the run's group first, then replay from the database. An event committed before
the replay query is in the replay (and maybe also live: dropped by seq); one committed after it
arrives live. A live event that skips ahead (pushes from two workers can cross) triggers a fetch of
the gap from the database. The channel layer delivers at most once (a push lost with a Redis connection is
never retried), and a gap shows only when a later event arrives, so a socket that got no push for
KSTUDIO_WS_RESYNC_SECONDS asks the database for anything past what was sent: a run's last events cannot go
missing. (Only when idle: a watcher that is merely behind a busy stream would otherwise re-read from the
database what is already queued for it, and fall further behind.) One lock orders every send, and nothing at
or below the last seq sent is sent again."""
from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.conf import settings

from apps.runs import live
from apps.runs.models import Run
from apps.runs.events import event_page


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        live.register_loop(asyncio.get_running_loop())
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        user = self.scope.get("user")
        if user is None or not await database_sync_to_async(_visible)(user, self.run_id):
            await self.close(code=4403)  # the same answer for "missing" and "not yours": nothing leaks
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        self.sending = asyncio.Lock()
        self.pushed = False  # a push arrived since the last resync tick
        self.group = live.group_name(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        async with self.sending:
            await self._catch_up()
        self.resync = asyncio.create_task(self._resync_while_open())

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "resync"):
            self.resync.cancel()
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        # A client may also ask for a replay after a given seq (e.g. after noticing a gap itself).
        if content.get("type") == "replay":
            async with self.sending:
                await self._catch_up()

    async def run_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        self.pushed = True
        async with self.sending:
            if event["seq"] <= self.last_seq:
                return
            if event["seq"] > self.last_seq + 1:
                await self._catch_up()
            await self._send(event)

    async def _resync_while_open(self) -> None:
        while True:
            await asyncio.sleep(settings.KSTUDIO_WS_RESYNC_SECONDS)
            if self.pushed:
                self.pushed = False
                continue
            async with self.sending:
                await self._catch_up()

    async def _catch_up(self) -> None:
        """Send what the database has past last_seq; the caller holds `sending`."""
        page = await database_sync_to_async(event_page)(self.run_id, self.last_seq)
        for event in page.events:
            await self._send(event)

    async def _send(self, event: dict[str, Any]) -> None:
        if event["seq"] <= self.last_seq:
            return
        self.last_seq = event["seq"]
        await self.send_json(event)


class NoSuchSocket(AsyncWebsocketConsumer):
    """A websocket path nothing serves: closed at the handshake (the browser sees 403), as a 404 would be."""

    async def connect(self) -> None:
        await self.close(code=4404)


def _visible(user: Any, run_id: int) -> bool:
    return Run.objects.visible_to(user).filter(pk=run_id).exists()
