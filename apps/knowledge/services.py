"""The knowledge base in the studio: storing what a run taught, and offering it to the agent.

    record_run(run, state)                       # after a run: its distilled entries, replacing earlier ones
    Toolbox(evaluator, knowledge=search_function(user, problem.source))
    opening_note(user, problem.source)           # the entries offered with the first message ("" when none)
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.db.models import F

from agent import knowledge
from apps.knowledge.models import Entry
from apps.runs.models import Run
from studio.storable import storable

if TYPE_CHECKING:
    from agent.loop import AgentState

User = AbstractBaseUser | AnonymousUser

# Entries ranked per query, newest (and curated) first: ranking is in Python, so the pool is bounded.
POOL_SIZE = 2000
SEARCH_LIMIT = 5
OPENING_LIMIT = 3
# Offered unasked only when the problem is alike: without any shared op an entry scores at most 0.45 (same
# shapes, dtypes and device), so the opening note needs some op in common.
OPENING_MIN_SCORE = 0.5


def record_run(run: Run, state: AgentState) -> list[Entry]:
    """Distill a finished run into entries owned (and shared) as the run is. Idempotent: recording a run
    again replaces its entries, so a retried step cannot double them."""
    distilled = knowledge.distill(state)
    with transaction.atomic():
        Entry.objects.filter(run=run).delete()
        return [Entry.objects.create(owner=run.owner, shared=run.shared, run=run, problem_hash=run.problem.source_hash,
                                     **{key: storable(fields[key]) for key in knowledge.ENTRY_KEYS})
                for fields in distilled]


def entries_for(user: User, problem_source: str, query: str = "", limit: int = SEARCH_LIMIT, *,
                device: str | None = None, min_score: float = 0.0) -> list[Entry]:
    """The entries the user's agent may read (own, shared, curated), most relevant to the problem and the
    query first."""
    pool = list(Entry.objects.offered_to(user).order_by(F("owner").asc(nulls_first=True), "-updated_at")[:POOL_SIZE])
    by_pk = {entry.pk: entry for entry in pool}
    ranked = knowledge.rank([entry.as_entry() for entry in pool], knowledge.problem_signature(problem_source), query,
                            limit, device=device, min_score=min_score)
    return [by_pk[fields["pk"]] for fields in ranked]


def search_function(user: User, problem_source: str, *, device: str | None = None) -> Callable[[str], str]:
    """The search_knowledge tool for one run: what agent.tools.Toolbox takes as `knowledge=`."""

    def search(query: str) -> str:
        found = entries_for(user, problem_source, query, SEARCH_LIMIT, device=device)
        return knowledge.format_entries([entry.as_entry() for entry in found])

    return search


def opening_note(user: User, problem_source: str, *, device: str | None = None) -> str:
    """The entries offered with the run's first message, or "" when none is about a problem like this one."""
    found = entries_for(user, problem_source, "", OPENING_LIMIT, device=device, min_score=OPENING_MIN_SCORE)
    if not found:
        return ""
    return (knowledge.format_entries([entry.as_entry() for entry in found])
            + "\nsearch_knowledge(query) finds more past experience.")
