"""Pipeline benchmark: the whole related-work pipeline for one abstract, stage by stage, with
fetches and summaries in parallel (the gateway's defaults) against one at a time.

What runs. Real processes on free 127.0.0.1 ports: embedder, retriever (Milvus Lite, the demo
corpus imported through the sync service from its prebuilt snapshot, no vector computed), sync,
generator (extractive backend, no LLM) and, for every measured run, a fresh fetcher with an empty
PDF cache directory. PDFs come from a LocalArxiv mirror that waits `latency_s` before each answer
(0.5 s, fetcher_bench's choice; arXiv answers a PDF request in roughly 0.3-1 s), so what
parallelism buys is measured against waiting, as with arXiv. The sample abstract
(data/demo/sample-abstract.txt) is searched with breadth 10, depth 2: a longlist of 30 demo
papers, every one served a real PDF by the mirror (the seven fixture PDFs of tests/fixtures/pdfs,
reused in turn: 30 ids, 7 distinct files).

One run is one GenerateRelatedWork (breadth, depth, extractive backend) through the gateway's
core (services.gateway.core.Gateway, in this process: the gateway's gRPC and HTTP front ends only
forward its stream), timed at the caller; the stages are the result's timings: the abstract
embedded (`embedding`), `Search` (`longlist`), the depth stage (`fetching`: download, extraction,
page embedding, page selection, scoring; fetch_concurrency papers in flight), one Summarize per
shortlisted paper (`summarizing`, summary_concurrency in flight) and the streamed Synthesize
(`writing`). `parallel` uses the gateway's default fetch_concurrency and summary_concurrency (16
and 8); `sequential` sets both to 1. `parallel_speedup` is sequential / parallel over fetching +
summarizing, the two stages concurrency changes; `end_to_end_speedup` is the ratio of the totals.

Cold and warm. Every run gets a fresh fetcher (its PDF cache empty: every PDF is downloaded).
Two embedders serve the runs, both with their model loaded and used before anything is timed
(an untimed pipeline run through the second warms the retriever and the generator too). `cold`
(the headline figures) goes to one whose embedding cache is off (`cache_entries` 0): every page
text of all 30 papers, and the abstract, is embedded in every run, as for 30 papers nobody has
asked about before, although the mirror serves only 7 distinct PDFs.
`pages_cached` goes to one with its cache on that has already embedded every page: what a shared
endpoint costs for papers it has read before, and the condition `citeweave bench fetcher` times.
The texts each run embedded and took from the cache are read from the embedder's metrics and
reported per run. Both variants search the same longlist (checked). Each round runs every
(condition, variant) once, the variants' order alternating between rounds; medians are reported.

`citeweave bench pipeline --json` prints the dict `run()` returns as the last line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from bench.output import dumps
from bench.services import start_service
from citeweave.gateway.v1 import gateway_pb2 as gw
from citeweave.sync.v1 import sync_pb2
from services.cli.sync import run_sync, snapshot_beside
from services.common.launcher import REPO, ServiceProcess, free_port
from services.evaluation.harness import embedder_counters
from services.fetcher.local_arxiv import LocalArxiv
from services.gateway.convert import stage_name
from services.gateway.core import Gateway
from services.gateway.depth import PAGE_EMBED_CHARS, DepthOptions
from services.gateway.peers import Peers
from services.gateway.pipeline import abstract_input, search_request
from services.gateway.settings import GatewaySettings

DEMO_CORPUS = REPO / "data" / "demo" / "sample-10k.jsonl.gz"
SAMPLE_ABSTRACT = REPO / "data" / "demo" / "sample-abstract.txt"
FIXTURES = REPO / "tests" / "fixtures" / "pdfs"
STAGES = ("embedding", "longlist", "fetching", "summarizing", "writing")
# The stages whose work runs concurrently; the others are one call each.
CONCURRENT_STAGES = ("fetching", "summarizing")
VARIANTS = ("parallel", "sequential")
CONDITIONS = ("cold", "pages_cached")
TARGET_TOTAL_S = 10.0
TARGET_SPEEDUP = 3.0
CALL_TIMEOUT_S = 600.0


def _log(message: str) -> None:
    print(f"[pipeline-bench] {message} (load {os.getloadavg()[0]:.1f})", file=sys.stderr,
          flush=True)


def _gateway_default(name: str) -> int:
    # The parallel variant is what the gateway does unless configured otherwise.
    return int(GatewaySettings.model_fields[name].default)


@dataclass
class Stack:
    embedders: dict[str, ServiceProcess]  # condition -> embedder
    metrics_ports: dict[str, int]
    retriever: ServiceProcess
    generator: ServiceProcess


@dataclass
class Variant:
    name: str
    fetch_concurrency: int
    summary_concurrency: int


def _pdfs() -> list[Path]:
    return sorted(FIXTURES.glob("*.pdf"))


def _start_stack(tmp: Path, logs: Path, model: str, services: list[ServiceProcess]) -> Stack:
    """Everything but the fetchers; each started process is appended to `services` at once, so
    the caller stops it whatever fails later."""
    embedders, ports = {}, {}
    for condition in CONDITIONS:
        ports[condition] = free_port()
        settings = {"model": model, "metrics_port": str(ports[condition])}
        if condition == "cold":
            settings["cache_entries"] = "0"
        _log(f"starting embedder ({model}, {condition})")
        embedders[condition] = start_service("embedder", settings,
                                             logs / f"embedder-{condition}.log")
        services.append(embedders[condition])
    _log("starting retriever, generator, sync")
    retriever = start_service("retriever", {
        "milvus_uri": str(tmp / "store.db"), "embedder_addr": embedders["pages_cached"].addr,
        # Dense search only; a BM25 rebuild in the background would take CPU from timed runs.
        "lexical_index": "false",
    }, logs / "retriever.log")
    services.append(retriever)
    generator = start_service("generator", {"backend": "extractive"}, logs / "generator.log")
    services.append(generator)
    sync = start_service("sync", {
        "embedder_addrs": embedders["pages_cached"].addr, "retriever_addr": retriever.addr,
        "state_dir": str(tmp / "sync-state"),
    }, logs / "sync.log")
    services.append(sync)
    return Stack(embedders, ports, retriever, generator)


def _import_corpus(sync_addr: str, corpus: Path, snapshot: Path | None) -> int:
    options = sync_pb2.SyncOptions(snapshot_path=str(snapshot) if snapshot else "")
    request = sync_pb2.SyncRequest(source_path=str(corpus), options=options)
    summary, failures = run_sync(sync_addr, request, Console(stderr=True), show_progress=False,
                                 timeout_s=CALL_TIMEOUT_S)
    if failures:
        raise RuntimeError(f"importing {corpus}: {len(failures)} records failed, e.g. "
                           f"{failures[0].reason}")
    return int(summary.counts.upserted)


def _start_fetcher(tmp: Path, logs: Path, arxiv: LocalArxiv, label: str) -> ServiceProcess:
    return start_service("fetcher", {
        "pdf_url_template": arxiv.pdf_url_template, "arxiv_api_url": arxiv.api_url,
        "cache_dir": str(tmp / f"pdf-cache-{label}"),
    }, logs / f"fetcher-{label}.log")


async def _longlist_ids(embedder: str, retriever: str, abstract: str, options: DepthOptions,
                        ) -> list[str]:
    """The ids the runs will fetch, known before any run so the mirror can serve them."""
    # Peers wants a fetcher address; Search and Embed never reach it.
    peers = Peers.connect(embedder, retriever, embedder)
    try:
        query = await abstract_input(peers, abstract, CALL_TIMEOUT_S)
        reply = await peers.retriever.Search(search_request(query, options, None),
                                             timeout=CALL_TIMEOUT_S)
        return [p.paper.id for p in reply.papers]
    finally:
        await peers.close()


async def _warm_embedder(addr: str, texts: list[str]) -> None:
    peers = Peers.connect(addr, addr, addr)
    try:
        await peers.embed(texts, CALL_TIMEOUT_S)
    finally:
        await peers.close()


def _page_texts(pdf: Path, limit: int) -> list[str]:
    """Texts of page length, as the depth stage sends them."""
    import pymupdf

    with pymupdf.open(pdf) as doc:
        return [" ".join(page.get_text().split())[:PAGE_EMBED_CHARS] for page in doc][:limit]


async def _gateway_run(addrs: dict[str, str], abstract: str, breadth: int, depth: int,
                       variant: Variant) -> dict:
    """One GenerateRelatedWork through the gateway's core in this process (its gRPC and HTTP
    front ends only forward the stream), timed at the caller; the stages as the result's
    timings give them."""
    settings = GatewaySettings(
        port=0, http_port=0, embedder_addrs=addrs["embedder"], retriever_addr=addrs["retriever"],
        fetcher_addr=addrs["fetcher"], generator_addr=addrs["generator"],
        fetch_concurrency=variant.fetch_concurrency,
        summary_concurrency=variant.summary_concurrency, request_timeout_s=CALL_TIMEOUT_S,
    )
    request = gw.GenerateRelatedWorkRequest(
        abstract=abstract, options=gw.RetrievalOptions(breadth=breadth, depth=depth),
        backend=gw.GENERATOR_BACKEND_EXTRACTIVE,
    )
    gateway = Gateway(settings)
    try:
        start = time.perf_counter()
        result = None
        async for event in gateway.generate(request):
            if event.WhichOneof("event") == "result":
                result = event.result
        total = time.perf_counter() - start
    finally:
        await gateway.close()
    if result is None:
        raise RuntimeError("the gateway's stream ended without a result")
    if result.generation_error:
        raise RuntimeError(f"no section was written: {result.generation_error}")
    fell_back = [f"{p.paper.id}: {p.fallback_reason}" for p in result.longlist if p.abstract_only]
    if fell_back:
        raise RuntimeError(f"papers fell back to their abstract: {fell_back[:3]}")
    if not result.references:
        raise RuntimeError("the section cites nothing")
    stages = {stage_name(t.stage): t.duration_ms / 1000 for t in result.timings}
    missing = [s for s in STAGES if s not in stages]
    if missing:
        raise RuntimeError(f"the result has no timing for {missing}")
    return {
        "total_s": total,
        "stages_s": {s: stages[s] for s in STAGES},
        "longlist_ids": [p.paper.id for p in result.longlist],
        "shortlist": len(result.shortlist),
        "references": len(result.references),
        "section_chars": len(result.text),
    }


def _timed_run(tmp: Path, logs: Path, stack: Stack, arxiv: LocalArxiv, condition: str,
               variant: Variant, label: str, abstract: str, breadth: int, depth: int) -> dict:
    """A fresh fetcher (empty PDF cache), one pipeline run, the fetcher stopped again."""
    fetcher = _start_fetcher(tmp, logs, arxiv, label)
    try:
        before = embedder_counters(stack.metrics_ports[condition])
        arxiv.reset_counters()
        addrs = {"embedder": stack.embedders[condition].addr, "retriever": stack.retriever.addr,
                 "fetcher": fetcher.addr, "generator": stack.generator.addr}
        measured = asyncio.run(_gateway_run(addrs, abstract, breadth, depth, variant))
        after = embedder_counters(stack.metrics_ports[condition])
    finally:
        fetcher.stop()
    received, hits = after[0] - before[0], after[1] - before[1]
    measured.update({
        "condition": condition, "variant": variant.name,
        # Every page text of the longlist and the abstract, each sent once per run.
        "page_texts": received - 1,
        "texts_embedded": received - hits, "texts_from_cache": hits,
        "pdf_downloads": arxiv.pdf_requests(), "max_downloads_in_flight": arxiv.max_in_flight,
    })
    return measured


def _rounded(run: dict) -> dict:
    out = {k: round(v, 3) if isinstance(v, float) else v for k, v in run.items()
           if k != "longlist_ids"}
    out["stages_s"] = {s: round(v, 3) for s, v in run["stages_s"].items()}
    return out


def _summary(runs: list[dict]) -> dict:
    """Medians per variant and the speedups of one condition."""
    by_variant = {v: [r for r in runs if r["variant"] == v] for v in VARIANTS}
    out: dict = {}
    for variant, chosen in by_variant.items():
        out[variant] = {
            "total_s": round(statistics.median(r["total_s"] for r in chosen), 3),
            "stages_s": {s: round(statistics.median(r["stages_s"][s] for r in chosen), 3)
                         for s in STAGES},
            "runs_total_s": [round(r["total_s"], 3) for r in chosen],
            "texts_embedded": [r["texts_embedded"] for r in chosen],
            "texts_from_cache": [r["texts_from_cache"] for r in chosen],
            "max_downloads_in_flight": max(r["max_downloads_in_flight"] for r in chosen),
        }
    par, seq = out["parallel"], out["sequential"]

    def ratio(stage_names) -> float:
        return (sum(seq["stages_s"][s] for s in stage_names)
                / sum(par["stages_s"][s] for s in stage_names))

    out["parallel_speedup"] = round(ratio(CONCURRENT_STAGES), 2)
    out["fetching_speedup"] = round(ratio(("fetching",)), 2)
    out["summarizing_speedup"] = round(ratio(("summarizing",)), 2)
    out["end_to_end_speedup"] = round(seq["total_s"] / par["total_s"], 2)
    return out


def run(breadth: int = 10, depth: int = 2, latency_s: float = 0.5, rounds: int = 2,
        model: str = "all-mpnet-base-v2", corpus: Path | None = None,
        conditions: tuple[str, ...] = CONDITIONS, log_dir: Path | None = None) -> dict:
    """`corpus` None is the demo corpus imported from its snapshot; any other JSON-lines corpus is
    embedded for real by the sync (keep it small on a CPU). The services' logs go to `log_dir`
    (kept) or a temporary directory."""
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown or "cold" not in conditions:
        raise ValueError(f"conditions must include cold and be among {CONDITIONS}: {conditions}")
    corpus_path = (corpus or DEMO_CORPUS).resolve()
    snapshot = snapshot_beside(DEMO_CORPUS) if corpus is None else None
    abstract = SAMPLE_ABSTRACT.read_text().strip()
    variants = (
        Variant("parallel", _gateway_default("fetch_concurrency"),
                _gateway_default("summary_concurrency")),
        Variant("sequential", 1, 1),
    )
    result: dict = {"load_avg_1m_at_start": round(os.getloadavg()[0], 2)}
    started = time.perf_counter()
    runs: list[dict] = []
    services: list[ServiceProcess] = []
    with tempfile.TemporaryDirectory(prefix="citeweave-pipeline-bench-") as tmp_name, \
            LocalArxiv(delay_s=latency_s) as arxiv, ExitStack() as cleanup:
        tmp = Path(tmp_name)
        logs = log_dir or tmp
        cleanup.callback(lambda: [s.stop() for s in reversed(services)])
        stack = _start_stack(tmp, logs, model, services)
        sync = services[-1]
        _log(f"importing {corpus_path.name}" + (" from its snapshot" if snapshot else ""))
        corpus_papers = _import_corpus(sync.addr, corpus_path, snapshot)
        sync.stop()  # idle from here on; nothing of it should share the CPU with timed runs
        options = DepthOptions(breadth=breadth, depth=depth)
        ids = asyncio.run(_longlist_ids(stack.embedders["pages_cached"].addr,
                                        stack.retriever.addr, abstract, options))
        pdfs = _pdfs()
        for i, paper_id in enumerate(ids):
            arxiv.add(paper_id, pdf=pdfs[i % len(pdfs)])
        _log(f"longlist of {len(ids)} papers, served {len(pdfs)} distinct PDFs in turn")

        # Untimed: runs every code path of the retriever and the generator once, and fills the
        # pages_cached embedder's cache with every page text (one paper at a time, so a PDF
        # served for several ids is embedded once).
        warm = _timed_run(tmp, logs, stack, arxiv, "pages_cached", variants[1], "warm-up", abstract,
                          breadth, depth)
        _log(f"warm-up run: {warm['total_s']:.2f} s, {warm['texts_embedded']} texts embedded")
        # The cold embedder's first inferences (ONNX Runtime allocates on the first batches);
        # with its cache off, nothing of this can help a timed run.
        asyncio.run(_warm_embedder(stack.embedders["cold"].addr, _page_texts(pdfs[0], 8)))
        for r in range(rounds):
            order = variants if r % 2 == 0 else variants[::-1]
            for condition in conditions:
                for variant in order:
                    measured = _timed_run(tmp, logs, stack, arxiv, condition, variant,
                                          f"{condition}-{variant.name}-{r}", abstract, breadth,
                                          depth)
                    measured["round"] = r + 1
                    if measured["longlist_ids"] != ids:
                        raise RuntimeError("the longlist changed between runs")
                    runs.append(measured)
                    stages = ", ".join(f"{s} {measured['stages_s'][s]:.2f}" for s in STAGES)
                    _log(f"round {r + 1} {condition} {variant.name}: "
                         f"{measured['total_s']:.2f} s ({stages}); "
                         f"{measured['texts_embedded']} texts embedded, "
                         f"{measured['texts_from_cache']} from cache")
        kept_pages = runs[0]["page_texts"]

    summaries = {c: _summary([r for r in runs if r["condition"] == c]) for c in conditions}
    cold = summaries["cold"]
    result.update({
        "driver": "services.gateway.core.Gateway.generate in this process (no gateway gRPC "
                  "hop), over gRPC to the services",
        "breadth": breadth,
        "depth": depth,
        "longlist_size": len(ids),
        "corpus": str(corpus_path.relative_to(REPO) if corpus_path.is_relative_to(REPO)
                      else corpus_path),
        "corpus_papers": corpus_papers,
        "model": model,
        "generator_backend": "extractive",
        "latency_s": latency_s,
        "distinct_pdfs": len(pdfs),
        "kept_pages": kept_pages,
        "fetch_concurrency": variants[0].fetch_concurrency,
        "summary_concurrency": variants[0].summary_concurrency,
        "rounds": rounds,
        "total_s": cold["parallel"]["total_s"],
        "stages_s": cold["parallel"]["stages_s"],
        "sequential_total_s": cold["sequential"]["total_s"],
        "sequential_stages_s": cold["sequential"]["stages_s"],
        "parallel_speedup": cold["parallel_speedup"],
        "fetching_speedup": cold["fetching_speedup"],
        "summarizing_speedup": cold["summarizing_speedup"],
        "end_to_end_speedup": cold["end_to_end_speedup"],
        "conditions": summaries,
        "cold_warm": {
            "embedder_model": "warm: loaded and used before timing (pages_cached: a whole "
                              "pipeline run; cold: 8 page-length texts)",
            "cold_page_embeddings": "cold: embedder cache off; every page text and the "
                                    "abstract embedded in every run",
            "pages_cached_page_embeddings": "warm: embedder cache on, every page text embedded "
                                            "by the warm-up run",
            "fetcher_pdf_cache": "cold: a fresh fetcher with an empty cache directory per run",
            "retriever_and_generator": "warm: one process each for all runs, after a warm-up run",
        },
        "targets": {
            "total_s_max": TARGET_TOTAL_S, "parallel_speedup_min": TARGET_SPEEDUP,
            "total_met": cold["parallel"]["total_s"] < TARGET_TOTAL_S,
            "speedup_met": cold["parallel_speedup"] >= TARGET_SPEEDUP,
        },
        "runs": [_rounded(r) for r in runs],
        "wall_s": round(time.perf_counter() - started, 1),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    })
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breadth", type=int, default=10)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--latency-s", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model", default="all-mpnet-base-v2")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="JSON-lines corpus embedded for real (default: the demo corpus "
                             "from its snapshot)")
    parser.add_argument("--cold-only", action="store_true",
                        help="skip the pages_cached condition")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="keep the services' logs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    conditions = ("cold",) if args.cold_only else CONDITIONS
    print(dumps(run(args.breadth, args.depth, args.latency_s, args.rounds, args.model,
                    args.corpus, conditions, args.log_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
