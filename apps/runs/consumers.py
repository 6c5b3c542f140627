"""The run page's websocket: replay what the browser missed, then stream live events, without gap or duplicate.

Order matters: join the run's group first, then replay from the database. An event committed before
the replay query is in the replay (and maybe also live: dropped by seq); one committed after it
arrives live. A live event that skips ahead (pushes from two workers can cross) triggers a fetch of
the gap from the database."""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from apps.runs import live
from apps.runs.models import Run
from apps.runs.services import events_after


class RunConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        import asyncio

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
        self.group = live.group_name(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._catch_up()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: dict[str, Any], **kwargs: Any) -> None:
        # A client may also ask for a replay after a given seq (e.g. after noticing a gap itself).
        if content.get("type") == "replay":
            await self._catch_up()

    async def run_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        if event["seq"] <= self.last_seq:
            return
        if event["seq"] > self.last_seq + 1:
            await self._catch_up()
            if event["seq"] <= self.last_seq:
                return
        await self._send(event)

    async def _catch_up(self) -> None:
        for event in await database_sync_to_async(events_after)(self.run_id, self.last_seq):
            await self._send(event)

    async def _send(self, event: dict[str, Any]) -> None:
        self.last_seq = event["seq"]
        await self.send_json(event)


def _visible(user: Any, run_id: int) -> bool:
    return Run.objects.visible_to(user).filter(pk=run_id).exists()
