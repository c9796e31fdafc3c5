"""Depth end to end through real services: an abstract or a whole PDF in, a shortlist with chosen
pages out. Embedder (MiniLM), retriever (Milvus Lite) and fetcher run as processes; the fetcher
downloads the fixture PDFs from a LocalArxiv on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from citeweave.retriever.v1 import retriever_pb2
from tests.conftest import running_service
from tests.gateway.gateway_stack import (
    PDFS,
    QUERY,
    REPO,
    arxiv_fixture_papers,
    fixture_papers,
    store_corpus,
)
from services.fetcher.local_arxiv import LocalArxiv
from services.gateway.depth import ABSTRACT_ONLY, FULL_TEXT, DepthOptions
from services.gateway.peers import Peers
from services.gateway.pipeline import abstract_input, pdf_input, run_to_shortlist

# Served by the mirror but never answers in time: the timeout fallback.
STALLING_ID = "0704.0002"


@pytest.fixture(scope="module")
def stack(minilm_embedder, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("depth")
    with LocalArxiv() as arxiv:
        for paper in arxiv_fixture_papers():
            arxiv.add(paper["id"], title=paper["title"], abstract=paper["abstract"],
                      pdf=PDFS / paper["file"])
        arxiv.add(STALLING_ID, pdf=PDFS / arxiv_fixture_papers()[0]["file"])
        arxiv.stall[STALLING_ID] = 60.0
        with running_service("retriever", tmp, {
            "milvus_uri": str(tmp / "store.db"), "embedder_addr": minilm_embedder.addr,
            "write_settle_delay_s": "0.2",
        }) as retriever, running_service("fetcher", tmp, {
            "arxiv_api_url": arxiv.api_url, "pdf_url_template": arxiv.pdf_url_template,
            "arxiv_delay_s": "0", "cache_dir": str(tmp / "pdf-cache"),
            "download_timeout_s": "3", "download_retries": "0",
        }) as fetcher:
            store_corpus(minilm_embedder.addr, retriever.addr)
            yield {"embedder": minilm_embedder.addr, "retriever": retriever.addr,
                   "fetcher": fetcher.addr, "arxiv": arxiv}


def _run(stack, options: DepthOptions, abstract: str | None = None, pdf: Path | None = None,
         events: list | None = None):
    async def go():
        peers = Peers.connect(stack["embedder"], stack["retriever"], stack["fetcher"])
        try:
            if pdf is not None:
                query = await pdf_input(peers, pdf.read_bytes(), pdf.name, 120)
            else:
                query = await abstract_input(peers, abstract, 120)
            progress = (lambda *event: events.append(event)) if events is not None else None
            return await run_to_shortlist(peers, query, options, progress=progress)
        finally:
            await peers.close()

    return asyncio.run(go())


def test_abstract_in_shortlist_out_with_chosen_pages(stack):
    arxiv = stack["arxiv"]
    arxiv.reset_counters()
    events: list = []
    result = _run(stack, DepthOptions(breadth=5, depth=2), abstract=QUERY, events=events)
    longlist = result.shortlist.longlist
    assert len(longlist) == 15 and len(result.shortlist.papers) == 5
    with_pdf = {p["id"] for p in arxiv_fixture_papers()}
    by_id = {p.id: p for p in longlist}
    assert with_pdf <= set(by_id), "the five fixture papers with PDFs are in the longlist"

    page_counts = {p["id"]: None for p in arxiv_fixture_papers()}
    for paper in longlist:
        if paper.id in with_pdf:
            assert paper.text_source == FULL_TEXT, paper.fallback_reason
            assert len(paper.pages) == 2
            assert all(page.text and page.number >= 1 for page in paper.pages)
            expected = np.mean([paper.scored.similarity, *(c.similarity for c in paper.pages)])
            assert paper.score == pytest.approx(expected, abs=1e-6)
            page_counts[paper.id] = paper.kept_pages
        else:
            assert paper.text_source == ABSTRACT_ONLY and paper.fallback_reason
            assert paper.score == pytest.approx(paper.scored.similarity)
            assert not paper.pages
    # Filtering ran: SPECTER's 13 pages keep no reference pages beyond the partial one.
    assert page_counts["2004.07180"] <= 9
    # The shortlist is the best `breadth` by the depth score.
    scores = [p.score for p in result.shortlist.papers]
    assert scores == sorted(scores, reverse=True)
    assert min(scores) >= max(p.score for p in longlist if p not in result.shortlist.papers)
    # One download per paper the mirror has a PDF for; progress counted every paper.
    assert all(arxiv.pdf_requests(i) == 1 for i in with_pdf)
    fetch_events = [e for e in events if e[0] == "fetching"]
    assert [e[1] for e in fetch_events] == list(range(1, 16))
    assert events[-1][0] == "shortlist"


def test_second_run_reads_the_cache_and_gives_the_same_shortlist(stack):
    options = DepthOptions(breadth=5, depth=2)
    first = _run(stack, options, abstract=QUERY)
    stack["arxiv"].reset_counters()
    second = _run(stack, options, abstract=QUERY)
    assert stack["arxiv"].pdf_requests() == 0 or all(
        stack["arxiv"].pdf_requests(p["id"]) == 0 for p in arxiv_fixture_papers()
    )
    full = [p for p in second.shortlist.longlist if p.text_source == FULL_TEXT]
    assert full and all(p.from_cache for p in full)
    assert [p.id for p in second.shortlist.papers] == [p.id for p in first.shortlist.papers]


def test_sequential_and_parallel_agree(stack):
    parallel = _run(stack, DepthOptions(breadth=5, depth=3, diversity=0.3), abstract=QUERY)
    sequential = _run(stack, DepthOptions(breadth=5, depth=3, diversity=0.3, concurrency=1),
                      abstract=QUERY)
    assert [(p.id, [c.number for c in p.pages]) for p in parallel.shortlist.papers] == [
        (p.id, [c.number for c in p.pages]) for p in sequential.shortlist.papers
    ]


def test_unavailable_pdfs_fall_back_and_the_run_goes_on(stack):
    """404 (distractors the mirror has no PDF for), a stalling download (timeout) and a
    non-arXiv id the fetcher cannot fetch: each judged on its abstract, with the reason."""
    result = _run(stack, DepthOptions(breadth=20, depth=1), abstract=QUERY)
    reasons = {p.id: p.fallback_reason for p in result.shortlist.longlist
               if p.text_source == ABSTRACT_ONLY}
    assert STALLING_ID in reasons and "3" in reasons[STALLING_ID].lower()
    assert any("404" in r or "not found" in r.lower() for r in reasons.values())
    doi = next(i for i in reasons if i.startswith("10."))
    assert "arXiv id" in reasons[doi]
    assert len(result.shortlist.papers) == 20
    warned = {w.split(":")[0] for w in result.shortlist.warnings}
    assert warned == {p.id for p in result.shortlist.papers if p.text_source == ABSTRACT_ONLY}


@pytest.mark.parametrize("aggregation", [retriever_pb2.PAGE_AGGREGATION_SUM,
                                         retriever_pb2.PAGE_AGGREGATION_MAX])
def test_full_paper_input_searches_with_every_page(stack, aggregation):
    longeval = next(p for p in fixture_papers() if p["id"] == "2301.13298")
    result = _run(stack, DepthOptions(breadth=5, depth=2, page_aggregation=aggregation),
                  pdf=PDFS / longeval["file"])
    query = result.query
    assert query.kind == "pdf" and len(query.vectors) == len(query.page_numbers) > 5
    assert result.longlist.query_count == len(query.page_numbers)
    assert result.longlist.page_aggregation == aggregation
    first = result.longlist.papers[0]
    assert first.paper.id == "2301.13298", "a paper's own abstract is closest to its pages"
    assert len(first.query_similarities) == len(query.page_numbers)
    shortlisted = {p.id: p for p in result.shortlist.papers}
    assert "2301.13298" in shortlisted and len(shortlisted["2301.13298"].pages) == 2


def test_bad_pdf_input_is_invalid_argument(stack):
    with pytest.raises(grpc.RpcError) as caught:
        _run_pdf_bytes(stack, b"this is not a PDF at all")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "PDF" in caught.value.details()


def _run_pdf_bytes(stack, data: bytes):
    async def go():
        peers = Peers.connect(stack["embedder"], stack["retriever"], stack["fetcher"])
        try:
            return await pdf_input(peers, data, "notes.txt", 60)
        finally:
            await peers.close()

    return asyncio.run(go())


def test_shortlist_cli_json(stack, tmp_path):
    abstract = tmp_path / "abstract.txt"
    abstract.write_text(QUERY)
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "shortlist", "--abstract-file", str(abstract),
         "--breadth", "5", "--depth", "1", "--json",
         "--embedder-addr", stack["embedder"], "--retriever-addr", stack["retriever"],
         "--fetcher-addr", stack["fetcher"]],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["longlist_size"] == 15 and len(out["shortlist"]) == 5
    for paper in out["shortlist"]:
        assert paper["text_source"] in (FULL_TEXT, ABSTRACT_ONLY)
        assert len(paper["pages"]) == (1 if paper["text_source"] == FULL_TEXT else 0)


def test_shortlist_cli_rejects_two_inputs(tmp_path):
    pdf = PDFS / fixture_papers()[0]["file"]
    done = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "shortlist", "--abstract-file", str(pdf),
         "--pdf", str(pdf)], capture_output=True, text=True, timeout=60, cwd=REPO,
    )
    assert done.returncode == 1
    assert "exactly one of --abstract-file and --pdf" in done.stderr
