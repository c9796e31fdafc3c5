"""Prebuilt embedding snapshots: vectors made earlier by our embedder, reused when nothing changed.

File format (.npz, written by scripts/build_demo_embeddings.py):
  ids      (n,)   str      corpus ids
  sha256   (n,)   str      row_sha256 of each record when it was embedded
  vectors  (n, d) float16  L2-normalized embeddings of embedding_text(title, abstract)
  model    ()     str      the embedding model's name
A record takes its vector from the snapshot only when its id and sha256 both match and the
running embedder serves the snapshot's model; anything else is embedded for real.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from services.common.errors import InvalidArgument, NotFound

FIELDS = ("ids", "sha256", "vectors", "model")


class Snapshot:
    def __init__(self, model: str, ids: np.ndarray, hashes: np.ndarray, vectors: np.ndarray):
        self.model = model
        self.dimension = int(vectors.shape[1])
        self._index = {paper_id: i for i, paper_id in enumerate(ids.tolist())}
        self._hashes = hashes
        self._vectors = vectors

    def __len__(self) -> int:
        return len(self._index)

    @classmethod
    def load(cls, path: Path) -> "Snapshot":
        if not path.is_absolute():
            raise InvalidArgument(f"snapshot path {str(path)!r} is relative; give an absolute path")
        if not path.is_file():
            raise NotFound(f"snapshot {path} does not exist (on the sync service's filesystem)")
        try:
            with np.load(path, allow_pickle=False) as data:
                absent = [f for f in FIELDS if f not in data.files]
                if absent:
                    raise InvalidArgument(
                        f"snapshot {path} lacks {', '.join(absent)}; it needs {', '.join(FIELDS)}"
                    )
                ids, hashes, vectors = data["ids"], data["sha256"], data["vectors"]
                model = str(data["model"])
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise InvalidArgument(f"snapshot {path} is not a readable .npz file: {exc}") from None
        if vectors.ndim != 2 or not (len(ids) == len(hashes) == len(vectors)):
            raise InvalidArgument(
                f"snapshot {path} is inconsistent: {len(ids)} ids, {len(hashes)} hashes, "
                f"vectors of shape {vectors.shape}"
            )
        return cls(model, ids, hashes, vectors)

    def vector(self, paper_id: str, sha256: str) -> np.ndarray | None:
        """The stored vector when this exact record (id and hash) was embedded, else None."""
        i = self._index.get(paper_id)
        if i is None or self._hashes[i] != sha256:
            return None
        vector = self._vectors[i].astype(np.float32)
        return vector / np.linalg.norm(vector)
