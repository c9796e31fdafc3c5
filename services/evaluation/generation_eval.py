"""`citeweave eval generation`: the generator measured on abstracts of the demo corpus that the
store does not hold.

Held-out rule: among the demo records whose abstract (whitespace-normalized, as stored) has at
least 600 characters, the `held_out` ones whose sha256(id as UTF-8), in hex, sorts first. The
rule depends on nothing but the corpus file, so every run and machine holds out the same papers,
and it is blind to topic, date and position in the file.

The store is the demo corpus without them: its lines minus the held-out ones, copied byte for
byte into a temporary file, go through the real sync service into a temporary Milvus Lite store.
Vectors come from the demo's prebuilt snapshot (embeddings-all-mpnet-base-v2.npz), which sync
looks up by id and record hash, so the held-out papers' rows in it are simply never read and the
snapshot needs no filtering; the embedder therefore serves the snapshot's model (mpnet).

Every held-out abstract then runs through the product path: abstract_input -> run_to_shortlist
(the fetcher reads PDFs from an empty directory and never asks the arXiv API, so every paper is
judged on its abstract and nothing leaves 127.0.0.1) -> write_section, and the text is scored by
services/evaluation/generation_metrics.py against its own shortlist.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import orjson
from rich.console import Console

from citeweave.embedder.v1 import embedder_pb2_grpc
from citeweave.generator.v1 import generator_pb2 as gpb
from citeweave.generator.v1 import generator_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2 as rpb
from citeweave.retriever.v1 import retriever_pb2_grpc
from citeweave.sync.v1 import sync_pb2
from services.cli.stack import offline_fetcher_settings
from services.cli.sync import run_sync, snapshot_beside
from services.common.clients import aio_channel, sync_channel
from services.common.corpus import BadRecord, row_from_arxiv
from services.evaluation.generation_metrics import AuthorYearRef, average, score_output
from services.evaluation.harness import (
    default_embedding_cache, embed_texts, embedder_counters, eval_stack, wait_lexical_index,
)
from services.gateway.depth import FULL_TEXT, DepthOptions, Shortlist
from services.gateway.peers import Peers
from services.gateway.pipeline import abstract_input, run_to_shortlist
from services.gateway.writing import (
    BACKEND_BY_NAME, STYLE_BY_NAME, Written, backend_name, write_section,
)
from services.generator.papers import surname

REPO = Path(__file__).resolve().parents[2]
DEMO_CORPUS = REPO / "data" / "demo" / "sample-10k.jsonl.gz"
HELD_OUT_DEFAULT = 20
HELD_OUT_MIN_ABSTRACT_CHARS = 600
HELD_OUT_RULE = (
    f"the demo papers with an abstract of >= {HELD_OUT_MIN_ABSTRACT_CHARS} characters whose "
    "sha256(id) sorts first"
)
# A slow CPU model: the generator's per-attempt LLM timeout, and each gRPC call's deadline (a
# summary or the whole synthesis, with room for a retry).
LLM_TIMEOUT_S = 300.0
CALL_TIMEOUT_S = 900.0
INPUT_TIMEOUT_S = 300.0
EXTRACTIVE_CONCURRENCY = 8


# --- held-out papers and the store without them -----------------------------------------------


@dataclass(frozen=True)
class HeldOut:
    id: str
    title: str
    abstract: str  # whitespace-normalized, as the store would hold it


def _corpus_lines(corpus: Path) -> Iterator[bytes]:
    opener = gzip.open if corpus.suffix == ".gz" else open
    with opener(corpus, "rb") as lines:
        for line in lines:
            if line.strip():
                yield line


def _id_hash(paper_id: str) -> str:
    return hashlib.sha256(paper_id.encode("utf-8")).hexdigest()


def held_out_papers(
    corpus: Path = DEMO_CORPUS, n: int = HELD_OUT_DEFAULT,
    min_chars: int = HELD_OUT_MIN_ABSTRACT_CHARS,
) -> list[HeldOut]:
    """The `n` papers of HELD_OUT_RULE, in sha256(id) order; ValueError when too few qualify."""
    eligible = []
    for line in _corpus_lines(corpus):
        try:
            row = row_from_arxiv(orjson.loads(line))
        except (BadRecord, orjson.JSONDecodeError):
            continue  # sync would skip it too
        if len(row.abstract) >= min_chars:
            eligible.append(HeldOut(row.id, row.title, row.abstract))
    if len(eligible) < n:
        raise ValueError(
            f"{corpus} has {len(eligible)} papers with an abstract of >= {min_chars} characters; "
            f"{n} were asked to be held out"
        )
    return sorted(eligible, key=lambda p: _id_hash(p.id))[:n]


def write_corpus_without(corpus: Path, held_out_ids: set[str], target: Path) -> int:
    """Copies the corpus's lines except the held-out papers', byte for byte (so every record
    keeps its hash and its snapshot vector); returns the lines written."""
    written = 0
    with target.open("wb") as out:
        for line in _corpus_lines(corpus):
            try:
                paper_id = str(orjson.loads(line).get("id", ""))
            except orjson.JSONDecodeError:
                paper_id = ""
            if paper_id in held_out_ids:
                continue
            out.write(line if line.endswith(b"\n") else line + b"\n")
            written += 1
    return written


def snapshot_model(snapshot: Path) -> str:
    with np.load(snapshot, allow_pickle=False) as data:
        return str(data["model"])


# --- options and results ----------------------------------------------------------------------


@dataclass
class GenerationOptions:
    held_out: int = HELD_OUT_DEFAULT
    backend: str = "extractive"  # a key of BACKEND_BY_NAME
    local_llm: bool = False  # start services/generator/local_llm.py's server for the openai backend
    llm_url: str | None = None  # or any OpenAI-compatible endpoint ...
    llm_model: str | None = None  # ... and the model name it serves
    breadth: int = 10
    depth: int = 2
    style: str = "numeric"  # a key of STYLE_BY_NAME
    corpus: Path = DEMO_CORPUS
    snapshot: Path | None = None  # None: the embeddings-*.npz beside the corpus
    embedding_cache: Path | None = field(default_factory=default_embedding_cache)
    log_dir: Path | None = None  # None: a temporary folder, removed at the end
    outputs: Path | None = None  # JSON lines: every text with its references and scores
    llm_timeout_s: float = LLM_TIMEOUT_S
    call_timeout_s: float = CALL_TIMEOUT_S
    start_timeout_s: float = 600.0
    seed: int = 0  # of the random-paper baseline of support

    def check(self) -> None:
        """ValueError for a combination that cannot run, before anything starts."""
        if self.backend not in BACKEND_BY_NAME:
            raise ValueError(f"backend must be one of {', '.join(BACKEND_BY_NAME)}, got {self.backend!r}")
        if self.style not in STYLE_BY_NAME:
            raise ValueError(f"style must be one of {', '.join(STYLE_BY_NAME)}, got {self.style!r}")
        if self.held_out < 1:
            raise ValueError("held_out must be at least 1")
        if self.local_llm and self.llm_url:
            raise ValueError("give --local-llm or --llm-url, not both")
        if bool(self.llm_url) != bool(self.llm_model):
            raise ValueError("--llm-url and --llm-model go together")
        llm = self.local_llm or bool(self.llm_url)
        if self.backend == "openai" and not llm:
            raise ValueError("the openai backend needs --local-llm or --llm-url and --llm-model")
        if self.backend == "extractive" and llm:
            raise ValueError("an LLM is given but the backend is extractive: add --backend openai")
        if not self.corpus.is_file():
            raise ValueError(f"{self.corpus} does not exist")


@dataclass
class OutputRecord:
    """One held-out abstract's section, as --outputs writes it."""

    held_out_id: str
    title: str
    abstract: str
    shortlist: list[dict]
    text: str
    references: list[dict]
    backend: str
    requested_backend: str
    fallback_reason: str
    summary_backends: list[str]
    summary_fallbacks: list[dict]
    removed_citations: list[dict]
    citations_repaired: int
    resets: int
    streamed_text_matches: bool
    scores: dict
    # shortlist (embedding the abstract, longlist, depth), summarize, synthesize, total (those
    # three: the product path), score (the metrics, mostly embedding citing sentences)
    seconds: dict[str, float]


