"""Builds tests/fixtures/arxiv/ from ../shared/data/arxiv (run once; the output is committed).

slice-a.jsonl.gz  46 unchanged ids + the 14 ids changed between the snapshots, as snapshot A
                  (listings up to 2025-12-31) has them
slice-b.jsonl     the same 60 ids as the full file has them, plus the first 30 ids only it has
changed-ids-A-to-B.txt, kaggle-format-head200.jsonl   copied as they are
The tests then need nothing outside the repository.
"""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "arxiv"
OUT = REPO / "tests" / "fixtures" / "arxiv"
UNCHANGED, NEW = 46, 30


def main() -> int:
    changed = (SHARED / "changed-ids-A-to-B.txt").read_text().split()
    a_lines: dict[str, bytes] = {}
    kept = 0
    with gzip.open(SHARED / "snapshot-A-upto-2025-12-31.jsonl.gz", "rb") as lines:
        for line in lines:
            paper_id = orjson.loads(line)["id"]
            if paper_id in changed or kept < UNCHANGED:
                a_lines[paper_id] = line
                kept += paper_id not in changed
    b_lines: dict[str, bytes] = {}
    new = 0
    with gzip.open(SHARED / "arxiv-cs-74k.jsonl.gz", "rb") as lines:
        for line in lines:
            paper_id = orjson.loads(line)["id"]
            if paper_id in a_lines or (new < NEW and not _in_a(paper_id, a_lines)):
                b_lines[paper_id] = line
                new += paper_id not in a_lines
    OUT.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(OUT / "slice-a.jsonl.gz", "wb", mtime=0) as out:
        out.writelines(a_lines.values())
    (OUT / "slice-b.jsonl").write_bytes(b"".join(b_lines.values()))
    for name in ("changed-ids-A-to-B.txt", "kaggle-format-head200.jsonl"):
        shutil.copyfile(SHARED / name, OUT / name)
    print(f"slice A {len(a_lines)}, slice B {len(b_lines)} records -> {OUT}", file=sys.stderr)
    return 0


_A_IDS: set[str] | None = None


def _in_a(paper_id: str, _: dict) -> bool:
    """Whether snapshot A has the id at all (a new id must be new to A, not only to the slice)."""
    global _A_IDS
    if _A_IDS is None:
        with gzip.open(SHARED / "snapshot-A-upto-2025-12-31.jsonl.gz", "rb") as lines:
            _A_IDS = {orjson.loads(line)["id"] for line in lines}
    return paper_id in _A_IDS


if __name__ == "__main__":
    sys.exit(main())
