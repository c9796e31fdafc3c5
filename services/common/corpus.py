"""Corpus records: parsing arXiv metadata lines and the text that gets embedded for a paper."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_ARXIV_NEW = re.compile(r"^\d{4}\.\d{4,5}(v\d+)?$")
_ARXIV_OLD = re.compile(r"^[a-z\-]+(\.[A-Z]{2})?/\d{7}(v\d+)?$")


def is_arxiv_id(paper_id: str) -> bool:
    return bool(_ARXIV_NEW.match(paper_id) or _ARXIV_OLD.match(paper_id))


def clean(text: str) -> str:
    """Collapses the hard line wraps and runs of whitespace of arXiv metadata."""
    return " ".join(text.split())


def embedding_text(title: str, abstract: str) -> str:
    """What is embedded for a paper. Sync and the demo corpus must agree on it."""
    return f"{clean(title)}. {clean(abstract)}"


@dataclass
class PaperRow:
    id: str
    title: str
    abstract: str
    authors: list[str] = field(default_factory=list)
    year: int = 0
    date: str = ""
    categories: list[str] = field(default_factory=list)
    url: str = ""


def _authors(record: dict) -> list[str]:
    parsed = record.get("authors_parsed")
    if parsed:
        return [" ".join(p for p in (first, last) if p).strip() for last, first, *_ in parsed]
    raw = record.get("authors") or ""
    if isinstance(raw, list):
        return [clean(a) for a in raw if a]
    return [clean(a) for a in re.split(r",\s*|\s+and\s+", raw) if a.strip()]


def row_from_arxiv(record: dict) -> PaperRow:
    """A Kaggle arxiv-metadata-oai-snapshot record as a stored row."""
    versions = record.get("versions") or []
    date = record.get("update_date") or ""
    year = int(date[:4]) if date[:4].isdigit() else 0
    if versions:
        # The first version's date is the publication date a citation should carry.
        created = versions[0].get("created", "")
        match = re.search(r"\b(\d{4})\b", created)
        if match:
            year = int(match.group(1))
    return PaperRow(
        id=str(record["id"]),
        title=clean(record.get("title") or ""),
        abstract=clean(record.get("abstract") or ""),
        authors=_authors(record),
        year=year,
        date=date,
        categories=(record.get("categories") or "").split(),
    )


def read_jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as raw, io.TextIOWrapper(raw, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def row_sha256(row: PaperRow) -> str:
    """SHA-256 over a canonical serialization of every field that is stored for a paper.

    Key order is fixed and text is whitespace-normalized, so re-serializing the same metadata
    (different key order, different line wrapping) does not count as a change.
    """
    canonical = json.dumps(
        {
            "id": row.id,
            "title": clean(row.title),
            "abstract": clean(row.abstract),
            "authors": [clean(a) for a in row.authors],
            "year": row.year,
            "date": row.date,
            "categories": sorted(row.categories),
            "url": row.url,
        },
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
