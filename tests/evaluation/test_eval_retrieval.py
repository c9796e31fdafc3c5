"""`citeweave eval retrieval` end to end: real services on free ports, a tiny BEIR folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ABSTRACTS = {
    "p-graph": ("Graph neural networks for molecules",
                "Message passing networks predict quantum chemical properties of small molecules."),
    "p-bm25": ("Probabilistic relevance framework",
               "The BM25 ranking function weighs term frequency against document length."),
    "p-mt": ("Neural machine translation",
             "An encoder-decoder with attention translates English sentences into German."),
    "p-rl": ("Deep reinforcement learning for Atari",
             "A convolutional Q-network learns to play video games from raw pixels."),
    "p-proof": ("Automated theorem proving",
                "Resolution provers search for refutations of first-order clauses."),
    "p-vision": ("Residual learning for image recognition",
                 "Skip connections let very deep convolutional networks train on ImageNet."),
    "p-crypto": ("Lattice-based cryptography",
                 "Learning with errors yields public-key encryption believed secure against quantum computers."),
    "p-db": ("Query optimization in relational databases",
             "Cost-based optimizers choose join orders using cardinality estimates."),
    "p-speech": ("End-to-end speech recognition",
                 "Connectionist temporal classification aligns audio frames with transcripts."),
    "p-rec": ("Collaborative filtering for recommendation",
              "Matrix factorization of the user-item matrix predicts unseen ratings."),
}
# Each query is the planted paper's abstract word for word.
QUERIES = {f"q-{pid}": pid for pid in ("p-graph", "p-bm25", "p-crypto", "p-db", "p-rec")}
METHODS = "bm25,dense,mmr,hybrid,hybrid-rrf,hybrid-weighted:0.5,lexical,mmr:0.5"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("beir")
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": pid, "title": title, "text": text}) + "\n"
        for pid, (title, text) in ABSTRACTS.items()
    ))
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": qid, "text": ABSTRACTS[pid][1]}) + "\n" for qid, pid in QUERIES.items()
    ))
    (root / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{p}\t1\n" for q, p in QUERIES.items())
    )
    return root


def _eval(dataset: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("CITEWEAVE_EMBEDDER_DISK_CACHE", None)
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", "eval", "retrieval", str(dataset),
         "--k", "3", "--model", "all-MiniLM-L6-v2", "--embedding-cache", str(cache), *extra],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )


def test_every_method_ranks_the_planted_paper_first_and_a_rerun_embeds_nothing(dataset, tmp_path):
    cache = tmp_path / "embeddings.sqlite3"
    first = _eval(dataset, cache, "--methods", METHODS, "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    results = json.loads(first.stdout)
    assert list(results) == METHODS.split(",")
    for method, figures in results.items():
        assert set(figures) == {"recall@3", "ndcg@10", "mrr@3", "median_latency_ms"}, method
        # The planted paper is the only relevant one and ranks first for every query.
        assert figures["mrr@3"] == 1.0, method
        assert figures["recall@3"] == 1.0 and figures["ndcg@10"] == pytest.approx(1.0), method
        assert figures["median_latency_ms"] > 0, method
    assert re.search(r"5 queries over 10 stored of 10 documents", first.stderr)
    assert re.search(r"embedder: 15 texts embedded, 0 from cache", first.stderr)

    again = _eval(dataset, cache, "--methods", "dense,hybrid", "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "embedder: 0 texts embedded, 15 from cache" in again.stderr
    assert json.loads(again.stdout)["dense"] == results["dense"] | {
        "median_latency_ms": json.loads(again.stdout)["dense"]["median_latency_ms"]}


def test_a_broken_dataset_fails_before_starting_anything(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"id": "a", "abstract": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"id": "q", "text": "x"}\n')
    result = _eval(tmp_path, tmp_path / "c.sqlite3")
    assert result.returncode == 2
    assert "has no qrels.tsv" in result.stderr
    assert "starting embedder" not in result.stderr


def test_an_unknown_method_is_named(dataset, tmp_path):
    result = _eval(dataset, tmp_path / "c.sqlite3", "--methods", "dense,splade")
    assert result.returncode == 2
    assert "unknown method 'splade'" in result.stderr
