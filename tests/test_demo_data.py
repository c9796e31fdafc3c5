"""The demo corpus and its embedding snapshot agree with each other and with the embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from services.common.corpus import embedding_text, read_jsonl, row_from_arxiv, row_sha256
from services.embedder.backends import load_backend
from services.embedder.settings import EmbedderSettings

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"


def test_prebuilt_embeddings_are_the_embedders_vectors_for_demo_papers() -> None:
    data = np.load(DEMO / "embeddings-all-mpnet-base-v2.npz")
    ids = data["ids"].tolist()
    vectors = data["vectors"].astype(np.float32)
    assert len(ids) == len(set(ids)) == 10_000, "the snapshot covers the whole demo corpus"
    assert vectors.shape == (len(ids), 768)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=2e-3)

    rows = {r["id"]: row_from_arxiv(r) for r in read_jsonl(DEMO / "sample-10k.jsonl.gz")}
    assert set(ids) <= set(rows), "prebuilt ids must all be demo corpus papers"
    # Sync takes a snapshot vector only for an identical record: the hashes must be sync's own.
    assert str(data["model"]) == "all-mpnet-base-v2"
    assert data["sha256"].tolist() == [row_sha256(rows[i]) for i in ids]
    picks = np.random.default_rng(0).choice(len(ids), size=6, replace=False)
    backend = load_backend(EmbedderSettings(model="all-mpnet-base-v2", backend="onnx"))
    texts = [embedding_text(rows[ids[i]].title, rows[ids[i]].abstract) for i in picks]
    fresh = backend.embed(backend.tokenizer.encode(texts))
    shipped = vectors[picks] / np.linalg.norm(vectors[picks], axis=1, keepdims=True)
    cosines = np.sum(fresh * shipped, axis=1)
    assert cosines.min() >= 0.999, cosines
