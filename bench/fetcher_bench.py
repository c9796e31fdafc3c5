"""Fetcher benchmark: page extraction rate, and the depth stage for a 30-paper longlist fetched
from a local mirror, parallel against sequential.

1. Extraction (`pages_per_s`). `extract_pdf` (text, heading detection, filtering) over every page
   of the fixture PDFs (tests/fixtures/pdfs, 72 pages of real papers), in this process, best of
   `rounds`. Baseline (`baseline_pages_per_s`): plain `page.get_text()` of the same pages, what
   the original code extracted with no filtering. The ratio is the price of filtering.
2. Depth stage (`parallel_s`, `sequential_s`). Real processes on free 127.0.0.1 ports: an
   embedder, a retriever (for SelectPassages; its store stays empty) and a fetcher with its PDF
   cache off, so every run downloads every PDF. The PDFs come from a LocalArxiv that waits
   `latency_s` before each answer, as a distant server does (arXiv answers a PDF request in
   roughly 0.3-1 s). The longlist is `papers` arXiv ids, each served one of the five arXiv
   fixture PDFs in turn, with the similarity of the paper's own abstract to the query. One
   `DepthStage.run` (fetch, extract, embed the kept pages, SelectPassages, score) is timed at
   the client with 16 papers in flight (`parallel_s`, the pipeline's default) and with 1
   (`sequential_s`, Citegeist's one-after-another); `parallel_speedup` is their ratio. A first,
   unmeasured run embeds the pages (`cold_parallel_s`); the timed runs find them in the
   embedder's cache, so they time fetching, extraction and selection, which is what
   parallelism changes: embedding is CPU-bound and no faster in parallel on this machine.
   Each mode runs `repeats` times, interleaved, and the median is reported.

`citeweave bench fetcher --json` prints the dict `run()` returns as the last line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.output import dumps
from bench.services import start_service
from citeweave.retriever.v1 import retriever_pb2
from services.common.launcher import REPO, ServiceProcess
from services.fetcher.extraction import extract_pdf
from services.fetcher.local_arxiv import LocalArxiv
from services.gateway.depth import DepthOptions, DepthStage
from services.gateway.peers import Peers

FIXTURES = REPO / "tests" / "fixtures" / "pdfs"
SAMPLE_ABSTRACT = REPO / "data" / "demo" / "sample-abstract.txt"
PARALLEL = 16


def _log(message: str) -> None:
    print(f"[fetcher-bench] {message} (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def _fixture_pdfs() -> list[Path]:
    return sorted(FIXTURES.glob("*.pdf"))


def extraction_rates(rounds: int) -> dict:
    import pymupdf

    blobs = [p.read_bytes() for p in _fixture_pdfs()]
    pages = sum(pymupdf.open(stream=b, filetype="pdf").page_count for b in blobs)

    def best(fn) -> float:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for blob in blobs:
                fn(blob)
            times.append(time.perf_counter() - start)
        return pages / min(times)

    def plain(blob: bytes) -> None:
        with pymupdf.open(stream=blob, filetype="pdf") as doc:
            for page in doc:
                page.get_text()

    ours = best(lambda blob: extract_pdf(blob, 1000))
    baseline = best(plain)
    return {
        "pdfs": len(blobs),
        "pages": pages,
        "pages_per_s": round(ours, 1),
        "baseline_pages_per_s": round(baseline, 1),
        "filtering_cost_ratio": round(baseline / ours, 2),
    }


def _longlist_ids(papers: int) -> list[str]:
    return [f"2401.{10000 + i:05d}" for i in range(papers)]


def _arxiv_pdfs() -> list[Path]:
    return [p for p in _fixture_pdfs() if not p.name.startswith("noarxiv")]


async def _longlist(peers: Peers, ids: list[str], query: np.ndarray) -> list:
    """ScoredPapers with the cosine of each paper's abstract (the first page of the PDF the
    mirror serves for it, as the fixtures have no separate record) to the query."""
    pdfs = _arxiv_pdfs()
    first_pages = [extract_pdf(p.read_bytes(), 1000).pages[0].text[:2000] for p in pdfs]
    vectors = await peers.embed([first_pages[i % len(pdfs)] for i in range(len(ids))], 600)
    return [
        retriever_pb2.ScoredPaper(paper=retriever_pb2.Paper(id=i), similarity=float(v @ query[0]),
                                  rank=rank)
        for rank, (i, v) in enumerate(zip(ids, vectors), start=1)
    ]


async def _depth_runs(addrs: tuple[str, str, str], ids: list[str], repeats: int,
                      depth: int) -> dict:
    peers = Peers.connect(*addrs)
    try:
        query = await peers.embed([SAMPLE_ABSTRACT.read_text().strip()], 600)
        longlist = await _longlist(peers, ids, query)

        async def timed(concurrency: int) -> tuple[float, list]:
            stage = DepthStage(peers, DepthOptions(breadth=10, depth=depth,
                                                   concurrency=concurrency))
            start = time.perf_counter()
            result = await stage.run(query, longlist)
            return time.perf_counter() - start, result.longlist

        cold, deep = await timed(PARALLEL)
        failed = [p.id for p in deep if p.text_source != "full_text"]
        if failed:
            raise RuntimeError(f"papers fell back to their abstract: {failed}: "
                               f"{deep[0].fallback_reason}")
        _log(f"cold run (pages embedded): {cold:.2f} s")
        parallel, sequential = [], []
        for r in range(repeats):
            parallel.append((await timed(PARALLEL))[0])
            sequential.append((await timed(1))[0])
            _log(f"repeat {r + 1}: parallel {parallel[-1]:.2f} s, sequential {sequential[-1]:.2f} s")
        pages = sum(p.kept_pages for p in deep)
        return {"cold_parallel_s": round(cold, 3), "parallel": parallel,
                "sequential": sequential, "kept_pages": pages}
    finally:
        await peers.close()


def run(papers: int = 30, latency_s: float = 0.5, repeats: int = 3, rounds: int = 5,
        depth: int = 2, model: str = "all-mpnet-base-v2",
        max_concurrent_downloads: int = 8) -> dict:
    _log("extraction rates")
    result: dict = {"load_avg_1m_at_start": round(os.getloadavg()[0], 2)}
    result.update(extraction_rates(rounds))
    ids = _longlist_ids(papers)
    arxiv_pdfs = _arxiv_pdfs()
    with tempfile.TemporaryDirectory(prefix="citeweave-fetcher-bench-") as tmp_name, \
            LocalArxiv(delay_s=latency_s) as arxiv:
        tmp = Path(tmp_name)
        for i, paper_id in enumerate(ids):
            arxiv.add(paper_id, pdf=arxiv_pdfs[i % len(arxiv_pdfs)])
        services: list[ServiceProcess] = []
        try:
            _log(f"starting embedder ({model}), retriever, fetcher")
            embedder = start_service("embedder", {"model": model}, tmp / "embedder.log")
            services.append(embedder)
            services.append(retriever := start_service("retriever", {
                "milvus_uri": str(tmp / "store.db"), "embedder_addr": embedder.addr,
                "lexical_index": "false",
            }, tmp / "retriever.log"))
            services.append(fetcher := start_service("fetcher", {
                "pdf_url_template": arxiv.pdf_url_template, "arxiv_api_url": arxiv.api_url,
                "cache_dir": str(tmp / "pdf-cache"), "cache_max_mb": "0",
                "max_concurrent_downloads": str(max_concurrent_downloads),
            }, tmp / "fetcher.log"))
            runs = asyncio.run(_depth_runs(
                (embedder.addr, retriever.addr, fetcher.addr), ids, repeats, depth
            ))
        finally:
            for service in reversed(services):
                service.stop()
    parallel_s = statistics.median(runs["parallel"])
    sequential_s = statistics.median(runs["sequential"])
    result.update({
        "papers": papers,
        "depth": depth,
        "latency_s": latency_s,
        "concurrency": PARALLEL,
        "max_concurrent_downloads": max_concurrent_downloads,
        "model": model,
        "kept_pages": runs["kept_pages"],
        "repeats": repeats,
        "cold_parallel_s": runs["cold_parallel_s"],
        "parallel_s": round(parallel_s, 3),
        "sequential_s": round(sequential_s, 3),
        "parallel_runs_s": [round(v, 3) for v in runs["parallel"]],
        "sequential_runs_s": [round(v, 3) for v in runs["sequential"]],
        "parallel_speedup": round(sequential_s / parallel_s, 2),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    })
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=30)
    parser.add_argument("--latency-s", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="all-mpnet-base-v2")
    args = parser.parse_args(argv)
    print(dumps(run(args.papers, args.latency_s, args.repeats, model=args.model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
