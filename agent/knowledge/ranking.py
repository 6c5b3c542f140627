"""Finding the right past and what the model reads of it: stored entries ranked by the problem's signature, the
meaning of their text (sentence embeddings, agent.knowledge.embeddings) and, with a query, BM25; then formatted
in a few KB.

    ranked = rank(stored, signature, query, limit=5, problem=about)   # signature + meaning (+ BM25 with a query)
    text = format_entries(ranked)                                      # what the model reads

A stored entry may carry "embedding", its entry_text's vector, so it is not embedded again for every ranking.
"""
from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rank_bm25 import BM25L

from agent.knowledge.embeddings import DIMENSIONS, EMBEDDER, Embedder

from agent.engine.verdict import Status
from agent.knowledge.signature import Signature, clip, op_structure, ops_text


# What the model reads from one search or at the start: a few KB, next to many turns of its own.
FORMAT_CHARS = 4000
ENTRY_FORMAT_CHARS = 900

NO_ENTRIES = ("The knowledge base has no entries relevant to this yet; rely on the skills (read_skill) and your "
              "own measurements.")

# How much each part of a signature counts in `signature_similarity` (they add up to 1). The op structure (the
# dominant kind of work: a GEMM, a convolution, a normalization, ...) outweighs all the rest together, so an entry
# about another kind of problem never ranks above one about the same kind (a GEMM run is not served swish).
STRUCTURE_WEIGHT, OPS_WEIGHT, SHAPES_WEIGHT, DTYPES_WEIGHT, DEVICE_WEIGHT = 0.50, 0.15, 0.10, 0.05, 0.20
# With a query, text similarity counts as much as the problem's likeness.
TEXT_WEIGHT = 0.5
# Sentence embeddings (agent.knowledge.embeddings), where installed. The problem's likeness is its signature's, with this share
# given to the meaning of the problem's text against the entry's: small, so the kind of work still decides and the
# meaning orders entries within it (docstrings and op names say more than the AST's op set alone).
PROBLEM_MEANING_WEIGHT = 0.25
# A query's relevance is BM25 (its words) with this share given to its meaning, which finds entries worded
# otherwise ("fewer passes over memory" -> a fusion entry that never says "pass"); BM25 still carries exact
# identifiers (__shfl_xor_sync, cp.async) that a general-purpose sentence model blurs.
QUERY_MEANING_WEIGHT = 0.7
# all-MiniLM-L6-v2's cosines on our entries: unrelated texts land around 0-0.2, paraphrases around 0.3-0.7. A cosine
# at the floor counts nothing; the pool's best counts 1 once it reaches MEANING_FULL (see _meaning).
MEANING_FLOOR, MEANING_FULL = 0.15, 0.45


@dataclass
class Scored:
    entry: Mapping[str, Any]
    score: float
    signature_score: float
    text_score: float
    """The query's BM25 similarity, scaled so the best entry has 1; 0 without a query."""
    problem_meaning: float | None = None
    """How near the entry's text is to the problem's (problem_text) in meaning, in [0, 1] (_meaning); None without
    embeddings."""
    query_meaning: float | None = None
    """How near the entry's text is to the query in meaning, in [0, 1]; None without embeddings or a query."""


def rank(entries: Sequence[Mapping[str, Any]], signature: Signature, query: str = "", limit: int = 5, *,
         device: str | None = None, min_score: float = 0.0, min_likeness: float = 0.0, problem: str = "",
         embedder: Embedder | None = EMBEDDER) -> list[Mapping[str, Any]]:
    """The `limit` entries most relevant to a problem (and to a query, when given), most relevant first. An entry
    must score `min_score` and its signature alone (device included) `min_likeness`."""
    return [s.entry for s in scored(entries, signature, query, device=device, problem=problem, embedder=embedder)
            if s.score >= min_score and s.signature_score >= min_likeness][:limit]


