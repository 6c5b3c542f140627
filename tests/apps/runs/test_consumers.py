"""The run websocket: replay from a seq, then live events, without gap or duplicate; strangers are refused."""
import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from apps.runs import live
from apps.runs.models import Event, Run
from apps.runs.routing import websocket_urlpatterns
from apps.runs.events import append_event
from tests.apps.cast import run  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def _communicator(user, run_id: int, after: int = 0) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run_id}/?after={after}")
    comm.scope["user"] = user
    return comm


def test_it_replays_after_the_given_seq_then_streams_live_events_once(owner, run):
    async def scenario():
        comm = _communicator(owner, run.pk, after=1)
        connected, _ = await comm.connect()
        assert connected
        assert [(await comm.receive_json_from(5))["seq"] for _ in range(2)] == [2, 3]
        await database_sync_to_async(append_event)(run.pk, "live", {"x": 1})
        event = await comm.receive_json_from(5)
        assert event["seq"] == 4 and event["kind"] == "live"
        # A duplicate push (an event already replayed) is not sent again.
        await get_channel_layer().group_send(live.group_name(run.pk), {"type": "run.event", "event": {
            "seq": 3, "kind": "step", "payload": {}, "at": ""}})
        assert await comm.receive_nothing(0.5)
        await comm.disconnect()

    async_to_sync(scenario)()


def test_it_fills_a_gap_from_the_database_when_a_later_event_arrives_first(owner, run):
    async def scenario():
        comm = _communicator(owner, run.pk, after=3)
        assert (await comm.connect())[0]
        assert await comm.receive_nothing(0.3)

        def store_two_silently():
            # Two events stored without their pushes, as when a worker's push is lost or overtaken.
            Event.objects.create(run=run, seq=4, kind="a")
            Event.objects.create(run=run, seq=5, kind="b")
            Run.objects.filter(pk=run.pk).update(last_seq=5)

        await database_sync_to_async(store_two_silently)()
        await get_channel_layer().group_send(live.group_name(run.pk), {"type": "run.event", "event": {
            "seq": 5, "kind": "b", "payload": {}, "at": ""}})
        assert [(await comm.receive_json_from(5))["seq"] for _ in range(2)] == [4, 5]
        assert await comm.receive_nothing(0.3)
        await comm.disconnect()

    async_to_sync(scenario)()


@pytest.mark.parametrize("who", ["stranger", "anonymous"])
def test_it_refuses_a_user_who_cannot_see_the_run(who, run, stranger):
    from django.contrib.auth.models import AnonymousUser

    user = stranger if who == "stranger" else AnonymousUser()

    async def scenario():
        comm = _communicator(user, run.pk)
        connected, code = await comm.connect()
        assert not connected and code == 4403

    async_to_sync(scenario)()


def test_it_lets_staff_and_shared_viewers_watch(run, staff, member):
    async def watch(user):
        comm = _communicator(user, run.pk)
        connected, _ = await comm.connect()
        seqs = [(await comm.receive_json_from(5))["seq"] for _ in range(3)] if connected else []
        await comm.disconnect()
        return connected, seqs

    assert async_to_sync(watch)(staff) == (True, [1, 2, 3])
    assert async_to_sync(watch)(member)[0] is False
    Run.objects.filter(pk=run.pk).update(shared=True)
    assert async_to_sync(watch)(member) == (True, [1, 2, 3])


def test_it_delivers_a_last_event_whose_push_was_lost(owner, run, settings):
    # The channel layer delivers at most once; with no later event to reveal the gap, the periodic resync does.
    settings.KSTUDIO_WS_RESYNC_SECONDS = 0.2

    async def scenario():
        comm = _communicator(owner, run.pk, after=3)
        assert (await comm.connect())[0]

        def store_silently():
            Event.objects.create(run=run, seq=4, kind="last")
            Run.objects.filter(pk=run.pk).update(last_seq=4)

        await database_sync_to_async(store_silently)()
        event = await comm.receive_json_from(10)
        assert event["seq"] == 4 and event["kind"] == "last"
        assert await comm.receive_nothing(0.6)  # resyncs that find nothing new send nothing
        await comm.disconnect()

    async_to_sync(scenario)()
