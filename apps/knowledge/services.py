"""The knowledge base in the studio: storing what a run taught, and offering it to the agent.

    record_run(run, state)                       # after a run: its distilled entries, replacing earlier ones
    Toolbox(evaluator, knowledge=search_function(user, problem.source))
    opening_note(user, problem.source)           # the entries offered with the first message ("" when none)

Ranking reads sentence embeddings (agent.knowledge.embeddings): an entry's is computed when it is recorded, or on its first
ranking (entries written in the admin, or recorded where the model was not installed) and then saved. The model
loads in the process that ranks or records: the worker's agent step, never a web request.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.db.models import F

from agent import knowledge
from agent.knowledge import EMBEDDER
from apps.knowledge.models import Entry
from apps.runs.models import Run
from studio.storable import storable

if TYPE_CHECKING:
    from agent.loop import AgentState

User = AbstractBaseUser | AnonymousUser

# Entries ranked per query, newest (and curated) first: ranking is in Python, so the pool is bounded. Cosines too:
# this Postgres has no pgvector (pg_available_extensions lists no `vector`), and 2000 dot products of 384 floats
# take a few milliseconds; an index would pay off only for pools far larger than one user's agent reads.
POOL_SIZE = 2000
SEARCH_LIMIT = 5
OPENING_LIMIT = 3
# Offered unasked only when the problem is alike: an entry about another kind of work (agent.knowledge.signature.op_structure)
# has a signature likeness under 0.5 whatever its shapes, dtypes and device, so the opening note needs the same
# kind. The bar is on the signature alone: a text that reads alike does not make another kind of work alike.
OPENING_MIN_LIKENESS = 0.5
# Found by a search when it is about the same kind of work, or when the query's words match it well (the score
# averages the two): a GEMM run searching "tiling" is not handed swish entries as its best match.
SEARCH_MIN_SCORE = 0.25


def record_run(run: Run, state: AgentState) -> list[Entry]:
    """Distill a finished run into entries owned (and shared) as the run is. Idempotent: recording a run
    again replaces its entries, so a retried step cannot double them."""
    distilled = knowledge.distill(state, settings.KSTUDIO_LIBRARY_MIN_SPEEDUP, settings.KSTUDIO_LIBRARY_KEEP_NOISY)
    entries = [Entry(owner=run.owner, shared=run.shared, run=run, problem_hash=run.problem.source_hash,
                     **{key: storable(fields[key]) for key in knowledge.ENTRY_KEYS}) for fields in distilled]
    # Embedded before the transaction: the model may take seconds to load the first time.
    vectors = EMBEDDER.embed([knowledge.entry_text(entry.as_entry()) for entry in entries]) if entries else None
    for entry, vector in zip(entries, vectors or []):
        entry.set_embedding(vector)
    with transaction.atomic():
        Entry.objects.filter(run=run).delete()
        for entry in entries:
            entry.save()
        return entries


def embed_missing(entries: list[Entry]) -> None:
    """Compute and save the embedding of each entry that has none for its current text (or one of another model);
    nothing without the model. A bulk update: the entries' updated_at, which orders the pool, stays."""
    stale = [entry for entry in entries if "embedding" not in entry.as_entry()]
    vectors = EMBEDDER.embed([knowledge.entry_text(entry.as_entry()) for entry in stale]) if stale else None
    if not vectors:
        return
    for entry, vector in zip(stale, vectors):
        entry.set_embedding(vector)
    Entry.objects.bulk_update(stale, ["embedding", "embedding_model", "embedding_digest"], batch_size=200)


def embed_all_missing(batch: int = 200) -> int | None:
    """embed_missing over every entry, a batch at a time (the embed_knowledge command); how many were embedded, or
    None without the model."""
    if not EMBEDDER.available():
        return None
    embedded = 0
    for start in range(0, Entry.objects.count(), batch):
        entries = list(Entry.objects.order_by("pk")[start:start + batch])
        embedded += sum("embedding" not in entry.as_entry() for entry in entries)
        embed_missing(entries)
    return embedded


def entries_for(user: User, problem_source: str, query: str = "", limit: int = SEARCH_LIMIT, *,
                device: str | None = None, min_score: float = 0.0, min_likeness: float = 0.0) -> list[Entry]:
    """The entries the user's agent may read (own, shared, curated), most relevant to the problem and the
    query first (agent.knowledge.ranking.rank: signature, meaning, and BM25 with a query)."""
    pool = list(Entry.objects.offered_to(user).order_by(F("owner").asc(nulls_first=True), "-updated_at")[:POOL_SIZE])
    embed_missing(pool)
    by_pk = {entry.pk: entry for entry in pool}
    signature = knowledge.problem_signature(problem_source)
    ranked = knowledge.rank([entry.as_entry() for entry in pool], signature, query, limit, device=device,
                            min_score=min_score, min_likeness=min_likeness,
                            problem=knowledge.problem_text(problem_source, signature=signature), embedder=EMBEDDER)
    return [by_pk[fields["pk"]] for fields in ranked]


def search_function(user: User, problem_source: str, *, device: str | None = None) -> Callable[[str], str]:
    """The search_knowledge tool for one run: what agent.loop.tools.Toolbox takes as `knowledge=`."""

    def search(query: str) -> str:
        found = entries_for(user, problem_source, query, SEARCH_LIMIT, device=device, min_score=SEARCH_MIN_SCORE)
        return knowledge.format_entries([entry.as_entry() for entry in found])

    return search


def opening_note(user: User, problem_source: str, *, device: str | None = None) -> str:
    """The entries offered with the run's first message, or "" when none is about a problem like this one."""
    found = entries_for(user, problem_source, "", OPENING_LIMIT, device=device, min_likeness=OPENING_MIN_LIKENESS)
    if not found:
        return ""
    return (knowledge.format_entries([entry.as_entry() for entry in found])
            + "\nsearch_knowledge(query) finds more past experience.")
