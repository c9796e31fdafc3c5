"""Corpus records: parsing source records into stored rows, their hash, the text that is embedded.

Two source formats: the Kaggle `arxiv-metadata-oai-snapshot` JSON lines, and a generic JSON-lines
corpus (`id`, `title`, `abstract`, optional `authors`, `year`, `url`, `date`, `categories`) for
bring-your-own corpora with DOIs or any other ids.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

# YYMM.NNNN (0704-1412) or YYMM.NNNNN (since 1501), optional version; group 1 is the id
# without version, group 2 the version.
ARXIV_NEW_STYLE = re.compile(r"^(\d{2}(?:0[1-9]|1[0-2])\.\d{4,5})(?:v([1-9]\d{0,3}))?$")
# archive(.XX)/YYMMNNN, e.g. hep-th/9901001, math.AG/0309136, cond-mat/0102536v2.
ARXIV_OLD_STYLE = re.compile(
    r"^([a-z]+(?:-[a-z]+)*(?:\.[A-Za-z]{2})?/\d{2}(?:0[1-9]|1[0-2])\d{3})(?:v([1-9]\d{0,3}))?$"
)
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_AUTHOR_SPLIT = re.compile(r",\s*|\s+and\s+")
_CONTROL = re.compile(r"[\x00-\x1f]")

# Limits of the store's schema (services/retriever/records.py) that a record cannot be cut to fit.
ID_BYTES = 128
# Bumped when the canonical serialization changes: every stored row then counts as changed once.
HASH_VERSION = 1


class BadRecord(ValueError):
    """A source record that cannot become a stored row; the message says why, for a person."""


_DOI = re.compile(r"^10\.\d{4,9}/\S+$")


def is_arxiv_id(paper_id: str) -> bool:
    return bool(ARXIV_NEW_STYLE.match(paper_id) or ARXIV_OLD_STYLE.match(paper_id))


def paper_link(paper_id: str, url: str = "") -> str:
    """A paper's page: arXiv's abstract page for arXiv ids, the corpus url, else doi.org for a
    DOI (maybe empty)."""
    if is_arxiv_id(paper_id):
        return f"https://arxiv.org/abs/{paper_id}"
    if not url and _DOI.match(paper_id):
        return f"https://doi.org/{paper_id}"
    return url


def clean(text: str) -> str:
    """Collapses the hard line wraps and runs of whitespace of arXiv metadata."""
    return " ".join(text.split())


def embedding_text(title: str, abstract: str) -> str:
    """What is embedded for a paper. Sync and the demo snapshot must agree on it."""
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


def _text(record: dict, key: str, required: bool) -> str:
    value = record.get(key)
    if value is None or value == "":
        if required:
            raise BadRecord(f"no {key}")
        return ""
    if not isinstance(value, str):
        raise BadRecord(f"{key} must be a string, got {type(value).__name__}")
    text = clean(value)
    if required and not text:
        raise BadRecord(f"{key} is blank")
    return text


def _id(record: dict) -> str:
    value = record.get("id")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise BadRecord("no id")
    paper_id = value.strip()
    if len(paper_id.encode("utf-8")) > ID_BYTES:
        raise BadRecord(f"id is longer than {ID_BYTES} bytes")
    if _CONTROL.search(paper_id):
        raise BadRecord("id contains control characters")
    return paper_id


def _authors(record: dict) -> list[str]:
    parsed = record.get("authors_parsed")
    if parsed:
        return [f"{first} {last}".strip() if first else last for last, first, *_ in parsed]
    raw = record.get("authors") or ""
    if isinstance(raw, list):
        if not all(isinstance(a, str) for a in raw):
            raise BadRecord("authors must be a list of strings or one string")
        return [clean(a) for a in raw if a.strip()]
    if not isinstance(raw, str):
        raise BadRecord("authors must be a list of strings or one string")
    return [clean(a) for a in _AUTHOR_SPLIT.split(raw) if a.strip()]


def _year(value: object) -> int:
    if value in (None, ""):
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        year = value
    elif isinstance(value, str) and value.strip().isdigit():
        year = int(value.strip())
    else:
        raise BadRecord(f"year must be a number, got {value!r}")
    if not 0 <= year <= 9999:
        raise BadRecord(f"year {year} is out of range")
    return year


def _date(value: object) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or not _ISO_DATE.match(value):
        raise BadRecord(f"date must be YYYY-MM-DD, got {value!r}")
    return value


def row_from_arxiv(record: dict) -> PaperRow:
    """A Kaggle arxiv-metadata-oai-snapshot record as a stored row."""
    paper_id = _id(record)
    date = _date(record.get("update_date"))
    year = int(date[:4]) if date else 0
    versions = record.get("versions") or []
    if versions:
        # The first version's date ("Mon, 2 Apr 2007 19:18:42 GMT") is the publication year a
        # citation should carry; update_date moves with every revision.
        parts = str(versions[0].get("created", "")).split()
        if len(parts) >= 4 and parts[3].isdigit():
            year = int(parts[3])
    categories = record.get("categories") or ""
    return PaperRow(
        id=paper_id,
        title=_text(record, "title", required=True),
        abstract=_text(record, "abstract", required=True),
        authors=_authors(record),
        year=year,
        date=date,
        categories=categories.split() if isinstance(categories, str) else list(categories),
    )


def row_from_jsonl(record: dict) -> PaperRow:
    """A generic bring-your-own-corpus record as a stored row."""
    categories = record.get("categories") or []
    if isinstance(categories, str):
        categories = categories.split()
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise BadRecord("categories must be a list of strings or one space-separated string")
    date = _date(record.get("date"))
    year = _year(record.get("year"))
    return PaperRow(
        id=_id(record),
        title=_text(record, "title", required=True),
        abstract=_text(record, "abstract", required=True),
        authors=_authors(record),
        year=year or (int(date[:4]) if date else 0),
        date=date,
        categories=categories,
        url=_text(record, "url", required=False),
    )


def read_jsonl(path: Path) -> Iterator[dict]:
    """Every record of a small, trusted JSON-lines file (tests, scripts). Sync reads sources with
    services/sync/sources.py, which survives bad lines."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as raw, io.TextIOWrapper(raw, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def row_sha256(row: PaperRow) -> str:
    """SHA-256 over a canonical serialization of every field that is stored for a paper.

    Fields in a fixed order, text already whitespace-normalized by the parsers, categories
    sorted: re-serializing the same metadata (another key order, other line wrapping) is not a
    change. Source fields that are not stored (comments, journal-ref, license...) are not hashed,
    so a change to them costs nothing. See docs/sync.md.
    """
    canonical = orjson.dumps(
        [HASH_VERSION, row.id, row.title, row.abstract, row.authors, row.year, row.date,
         sorted(row.categories), row.url]
    )
    return hashlib.sha256(canonical).hexdigest()
