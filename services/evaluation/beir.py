"""A BEIR-style retrieval dataset: corpus.jsonl, queries.jsonl, qrels.tsv in one folder.

Accepted field names: `id` or BEIR's `_id`; `abstract` or BEIR's `text` for the document body.
qrels.tsv has three tab-separated columns (query id, document id, relevance) with or without a
header line, as BEIR writes qrels/test.tsv (a `qrels/` folder of one tsv is accepted too).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson


class DatasetError(ValueError):
    """A dataset folder that cannot be evaluated; the message says what to fix."""


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    abstract: str


@dataclass
class Dataset:
    root: Path
    documents: list[Document]
    queries: dict[str, str]  # id -> text, only queries with at least one relevant document
    qrels: dict[str, dict[str, int]]
    skipped_queries: int = 0  # no relevant document judged
    unknown_qrels: int = 0  # judgements naming a document that is not in the corpus
    notes: list[str] = field(default_factory=list)


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{path}:{number}: expected a JSON object per line")
            yield number, record


def _id(record: dict, path: Path, number: int) -> str:
    value = record.get("id", record.get("_id"))
    if value is None or str(value).strip() == "":
        raise DatasetError(f"{path}:{number}: no `id` (or `_id`) field")
    return str(value).strip()


def _documents(path: Path) -> list[Document]:
    documents, seen = [], set()
    for number, record in _records(path):
        doc_id = _id(record, path, number)
        if doc_id in seen:
            raise DatasetError(f"{path}:{number}: document id {doc_id!r} appears twice")
        seen.add(doc_id)
        body = record.get("abstract", record.get("text")) or ""
        documents.append(Document(doc_id, str(record.get("title") or ""), str(body)))
    if not documents:
        raise DatasetError(f"{path} has no documents")
    return documents


def _queries(path: Path) -> dict[str, str]:
    queries = {}
    for number, record in _records(path):
        text = str(record.get("text") or "").strip()
        if not text:
            raise DatasetError(f"{path}:{number}: query without `text`")
        queries[_id(record, path, number)] = text
    return queries


def _qrels_path(root: Path) -> Path:
    if (root / "qrels.tsv").is_file():
        return root / "qrels.tsv"
    found = sorted((root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
    if len(found) == 1:
        return found[0]
    raise DatasetError(
        f"{root} has no qrels.tsv (query id, document id, relevance; tab-separated)"
    )


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row or not "".join(row).strip():
                continue
            if len(row) < 3:
                raise DatasetError(f"{path}:{number}: expected query id, document id, relevance")
            query_id, doc_id, grade = (cell.strip() for cell in row[:3])
            try:
                relevance = int(float(grade))
            except ValueError:
                if number == 1:
                    continue  # the header line
                raise DatasetError(f"{path}:{number}: relevance {grade!r} is not a number") from None
            qrels.setdefault(query_id, {})[doc_id] = relevance
    return qrels


def load(root: Path) -> Dataset:
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root} is not a folder")
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (root / name).is_file():
            raise DatasetError(f"{root} has no {name}")
    qrels_path = _qrels_path(root)
    documents = _documents(root / "corpus.jsonl")
    all_queries = _queries(root / "queries.jsonl")
    all_qrels = _qrels(qrels_path)
    corpus_ids = {d.id for d in documents}
    unknown = sum(1 for judged in all_qrels.values() for doc in judged if doc not in corpus_ids)
    queries = {
        q: text for q, text in all_queries.items()
        if any(grade > 0 for grade in all_qrels.get(q, {}).values())
    }
    if not queries:
        raise DatasetError(
            f"no query of {root / 'queries.jsonl'} has a relevant document in the qrels; "
            "check that their ids match"
        )
    dataset = Dataset(
        root=root, documents=documents, queries=queries,
        qrels={q: all_qrels[q] for q in queries},
        skipped_queries=len(all_queries) - len(queries), unknown_qrels=unknown,
    )
    if dataset.skipped_queries:
        dataset.notes.append(f"{dataset.skipped_queries} queries have no relevant document and are skipped")
    if unknown:
        dataset.notes.append(f"{unknown} judgements name documents missing from the corpus")
    return dataset