def scored(entries: Sequence[Mapping[str, Any]], signature: Signature, query: str = "", *,
           device: str | None = None, problem: str = "", embedder: Embedder | None = EMBEDDER) -> list[Scored]:
    """Every entry with its score, best first. The problem's likeness is the signature similarity, with
    PROBLEM_MEANING_WEIGHT given to the cosine of `problem` (problem_text) with the entry's text; with a query,
    the score averages that likeness with the query's relevance: BM25, with QUERY_MEANING_WEIGHT given to the
    query's cosine with the entry's text. Without embeddings (`embedder` None or not installed) the cosines drop
    out and their weights with them. Ties go to accepted, faster entries."""
    asked = bool(query.strip())
    texts = text_scores(entries, query)
    # No entries, nothing to compare: the model is not loaded for an empty pool.
    vectors = entry_vectors(entries, embedder) if embedder is not None and entries and (problem.strip() or asked) else None
    near = _meaning(vectors, problem, embedder)
    meant = _meaning(vectors, query, embedder) if asked else None
    results = []
    for i, (entry, text) in enumerate(zip(entries, texts)):
        likeness = signature_similarity(signature, Signature.from_dict(entry.get("signature")))
        if device is not None:
            likeness += DEVICE_WEIGHT * (entry.get("device") == device)
        alike = likeness if near is None else (1 - PROBLEM_MEANING_WEIGHT) * likeness + PROBLEM_MEANING_WEIGHT * near[i]
        relevance = text if meant is None else (1 - QUERY_MEANING_WEIGHT) * text + QUERY_MEANING_WEIGHT * meant[i]
        score = (1 - TEXT_WEIGHT) * alike + TEXT_WEIGHT * relevance if asked else alike
        results.append(Scored(entry, score, likeness, text, None if near is None else near[i],
                              None if meant is None else meant[i]))
    results.sort(key=lambda s: (s.score, s.entry.get("status") == Status.ACCEPTED.value,
                                s.entry.get("speedup_vs_eager") or 0.0), reverse=True)
    return results


def entry_vectors(entries: Sequence[Mapping[str, Any]], embedder: Embedder = EMBEDDER) -> np.ndarray | None:
    """Each entry's embedding, one row each: the one it carries (stored when it was recorded), else its entry_text
    embedded now; None without embeddings. The cosines (_meaning) are taken in numpy over the caller's bounded pool:
    the studio's Postgres has no pgvector, and a few thousand 384-float dot products take milliseconds."""
    missing = [i for i, e in enumerate(entries) if not _is_vector(e.get("embedding"))]
    fresh = embedder.embed([entry_text(entries[i]) for i in missing]) if missing else []
    if fresh is None or (not missing and not embedder.available()):
        return None
    computed = dict(zip(missing, fresh))
    return np.asarray([computed[i] if i in computed else e["embedding"] for i, e in enumerate(entries)],
                      dtype=np.float32).reshape(len(entries), DIMENSIONS)


def _is_vector(value: Any) -> bool:
    # Stored by us (or None): the length says whether it is this model's; a hand-edited row fails in numpy, loudly.
    return isinstance(value, list) and len(value) == DIMENSIONS


def _meaning(vectors: np.ndarray | None, text: str, embedder: Embedder | None) -> list[float] | None:
    """The text's cosine with each entry, in [0, 1]: MEANING_FLOOR and under is 0 (unrelated); above it, scaled by the
    pool's best as BM25 is, but never by less than MEANING_FULL's: the best of a pool of unrelated entries stays
    weak, or the search's bar (apps.knowledge) would let it through. None without vectors or text."""
    if vectors is None or embedder is None or not text.strip():
        return None
    query = embedder.embed_query(text)
    if query is None:
        return None
    similar = np.maximum(vectors @ np.asarray(query, dtype=np.float32) - MEANING_FLOOR, 0.0)
    scale = max(float(similar.max(initial=0.0)), MEANING_FULL - MEANING_FLOOR)
    return [float(c) / scale for c in similar]