@dataclass
class GenerationReport:
    summary: dict  # what --json prints
    outputs: list[OutputRecord]


# --- scoring ----------------------------------------------------------------------------------


def metric_references(
    result: gpb.SynthesisResult, shortlist: Shortlist, style: str
) -> dict[int, str] | list[AuthorYearRef]:
    """The reference list in the form generation_metrics parses: {n: id} from the "[n]" markers,
    or (id, first author's surname, year as printed, e.g. "2024a") for author-year."""
    if style == "numeric":
        return {int(ref.marker.strip("[]")): ref.paper_id for ref in result.references}
    authors = {p.id: list(p.scored.paper.authors) for p in shortlist.papers}
    refs = []
    for ref in result.references:
        year = ref.marker.rstrip(")").rpartition(", ")[2]
        names = authors.get(ref.paper_id) or []
        # Years the metric cannot read ("n.d.") and author-less papers are left out: their
        # citations then count as unresolved rather than crash the scoring.
        if names and year[:4].isdigit():
            refs.append(AuthorYearRef(ref.paper_id, surname(names[0]), year))
    return refs


def _record(held: HeldOut, shortlist: Shortlist, written: Written, scores, seconds) -> OutputRecord:
    result, report = written.result, written.result.report
    requested = report.requested_backend
    return OutputRecord(
        held_out_id=held.id, title=held.title, abstract=held.abstract,
        shortlist=[
            {"id": p.id, "title": p.scored.paper.title, "score": round(p.score, 4),
             "text_source": p.text_source}
            for p in shortlist.papers
        ],
        text=result.text,
        references=[{"paper_id": r.paper_id, "marker": r.marker, "formatted": r.formatted}
                    for r in result.references],
        backend=backend_name(report.backend), requested_backend=backend_name(requested),
        fallback_reason=report.fallback_reason,
        summary_backends=[backend_name(s.backend) for s in written.summaries],
        summary_fallbacks=[{"paper_id": s.paper_id, "reason": s.fallback_reason}
                           for s in written.summaries if s.backend != requested],
        removed_citations=[{"raw": r.raw, "reason": r.reason} for r in report.removed_citations],
        citations_repaired=report.citations_repaired,
        resets=written.resets,
        streamed_text_matches=written.text == result.text,
        scores=asdict(scores),
        seconds={k: round(v, 3) for k, v in seconds.items()},
    )


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize_outputs(records: list[OutputRecord], scores: list) -> dict:
    """The figures over all outputs: metric means, backends and fallbacks, removals, timings."""
    removed = Counter(r["reason"] for rec in records for r in rec.removed_citations)
    stages = list(dict.fromkeys(stage for rec in records for stage in rec.seconds))
    return {
        "outputs": len(records),
        "metrics": average(scores),
        "outputs_without_citations": sum(s.n_citations == 0 for s in scores),
        "citations_mean": _mean([s.n_citations for s in scores]),
        "papers_cited_mean": _mean([len(rec.references) for rec in records]),
        "shortlist_size_mean": _mean([len(rec.shortlist) for rec in records]),
        "shortlisted_full_text": sum(p["text_source"] == FULL_TEXT
                                     for rec in records for p in rec.shortlist),
        "backend_used": dict(Counter(rec.backend for rec in records)),
        "synthesis_fallbacks": sum(rec.backend != rec.requested_backend for rec in records),
        "summary_backend_used": dict(Counter(b for rec in records for b in rec.summary_backends)),
        "summary_fallbacks": sum(len(rec.summary_fallbacks) for rec in records),
        "resets": sum(rec.resets for rec in records),
        "streamed_text_mismatches": sum(not rec.streamed_text_matches for rec in records),
        "citations_removed_mean": _mean([len(rec.removed_citations) for rec in records]),
        "citations_removed_total": sum(removed.values()),
        "citations_removed_by_reason": dict(removed),
        "citations_repaired_total": sum(rec.citations_repaired for rec in records),
        "seconds_mean": {stage: _mean([rec.seconds[stage] for rec in records
                                       if stage in rec.seconds]) for stage in stages},
    }


