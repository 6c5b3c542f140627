"""A run's events: appending the next one (stored, then pushed to watchers), and reading them back a page at a time.
The run page's JSON, the API and the websocket's replay all read through `event_page`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.runs import live
from apps.runs.models import Event, Run


def append_event(run_id: int, kind: str, payload: dict[str, Any] | None = None) -> Event:
    """Store the run's next event and push it to watchers once committed.

    The run's row lock serialises writers, so seq is exactly last_seq + 1 whatever the number of
    workers; pushing only after commit means a browser never sees an event the database lacks."""
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "last_seq").get(pk=run_id)
        seq = run.last_seq + 1
        Run.objects.filter(pk=run_id).update(last_seq=seq)
        event = Event.objects.create(run_id=run_id, seq=seq, kind=kind, payload=payload or {})
        message = event.to_message()
        transaction.on_commit(lambda: live.publish(run_id, message))
    return event


def phase_watcher(run_id: int, **context: Any) -> Callable[[str, str, float], None]:
    """A watcher of an evaluation's phases (agent/engine/evaluate/progress.py) that appends each as a "phase" event:
    the run page shows what is being done now and for how long. `context` goes into every payload (the agent's
    turn). Progress only: the engine ignores a watcher that fails."""
    def watch(phase: str, what: str, elapsed: float) -> None:
        append_event(run_id, "phase", {"phase": phase, "what": what, "elapsed": elapsed, **context})
    return watch


@dataclass
class EventPage:
    events: list[dict[str, Any]]
    """The events as pushed to watchers ({seq, kind, payload, at}), in seq order."""
    next_after: int
    """The last seq in the page (the `after` asked for when the page is empty): where the next page starts."""
    has_more: bool
    """Whether events past the page exist (only ever true when a limit cut it)."""


def event_page(run_id: int, after: int, limit: int | None = None) -> EventPage:
    """The run's events after seq `after`, in order: all of them, or at most `limit`."""
    found = Event.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")
    rows = list(found if limit is None else found[:limit + 1])
    shown = rows if limit is None else rows[:limit]
    events = [e.to_message() for e in shown]
    return EventPage(events=events, next_after=events[-1]["seq"] if events else after,
                     has_more=limit is not None and len(rows) > limit)