def signature_similarity(a: Signature, b: Signature) -> float:
    """In [0, 1 - DEVICE_WEIGHT]: the op structure first (the same dominant kind of work, op_structure), then the
    ops by Jaccard, then shapes and dtypes input by input (the device is scored by the caller, which knows it)."""
    ops_a, ops_b = set(a.ops), set(b.ops)
    ops = len(ops_a & ops_b) / len(ops_a | ops_b) if ops_a | ops_b else 0.0
    kind_a, kind_b = op_structure(ops_a), op_structure(ops_b)
    structure = float(bool(kind_a) and kind_a == kind_b)
    return STRUCTURE_WEIGHT * structure + OPS_WEIGHT * ops + \
        SHAPES_WEIGHT * _positional(a.shapes, b.shapes, _shape_similarity) + \
        DTYPES_WEIGHT * _positional(a.dtypes, b.dtypes, lambda x, y: float(x is not None and x == y))


def _positional(a: list[Any], b: list[Any], similar: Callable[[Any, Any], float]) -> float:
    """Inputs compared in order; a missing input counts 0."""
    if not a or not b:
        return 0.0
    return sum(similar(x, y) for x, y in zip(a, b)) / max(len(a), len(b))


def _shape_similarity(a: list[int | None] | None, b: list[int | None] | None) -> float:
    """Half for the same rank, half for the size: 1 when equal, 0.5 at 16x apart, falling slowly after."""
    if a is None or b is None:
        return 0.0
    same_rank = 0.5 * (len(a) == len(b))
    if None in a or None in b:
        return same_rank
    numel_a, numel_b = math.prod(a), math.prod(b)  # type: ignore[arg-type]
    if numel_a <= 0 or numel_b <= 0:
        return same_rank + 0.5 * (numel_a == numel_b)
    return same_rank + 0.5 / (1 + abs(math.log2(numel_a / numel_b)) / 4)


def text_scores(entries: Sequence[Mapping[str, Any]], query: str) -> list[float]:
    """BM25 (the BM25L variant: it stays positive on corpora of one or two entries, where Okapi's idf turns
    negative) of the query against each entry's text, scaled so the best match is 1; 0 with no match."""
    terms = tokens(query)
    documents = [tokens(entry_text(e)) for e in entries]
    if not terms or not any(documents):
        return [0.0] * len(entries)
    raw = BM25L(documents).get_scores(terms)
    top = float(max(raw))
    return [float(s) / top if top > 0 else 0.0 for s in raw]


def entry_text(entry: Mapping[str, Any]) -> str:
    """What an entry says, for BM25 and for its embedding: title, body, ops and kind of work, backend, status."""
    signature = Signature.from_dict(entry.get("signature"))
    return " ".join(part for part in (str(entry.get("title") or ""), str(entry.get("body") or ""),
                                      ops_text(signature.ops), str(entry.get("backend") or ""),
                                      str(entry.get("status") or "")) if part)


def tokens(text: str) -> list[str]:
    """Lowercase words; underscores split too, so __shfl_xor_sync matches a query for "shfl". A plural's "s"
    goes, so "shuffles" matches "shuffle"; a crude stem, but applied alike to queries and entries."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words]


# ---------------------------------------------------------------------------------- what the model reads

def format_entries(entries: Sequence[Mapping[str, Any]], limit: int = FORMAT_CHARS) -> str:
    """Numbered entries, most relevant first, capped to `limit` characters; NO_ENTRIES when there are none."""
    if not entries:
        return NO_ENTRIES
    lines = [f"Knowledge base: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} from past runs, most relevant first."]
    used = len(lines[0])
    for number, entry in enumerate(entries, 1):
        body = textwrap.indent(clip(str(entry.get("body") or "").strip(), ENTRY_FORMAT_CHARS), "   ")
        block = f"{number}. {entry.get('title') or 'untitled'}" + (f"\n{body}" if body.strip() else "")
        if used + len(block) > limit:
            lines.append(f"({len(entries) - number + 1} more not shown: search with a narrower query)")
            break
        lines.append(block)
        used += len(block) + 1
    return "\n".join(lines)
