"""Builds data/demo/embeddings-all-mpnet-base-v2.npz, the demo corpus's prebuilt embeddings.

Computed with plain sentence-transformers (the reference the embedder service is checked
against), so the demo needs no hour of CPU embedding on a fresh machine.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from sentence_transformers import SentenceTransformer  # noqa: E402

from services.common.corpus import embedding_text, read_jsonl, row_from_arxiv  # noqa: E402
from services.embedder.models import MPNET, model_path  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"


def main() -> int:
    rows = [row_from_arxiv(r) for r in read_jsonl(DEMO / "sample-10k.jsonl.gz")]
    model = SentenceTransformer(str(model_path(MPNET)), device="cpu")
    texts = [embedding_text(r.title, r.abstract) for r in rows]
    start = time.monotonic()
    vectors = model.encode(
        texts, batch_size=32, normalize_embeddings=True, show_progress_bar=True,
        convert_to_numpy=True,
    )
    print(f"{len(texts)} texts in {time.monotonic() - start:.0f}s", file=sys.stderr)
    np.savez(
        DEMO / f"embeddings-{MPNET}.npz",
        ids=np.array([r.id for r in rows]),
        vectors=vectors.astype(np.float16),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
