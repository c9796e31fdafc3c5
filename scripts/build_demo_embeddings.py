"""Builds data/demo/embeddings-all-mpnet-base-v2.npz, the demo corpus's embedding snapshot.

The format is the one `citeweave sync --snapshot` reads (services/sync/snapshot.py): ids, the
sha256 of each record as sync computes it, fp16 vectors, the model name. `--partial` writes only
the chunks finished so far (sync embeds the rest live).

Uses the embedder's own ONNX backend (the path the service runs on CPU), so the vectors are the
ones the service would return, and `make demo` needs no half hour of CPU embedding.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from services.common.corpus import (  # noqa: E402
    embedding_text, read_jsonl, row_from_arxiv, row_sha256,
)
from services.embedder.backends import load_backend  # noqa: E402
from services.embedder.models import MPNET  # noqa: E402
from services.embedder.settings import EmbedderSettings  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo"
BATCH = 16
# Finished chunks are kept here, so an interrupted build resumes instead of starting over.
PARTS = Path(os.environ.get("CITEWEAVE_CACHE_DIR", Path.home() / ".cache" / "citeweave")) / "demo-embedding-parts"
CHUNK = 64 * BATCH


def main() -> int:
    partial = "--partial" in sys.argv[1:]
    rows = [row_from_arxiv(r) for r in read_jsonl(DEMO / "sample-10k.jsonl.gz")]
    backend = load_backend(EmbedderSettings(model=MPNET, backend="onnx"))
    tokens = backend.tokenizer.encode([embedding_text(r.title, r.abstract) for r in rows])
    # Batches of similar length waste little compute on padding.
    order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
    vectors = np.zeros((len(rows), backend.spec.dimension), dtype=np.float32)
    PARTS.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for first in tqdm(range(0, len(order), CHUNK), unit="chunk"):
        chunk = order[first : first + CHUNK]
        part = PARTS / f"{MPNET}-{len(rows)}-{first:06d}.npy"
        if partial and not part.exists():
            # Keep only finished chunks; sync embeds the other papers live.
            order = order[:first]
            break
        if not part.exists():
            embedded = np.concatenate(
                [backend.embed([tokens[i] for i in chunk[o : o + BATCH]])
                 for o in range(0, len(chunk), BATCH)]
            )
            np.save(part.with_suffix(".tmp.npy"), embedded)
            part.with_suffix(".tmp.npy").rename(part)
        vectors[chunk] = np.load(part)
    print(f"{len(order)} texts ready in {time.monotonic() - start:.0f}s", file=sys.stderr)
    keep = sorted(order)
    np.savez(
        DEMO / f"embeddings-{MPNET}.npz",
        ids=np.array([rows[i].id for i in keep]),
        sha256=np.array([row_sha256(rows[i]) for i in keep]),
        vectors=vectors[keep].astype(np.float16),
        model=np.array(MPNET),
    )
    print(f"wrote {len(keep)} of {len(rows)} embeddings", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