# --- the run ----------------------------------------------------------------------------------


def _generator_settings(options: GenerationOptions, base_url: str, model: str,
                        local: bool) -> dict[str, str]:
    settings = {"backend": options.backend, "timeout_s": str(options.llm_timeout_s)}
    if base_url:
        settings.update(openai_base_url=base_url, openai_model=model)
    if local:
        from services.generator.local_llm import DEFAULT_N_CTX

        # llama_cpp.server answers one request at a time: more in flight would only queue
        # there, against each call's deadline. The prompt budget follows the server's context.
        settings.update(max_concurrent_requests="1", context_tokens=str(DEFAULT_N_CTX))
        # On 2 CPU cores the 0.5B model writes ~25 tokens/s when the machine is quiet: answer
        # budgets that fit a 3-paragraph section keep one abstract near two minutes.
        settings.update(summary_max_tokens="200", synthesis_max_tokens="700")
    return settings


async def _run_outputs(
    addrs: dict[str, str], held: list[HeldOut], options: GenerationOptions,
    embed: Callable[[list[str]], np.ndarray], console: Console,
    on_output: Callable[[OutputRecord], None],
) -> tuple[list[OutputRecord], list, str]:
    peers = Peers.connect(addrs["embedder"], addrs["retriever"], addrs["fetcher"])
    channel = aio_channel(addrs["generator"])
    generator = generator_pb2_grpc.GeneratorServiceStub(channel)
    depth = DepthOptions(breadth=options.breadth, depth=options.depth)
    rng = np.random.default_rng(options.seed)
    records, scores = [], []
    try:
        info = await generator.GetInfo(gpb.GetInfoRequest(), timeout=30)
        concurrency = (info.max_concurrent_requests if options.backend == "openai"
                       else EXTRACTIVE_CONCURRENCY)
        for i, paper in enumerate(held, start=1):
            started = time.perf_counter()
            query = await abstract_input(peers, paper.abstract, INPUT_TIMEOUT_S)
            pipeline = await run_to_shortlist(peers, query, depth, timeout_s=INPUT_TIMEOUT_S)
            shortlisted = time.perf_counter()
            written = await write_section(
                generator, paper.abstract, pipeline.shortlist,
                mode=gpb.MODE_RELATED_WORK, style=STYLE_BY_NAME[options.style],
                backend=BACKEND_BY_NAME[options.backend], concurrency=concurrency,
                timeout_s=options.call_timeout_s,
            )
            seconds = {"shortlist": shortlisted - started, **written.seconds,
                       "total": time.perf_counter() - started}
            abstracts = {p.id: p.scored.paper.abstract for p in pipeline.shortlist.papers}
            references = metric_references(written.result, pipeline.shortlist, options.style)
            scoring = time.perf_counter()
            output_scores = await asyncio.to_thread(
                score_output, written.result.text, references, abstracts, embed, rng
            )
            # Not part of the product path: mostly embedding the citing sentences for support.
            seconds["score"] = time.perf_counter() - scoring
            record = _record(paper, pipeline.shortlist, written, output_scores, seconds)
            records.append(record)
            scores.append(output_scores)
            validity, cover = output_scores.citation_validity, output_scores.coverage
            fallbacks = len(record.summary_fallbacks) + (record.backend != record.requested_backend)
            console.print(
                f"[{i}/{len(held)}] {paper.id}: {len(pipeline.shortlist.papers)} shortlisted, "
                f"{len(record.references)} cited, validity "
                f"{'-' if validity is None else f'{validity:.2f}'}, coverage "
                f"{'-' if cover is None else f'{cover:.2f}'}, {record.backend}"
                f"{f', {fallbacks} fallbacks' if fallbacks else ''}, "
                f"{len(record.removed_citations)} citations removed; "
                + ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items())
                + (f"; synthesis fell back: {written.result.report.fallback_reason}"
                   if written.result.report.fallback_reason else "")
            )
            on_output(record)
    finally:
        await peers.close()
        await channel.close()
    return records, scores, info.model


