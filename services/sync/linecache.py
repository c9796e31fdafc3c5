"""The line cache: which raw source lines the store already holds, so a resync need not parse them.

Parsing and hashing a Kaggle arXiv line costs ~45 us in Python; a 64-bit blake2b of the raw bytes
costs ~1 us. After a sync that read a whole source, the cache keeps, for every line whose row is
stored, digest(line) -> (id, first 64 bits of the row's sha256). The next sync looks each line's
digest up; on a hit it compares the cached hash prefix with the hash the store reports for that
id (ListHashes), and only a line that is not in the cache or whose stored hash differs is parsed.

The store stays the truth: a cache entry only says "this exact line parses to a row with this
hash", which holds as long as the parser does, so the file name carries the source format and
corpus.HASH_VERSION (bump it whenever parsing or hashing changes). A missing, stale or damaged
cache costs speed, never correctness. About 60 bytes per paper on disk.
"""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

import numpy as np

from services.common.corpus import HASH_VERSION

log = logging.getLogger("citeweave.sync.linecache")

Entries = dict[int, tuple[str, int]]


def cache_path(state_dir: Path, format_name: str, shard_tag: str = "") -> Path:
    return state_dir / f"line-cache-{format_name}-v{HASH_VERSION}{shard_tag}.npz"


def load(path: Path) -> Entries:
    if not path.exists():
        return {}
    try:
        with np.load(path, allow_pickle=False) as data:
            digests = data["digests"].tolist()
            prefixes = data["prefixes"].tolist()
            ids = bytes(data["ids"]).decode("utf-8").split("\n") if len(digests) else []
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        log.warning("line cache unreadable; every line is parsed", extra={"path": str(path), "error": str(exc)})
        return {}
    if not (len(digests) == len(prefixes) == len(ids)):
        log.warning("line cache inconsistent; every line is parsed", extra={"path": str(path)})
        return {}
    return dict(zip(digests, zip(ids, prefixes)))


def save(path: Path, entries: Entries) -> None:
    """Atomically replaces the cache (ids never contain newlines: control characters are refused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    ids = "\n".join(record_id for record_id, _ in entries.values()).encode("utf-8")
    np.savez(
        tmp,
        digests=np.fromiter(entries.keys(), dtype=np.uint64, count=len(entries)),
        prefixes=np.fromiter((p for _, p in entries.values()), dtype=np.uint64, count=len(entries)),
        ids=np.frombuffer(ids, dtype=np.uint8),
    )
    os.replace(tmp, path)
