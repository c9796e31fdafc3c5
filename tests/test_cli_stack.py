"""`citeweave up` starts every service as its own process; `citeweave sync` and `citeweave search`
go through them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from services.common.corpus import read_jsonl
from services.common.launcher import free_port

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo" / "sample-10k.jsonl.gz"
CLI = [sys.executable, "-m", "services.cli.main"]


@pytest.fixture(scope="module")
def stack_env(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("stack")
    embedder_port, retriever_port, sync_port = free_port(), free_port(), free_port()
    fetcher_port, generator_port = free_port(), free_port()
    (tmp / "pdfs").mkdir()
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "CITEWEAVE_EMBEDDER_PORT": str(embedder_port),
        "CITEWEAVE_EMBEDDER_MODEL": "all-MiniLM-L6-v2",
        "CITEWEAVE_RETRIEVER_PORT": str(retriever_port),
        "CITEWEAVE_RETRIEVER_MILVUS_URI": str(tmp / "store.db"),
        "CITEWEAVE_EMBEDDER_ADDR": f"127.0.0.1:{embedder_port}",
        "CITEWEAVE_RETRIEVER_ADDR": f"127.0.0.1:{retriever_port}",
        "CITEWEAVE_FETCHER_PORT": str(fetcher_port),
        "CITEWEAVE_FETCHER_ADDR": f"127.0.0.1:{fetcher_port}",
        "CITEWEAVE_FETCHER_CACHE_DIR": str(tmp / "pdf-cache"),
        # An empty local PDF directory: nothing here may reach arxiv.org.
        "CITEWEAVE_FETCHER_PDF_DIR": str(tmp / "pdfs"),
        "CITEWEAVE_GENERATOR_PORT": str(generator_port),
        "CITEWEAVE_GATEWAY_PORT": str(free_port()),
        "CITEWEAVE_GATEWAY_HTTP_PORT": str(free_port()),
        "CITEWEAVE_SYNC_PORT": str(sync_port),
        "CITEWEAVE_SYNC_ADDR": f"127.0.0.1:{sync_port}",
        "CITEWEAVE_SYNC_STATE_DIR": str(tmp / "sync-state"),
        "CITEWEAVE_SYNC_TOPIC_MODEL_DIR": str(tmp / "topics"),
        "LOG_DIR": str(tmp / "logs"),
    }


@pytest.fixture(scope="module")
def stack(stack_env):
    up = subprocess.Popen(
        [*CLI, "up", "--log-dir", stack_env["LOG_DIR"], "--timeout-s", "300"],
        env=stack_env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = up.stdout.readline()
    if line.strip() != "ready":
        up.kill()
        pytest.fail(f"citeweave up did not become ready: {line!r} {up.stderr.read()}")
    yield up
    if up.poll() is None:
        up.send_signal(signal.SIGTERM)
        up.wait(60)


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_up_sync_search_and_stop(stack, stack_env, tmp_path) -> None:
    synced = run_cli(["sync", str(DEMO), "--limit", "60", "--json"], stack_env)
    assert synced.returncode == 0, synced.stderr
    summary = json.loads(synced.stdout)
    assert summary["counts"]["new"] == summary["counts"]["upserted"] == 60
    assert "missing ids are not computed for a run with a limit" not in synced.stdout
    again = run_cli(["sync", str(DEMO), "--limit", "60"], stack_env)
    assert again.returncode == 0 and "unchanged" in again.stderr and "│ 60" in again.stderr

    corpus = {r["id"]: r["title"] for _, r in zip(range(60), read_jsonl(DEMO))}
    abstract = tmp_path / "abstract.txt"
    abstract.write_text(next(iter(read_jsonl(DEMO)))["abstract"])
    found = run_cli(["search", "--abstract-file", str(abstract), "--breadth", "5", "--json"], stack_env)
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    longlist = result["longlist"]
    assert len(longlist) == 15
    assert all(p["id"] in corpus and p["title"] == " ".join(corpus[p["id"]].split()) for p in longlist)
    # The paper whose own abstract is the query comes first.
    assert longlist[0]["id"] == next(iter(corpus))
    scores = [p["score"] for p in longlist]
    assert scores == sorted(scores, reverse=True), "at diversity 0 the longlist is plain top-k"

    short = run_cli(["shortlist", "--abstract-file", str(abstract), "--breadth", "5", "--json"],
                    stack_env)
    assert short.returncode == 0, short.stderr
    shortlisted = json.loads(short.stdout)["shortlist"]
    assert len(shortlisted) == 5 and shortlisted[0]["id"] == next(iter(corpus))
    # No PDF in the directory: every paper judged on its abstract, and the reason says why.
    assert all(p["text_source"] == "abstract_only" and p["fallback_reason"] for p in shortlisted)

    bad = run_cli(["search", "--abstract-file", str(abstract), "--breadth", "30"], stack_env)
    assert bad.returncode == 1
    assert "INVALID_ARGUMENT" in bad.stderr and "breadth" in bad.stderr and "20" in bad.stderr

    no_topics = run_cli(["topics", "list"], stack_env)
    assert no_topics.returncode == 1
    assert "FAILED_PRECONDITION" in no_topics.stderr and "citeweave topics fit" in no_topics.stderr

    stack.send_signal(signal.SIGTERM)
    assert stack.wait(60) == 0
    down = run_cli(["search", "--abstract-file", str(abstract)], stack_env)
    assert down.returncode == 1 and "citeweave up" in down.stderr


def test_search_and_sync_report_a_missing_file(stack_env, tmp_path) -> None:
    for args in (["search", "--abstract-file", str(tmp_path / "nope.txt")],
                 ["sync", str(tmp_path / "nope.jsonl")]):
        result = run_cli(args, stack_env)
        assert result.returncode == 1
        assert "does not exist" in result.stderr
