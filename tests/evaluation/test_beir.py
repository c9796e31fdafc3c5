"""Loading BEIR-style folders, and the errors a person gets for broken ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.evaluation import beir
from services.evaluation.retrieval_eval import parse_methods


def _write(root: Path, corpus: list[dict], queries: list[dict], qrels: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels.tsv").write_text(qrels)
    return root


def test_beir_field_names_headers_and_unjudged_queries(tmp_path):
    root = _write(
        tmp_path / "d",
        [{"_id": "a", "title": "T", "text": "body a"}, {"id": "b", "abstract": "body b"}],
        [{"_id": "q1", "text": "find a"}, {"id": "q2", "text": "nothing judged"},
         {"id": "q3", "text": "only irrelevant"}],
        "query-id\tcorpus-id\tscore\nq1\ta\t2\nq3\tb\t0\nq1\tghost\t1\n",
    )
    dataset = beir.load(root)
    assert [(d.id, d.title, d.abstract) for d in dataset.documents] == [
        ("a", "T", "body a"), ("b", "", "body b")]
    assert dataset.queries == {"q1": "find a"}
    assert dataset.qrels == {"q1": {"a": 2, "ghost": 1}}
    assert (dataset.skipped_queries, dataset.unknown_qrels) == (2, 1)
    assert any("2 queries have no relevant document" in n for n in dataset.notes)


@pytest.mark.parametrize(
    "corpus,queries,qrels,message",
    [
        ("", "", "", "has no documents"),
        ('{"id": "a", "abstract": "x"}\n{"id": "a", "abstract": "y"}\n', "", "", "appears twice"),
        ('{"title": "no id"}\n', "", "", "no `id` (or `_id`) field"),
        ('{"id": "a"\n', "", "", "corpus.jsonl:1: not JSON"),
        ('{"id": "a", "abstract": "x"}\n', '{"id": "q"}\n', "", "query without `text`"),
        ('{"id": "a", "abstract": "x"}\n', '{"id": "q", "text": "t"}\n', "q\ta\n",
         "expected query id, document id, relevance"),
        ('{"id": "a", "abstract": "x"}\n', '{"id": "q", "text": "t"}\n', "q\ta\t1\nq\ta\thigh\n",
         "relevance 'high' is not a number"),
        ('{"id": "a", "abstract": "x"}\n', '{"id": "q", "text": "t"}\n', "other\ta\t1\n",
         "no query of"),
    ],
)
def test_broken_folders_say_what_is_wrong(tmp_path, corpus, queries, qrels, message):
    root = tmp_path / "d"
    root.mkdir()
    (root / "corpus.jsonl").write_text(corpus)
    (root / "queries.jsonl").write_text(queries)
    (root / "qrels.tsv").write_text(qrels)
    with pytest.raises(beir.DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        beir.load(root)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(beir.DatasetError, match="is not a folder"):
        beir.load(tmp_path / "absent")
    (tmp_path / "corpus.jsonl").write_text("")
    with pytest.raises(beir.DatasetError, match="has no queries.jsonl"):
        beir.load(tmp_path)
    (tmp_path / "queries.jsonl").write_text("")
    with pytest.raises(beir.DatasetError, match="has no qrels.tsv"):
        beir.load(tmp_path)


def test_method_specs():
    methods = parse_methods("bm25, dense,mmr,mmr:0.4,hybrid-weighted:0.25,hybrid-rrf", 0.1)
    assert [m.name for m in methods] == [
        "bm25", "dense", "mmr", "mmr:0.4", "hybrid-weighted:0.25", "hybrid-rrf"]
    assert (methods[2].diversity, methods[3].diversity) == (0.1, 0.4)
    assert methods[4].lexical_weight == 0.25
    for bad, message in [("nope", "unknown method 'nope'"), ("mmr:2", "between 0 and 1"),
                         ("dense,dense", "given twice"), ("", "no method given"),
                         ("hybrid-weighted:0", "plain dense search"), ("mmr:x", "not a number")]:
        with pytest.raises(ValueError, match=message):
            parse_methods(bad, 0.0)
