"""Interim corpus loader: arXiv metadata lines -> embedder -> retriever.Upsert.

It exists so the demo and tests have a filled store before the sync service lands (issue 3),
which replaces it with the incremental, crash-safe path. For the bundled demo corpus it uses the
prebuilt embeddings in data/demo when the running embedder serves the same model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path

import numpy as np

from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.clients import sync_channel
from services.common.corpus import (
    PaperRow,
    embedding_text,
    read_jsonl,
    row_from_arxiv,
    row_sha256,
)

REPO = Path(__file__).resolve().parents[2]
DEMO_CORPUS = REPO / "data" / "demo" / "sample-10k.jsonl.gz"


def prebuilt_embeddings(source: Path, model_name: str) -> dict[str, np.ndarray]:
    """Vectors shipped next to the source for this model, or {} when there are none."""
    path = source.parent / f"embeddings-{model_name}.npz"
    if not path.exists():
        return {}
    data = np.load(path)
    vectors = data["vectors"].astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return dict(zip(data["ids"].tolist(), vectors, strict=True))


def batched(rows: Iterable[PaperRow], size: int) -> Iterator[list[PaperRow]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


def to_record(row: PaperRow, vector: Iterable[float]) -> retriever_pb2.PaperRecord:
    return retriever_pb2.PaperRecord(
        paper=retriever_pb2.Paper(
            id=row.id,
            title=row.title,
            abstract=row.abstract,
            authors=row.authors,
            year=row.year,
            date=row.date,
            categories=row.categories,
            topic=-1,
            sha256=row_sha256(row),
            url=row.url,
        ),
        vector=list(vector),
    )


def load(
    source: Path,
    embedder_addr: str,
    retriever_addr: str,
    limit: int = 0,
    batch_size: int = 128,
    prebuilt_only: bool = False,
    on_batch: Callable[[int, int], None] = lambda done, embedded: None,
) -> dict[str, int]:
    """Loads `source` into the store; returns counts. on_batch(done, embedded) reports progress.

    prebuilt_only skips papers that have no prebuilt embedding instead of embedding them now."""
    with sync_channel(embedder_addr) as emb_channel, sync_channel(retriever_addr) as ret_channel:
        embedder = embedder_pb2_grpc.EmbedderServiceStub(emb_channel)
        retriever = retriever_pb2_grpc.RetrieverServiceStub(ret_channel)
        info = embedder.GetModelInfo(embedder_pb2.GetModelInfoRequest(), timeout=30)
        prebuilt = prebuilt_embeddings(source, info.model_name)
        rows = (row_from_arxiv(r) for r in read_jsonl(source))
        if limit:
            rows = islice(rows, limit)
        if prebuilt_only:
            rows = (row for row in rows if row.id in prebuilt)
        done = embedded = 0
        for batch in batched(rows, batch_size):
            missing = [row for row in batch if row.id not in prebuilt]
            vectors = {row.id: prebuilt[row.id] for row in batch if row.id in prebuilt}
            if missing:
                reply = embedder.Embed(
                    embedder_pb2.EmbedRequest(
                        texts=[embedding_text(r.title, r.abstract) for r in missing]
                    ),
                    timeout=600,
                )
                vectors.update({r.id: v.values for r, v in zip(missing, reply.vectors, strict=True)})
                embedded += len(missing)
            retriever.Upsert(
                retriever_pb2.UpsertRequest(records=[to_record(r, vectors[r.id]) for r in batch]),
                timeout=600,
            )
            done += len(batch)
            on_batch(done, embedded)
    return {"loaded": done, "embedded": embedded, "prebuilt": done - embedded}
