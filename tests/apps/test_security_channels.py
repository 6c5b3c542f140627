"""Run events stay inside their studio: Redis pub/sub channels are global to the server, so the channel layer's
prefix carries the Redis database number, and a studio on redis://host/N never hears one on redis://host/M."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from asgiref.sync import async_to_sync
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from tests.processes import ROOT


def _layer_config(redis_url: str) -> dict:
    """The channel layer studio.settings builds for a REDIS_URL (a fresh process: settings are read at start)."""
    env = {**os.environ, "REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "studio.settings"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.CHANNEL_LAYERS['default'])"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


def test_two_studios_on_one_redis_server_do_not_hear_each_others_run_events():
    if settings.EMBEDDED:
        pytest.skip("needs REDIS_URL (make test sets it)")
    base = settings.REDIS_URL.rsplit("/", 1)[0]
    mine, theirs = _layer_config(f"{base}/14"), _layer_config(f"{base}/15")
    assert mine["BACKEND"].endswith("RedisPubSubChannelLayer") and mine["CONFIG"]["prefix"] != theirs["CONFIG"]["prefix"]

    async def scenario():
        watcher, same_studio, other_studio = (RedisPubSubChannelLayer(**c["CONFIG"]) for c in (mine, mine, theirs))
        channel = await watcher.new_channel()
        await watcher.group_add("run-1", channel)
        try:
            await other_studio.group_send("run-1", {"type": "run.event", "event": {"seq": 1, "from": "other"}})
            await same_studio.group_send("run-1", {"type": "run.event", "event": {"seq": 1, "from": "same"}})
            first = await watcher.receive(channel)
            assert first["event"]["from"] == "same"
        finally:
            for layer in (watcher, same_studio, other_studio):
                await layer.flush()

    async_to_sync(scenario)()