def evaluate_generation(
    options: GenerationOptions, console: Console,
    on_output: Callable[[OutputRecord], None] = lambda record: None,
) -> GenerationReport:
    options.check()
    if options.outputs:
        # Each output is appended as it is scored, so a long LLM run that is stopped keeps them.
        options.outputs.parent.mkdir(parents=True, exist_ok=True)
        options.outputs.write_text("", encoding="utf-8")
        inner = on_output

        def on_output(record: OutputRecord) -> None:
            append_output(record, options.outputs)
            inner(record)

    held = held_out_papers(options.corpus, options.held_out)
    held_ids = {p.id for p in held}
    snapshot = (options.snapshot or snapshot_beside(options.corpus)).resolve()
    model = snapshot_model(snapshot)
    console.print(f"held out {len(held)} papers ({HELD_OUT_RULE}); store: the rest of "
                  f"{options.corpus.name} with {model} vectors from {snapshot.name}")
    run_started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="citeweave-eval-gen-") as tmp_name, \
            ExitStack() as resources:
        tmp = Path(tmp_name)
        corpus = tmp / "corpus.jsonl"
        kept = write_corpus_without(options.corpus, held_ids, corpus)
        log_dir = options.log_dir or tmp / "logs"
        base_url, llm_model = options.llm_url or "", options.llm_model or ""
        if options.local_llm:
            from services.generator.local_llm import is_installed, running_llm_server

            if not is_installed():
                raise RuntimeError("the local LLM is not installed: run `make install-llm` "
                                   "(python -m services.generator.local_llm install)")
            console.print("starting the local LLM server (llama_cpp.server)")
            llm = resources.enter_context(running_llm_server(log_dir / "llm.log"))
            base_url, llm_model = llm.base_url, llm.model
            console.print(f"local LLM {llm.model} serving on {llm.base_url}")
        pdf_dir = tmp / "no-pdfs"
        pdf_dir.mkdir()
        stack, metrics_port = eval_stack(
            tmp, model=model, embedding_cache=options.embedding_cache, log_dir=log_dir,
            settings={
                # Nothing may leave 127.0.0.1: with pdf_dir set and skip_metadata in the depth
                # stage the remote sources are unused; pointing them at a closed port makes sure.
                "fetcher": offline_fetcher_settings(pdf_dir, tmp / "fetcher-cache"),
                "generator": _generator_settings(options, base_url, llm_model, options.local_llm),
            },
        )
        try:
            stack.start(timeout_s=options.start_timeout_s, log=console.print)
            sync_summary, _ = run_sync(
                stack.addr("sync"),
                sync_pb2.SyncRequest(
                    source_path=str(corpus), format=sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE,
                    options=sync_pb2.SyncOptions(snapshot_path=str(snapshot)),
                ),
                console,
            )
            with sync_channel(stack.addr("embedder")) as emb, \
                    sync_channel(stack.addr("retriever")) as ret:
                retriever = retriever_pb2_grpc.RetrieverServiceStub(ret)
                wait_lexical_index(retriever)
                stored = retriever.Stats(rpb.StatsRequest(), timeout=30).paper_count
                found = retriever.Get(rpb.GetRequest(ids=sorted(held_ids)), timeout=30)
                if found.records:
                    raise RuntimeError("held-out papers are in the store: "
                                       f"{[r.paper.id for r in found.records]}")
                embedder = embedder_pb2_grpc.EmbedderServiceStub(emb)

                def embed(texts: list[str]) -> np.ndarray:
                    return np.asarray(embed_texts(embedder, texts), dtype=np.float32)

                addrs = {name: stack.addr(name)
                         for name in ("embedder", "retriever", "fetcher", "generator")}
                records, scores, served_model = asyncio.run(
                    _run_outputs(addrs, held, options, embed, console, on_output)
                )
            texts, hits = embedder_counters(metrics_port)
        finally:
            stack.stop()
    summary = {
        "backend_requested": options.backend,
        "llm_model": served_model,
        "style": options.style,
        "breadth": options.breadth,
        "depth": options.depth,
        **summarize_outputs(records, scores),
        "held_out_rule": HELD_OUT_RULE,
        "held_out_ids": [p.id for p in held],
        "store": {"papers": int(stored), "lines_synced": kept,
                  "from_snapshot": int(sync_summary.counts.from_snapshot),
                  "embedded": int(sync_summary.counts.embedded),
                  "sync_failed": int(sync_summary.counts.failed)},
        "embedder": {"texts_embedded": texts - hits, "texts_from_cache": hits},
        "wall_s": round(time.perf_counter() - run_started, 1),
    }
    return GenerationReport(summary, records)


def append_output(record: OutputRecord, path: Path) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")
