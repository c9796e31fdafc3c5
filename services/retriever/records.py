"""Papers between protobuf and Milvus rows: validation, safe truncation, filter expressions."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

import numpy as np

from citeweave.retriever.v1 import retriever_pb2
from services.common.errors import InvalidArgument

# Field limits of the collection schema. Milvus counts VARCHAR lengths in UTF-8 bytes.
ID_BYTES = 128
TITLE_BYTES = 4096
ABSTRACT_BYTES = 65535
AUTHOR_BYTES = 512
MAX_AUTHORS = 2048  # collaborations exceed 1,000 authors; the tail is dropped beyond this
CATEGORY_BYTES = 64
MAX_CATEGORIES = 64
DATE_BYTES = 10
SHA_BYTES = 64
URL_BYTES = 2048

SCALAR_FIELDS = (
    "id", "title", "abstract", "authors", "year", "date", "categories", "topic", "sha256", "url",
)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def truncate_utf8(text: str, limit: int) -> str:
    """At most `limit` UTF-8 bytes, never cutting a character in half."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore")


def parse_date(value: str, name: str) -> str:
    """'' or a valid ISO 'YYYY-MM-DD'; the fixed width is what makes string comparison correct."""
    if value == "":
        return ""
    try:
        if len(value) != 10:
            raise ValueError
        dt.date.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{name} must be an ISO date YYYY-MM-DD, got {value!r}") from None
    return value


def check_vector(
    values: Sequence[float], dimension: int, what: str, expected: str = "the store's dimension is"
) -> np.ndarray:
    """float32 array of `dimension` finite values, not all zero; INVALID_ARGUMENT otherwise."""
    vector = np.asarray(values, dtype=np.float32)
    if vector.shape != (dimension,):
        raise InvalidArgument(f"{what} has {vector.shape[0]} values; {expected} {dimension}")
    if not np.all(np.isfinite(vector)):
        raise InvalidArgument(f"{what} contains NaN or infinite values")
    if not np.any(vector):
        raise InvalidArgument(f"{what} is all zeros; cosine similarity is undefined for it")
    return vector


def row_from_record(record: retriever_pb2.PaperRecord, dimension: int) -> dict:
    """A Milvus row, or INVALID_ARGUMENT naming the id. Long text is cut, the vector normalized."""
    paper = record.paper
    if not paper.id.strip():
        raise InvalidArgument("every record needs a non-empty paper.id")
    label = f"record {paper.id!r}"
    if len(paper.id.encode("utf-8")) > ID_BYTES:
        raise InvalidArgument(f"{label}: id is longer than {ID_BYTES} bytes")
    if any(ord(ch) < 0x20 for ch in paper.id):
        # Ids are matched in filter expressions (Get, Delete), which cannot carry these.
        raise InvalidArgument(f"{label}: id contains control characters")
    vector = check_vector(record.vector, dimension, f"{label}: vector")
    sha = paper.sha256.lower()
    if sha and not _SHA256.match(sha):
        raise InvalidArgument(f"{label}: sha256 must be 64 hex characters, got {paper.sha256!r}")
    date = parse_date(paper.date, f"{label}: date")
    # Stored unit-length so that the vectors Get/Search hand back are what the proto promises.
    vector = vector / np.linalg.norm(vector)
    return {
        "id": paper.id,
        "title": truncate_utf8(paper.title, TITLE_BYTES),
        "abstract": truncate_utf8(paper.abstract, ABSTRACT_BYTES),
        "authors": [truncate_utf8(a, AUTHOR_BYTES) for a in paper.authors[:MAX_AUTHORS]],
        "year": int(paper.year),
        "date": date,
        "categories": [truncate_utf8(c, CATEGORY_BYTES) for c in paper.categories[:MAX_CATEGORIES]],
        "topic": int(paper.topic),
        "sha256": sha,
        "url": truncate_utf8(paper.url, URL_BYTES),
        "vector": vector.tolist(),
    }


def rows_from_request(records: Sequence[retriever_pb2.PaperRecord], dimension: int) -> list[dict]:
    rows = [row_from_record(r, dimension) for r in records]
    seen: set[str] = set()
    for row in rows:
        # Two rows for one id in a batch would leave which one wins to the store; refuse instead.
        if row["id"] in seen:
            raise InvalidArgument(f"record {row['id']!r} appears more than once in the request")
        seen.add(row["id"])
    return rows


def paper_from_row(row: dict) -> retriever_pb2.Paper:
    return retriever_pb2.Paper(
        id=row["id"],
        title=row.get("title") or "",
        abstract=row.get("abstract") or "",
        authors=list(row.get("authors") or []),
        year=int(row.get("year") or 0),
        date=row.get("date") or "",
        categories=list(row.get("categories") or []),
        topic=int(row.get("topic", -1)),
        sha256=row.get("sha256") or "",
        url=row.get("url") or "",
    )


def literal(text: str) -> str:
    """A double-quoted Milvus expression string literal."""
    if any(ord(ch) < 0x20 for ch in text):
        raise InvalidArgument(f"filter value {text!r} contains control characters")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def filter_expression(search_filter: retriever_pb2.SearchFilter) -> str:
    """Milvus boolean expression for a SearchFilter; '' when nothing is filtered."""
    clauses: list[str] = []
    if search_filter.categories:
        values = ", ".join(literal(c) for c in search_filter.categories)
        clauses.append(f"array_contains_any(categories, [{values}])")
    if search_filter.topics:
        clauses.append(f"topic in [{', '.join(str(int(t)) for t in search_filter.topics)}]")
    date_from = parse_date(search_filter.date_from, "filter.date_from")
    date_to = parse_date(search_filter.date_to, "filter.date_to")
    if date_from and date_to and date_from > date_to:
        raise InvalidArgument(f"filter.date_from {date_from} is after filter.date_to {date_to}")
    if date_from or date_to:
        # Papers with an unknown date ('') never match a date range; '' would sort first.
        clauses.append('date != ""')
    if date_from:
        clauses.append(f"date >= {literal(date_from)}")
    if date_to:
        clauses.append(f"date <= {literal(date_to)}")
    return " and ".join(clauses)
