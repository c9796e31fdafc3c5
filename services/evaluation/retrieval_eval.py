"""`citeweave eval retrieval`: a BEIR-style dataset through the real services, method by method.

The corpus goes in through the sync service (bring-your-own-corpus ids) into a temporary Milvus
Lite store; queries are embedded by the embedder and searched through the retriever's Search, so
what is measured is what the product does. Only `bm25` runs here, in-process: it is the bm25s
baseline, indexed with the retriever's own tokenizer.

The embedder keeps a SQLite embedding cache (by default ~/.cache/citeweave/embeddings.sqlite3),
so a re-run on the same corpus embeds nothing; the summary says how many texts were inferred.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from rich.console import Console

from citeweave.embedder.v1 import embedder_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2 as rpb
from citeweave.retriever.v1 import retriever_pb2_grpc
from citeweave.sync.v1 import sync_pb2
from services.cli.sync import run_sync
from services.common.clients import sync_channel
from services.evaluation import beir
from services.evaluation.harness import (
    default_embedding_cache, embed_texts, embedder_counters, eval_stack, wait_lexical_index,
)
from services.evaluation.retrieval_metrics import summarize
from services.retriever.lexical import LexicalSnapshot, document_text

DEFAULT_METHODS = "bm25,dense,mmr,hybrid"
SEARCH_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Method:
    name: str
    mode: int = rpb.SEARCH_MODE_DENSE
    diversity: float = 0.0
    fusion: int = rpb.FUSION_UNSPECIFIED
    lexical_weight: float = 0.0
    in_process_bm25: bool = False


METHOD_HELP = (
    "bm25 (bm25s baseline, in-process), dense (plain top-k), mmr[:W] (the longlist rule at "
    "diversity W, default --diversity), hybrid (the retriever's default fusion), hybrid-rrf, "
    "hybrid-weighted[:W] (BM25 weight W), lexical (the retriever's BM25)"
)


def _weight(name: str, value: str) -> float:
    try:
        weight = float(value)
    except ValueError:
        raise ValueError(f"{name}: {value!r} is not a number") from None
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"{name}: the value must be between 0 and 1")
    return weight


def parse_methods(spec: str, diversity: float) -> list[Method]:
    methods: list[Method] = []
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        base, _, arg = token.partition(":")
        if base == "bm25" and not arg:
            method = Method(token, in_process_bm25=True)
        elif base == "dense" and not arg:
            method = Method(token)
        elif base == "lexical" and not arg:
            method = Method(token, mode=rpb.SEARCH_MODE_LEXICAL)
        elif base == "mmr":
            method = Method(token, diversity=_weight(token, arg) if arg else diversity)
        elif base == "hybrid" and not arg:
            method = Method(token, mode=rpb.SEARCH_MODE_HYBRID)
        elif base == "hybrid-rrf" and not arg:
            method = Method(token, mode=rpb.SEARCH_MODE_HYBRID, fusion=rpb.FUSION_RRF)
        elif base == "hybrid-weighted":
            weight = _weight(token, arg) if arg else 0.0
            if arg and weight == 0.0:
                raise ValueError(f"{token}: a weight of 0 is plain dense search; use `dense`")
            method = Method(token, mode=rpb.SEARCH_MODE_HYBRID, fusion=rpb.FUSION_WEIGHTED,
                            lexical_weight=weight)
        else:
            raise ValueError(f"unknown method {token!r}; methods: {METHOD_HELP}")
        if method.name in {m.name for m in methods}:
            raise ValueError(f"method {token!r} is given twice")
        methods.append(method)
    if not methods:
        raise ValueError(f"no method given; methods: {METHOD_HELP}")
    return methods


@dataclass
class EvalOptions:
    k: int = 20
    methods: list[Method] = field(default_factory=lambda: parse_methods(DEFAULT_METHODS, 0.0))
    model: str | None = None  # None: the embedder's configured model
    embedding_cache: Path | None = field(default_factory=default_embedding_cache)
    log_dir: Path | None = None  # None: a temporary folder, removed at the end
    start_timeout_s: float = 600.0


@dataclass
class EvalReport:
    results: dict[str, dict[str, float]]
    queries: int
    documents: int
    stored: int
    sync_failed: int
    texts_embedded: int  # texts the embedder ran its model on (cache misses)
    texts_from_cache: int
    notes: list[str]


def _write_corpus(documents: list[beir.Document], path: Path) -> None:
    """The corpus as the sync service's generic JSON lines (id, title, abstract)."""
    with path.open("wb") as handle:
        for doc in documents:
            handle.write(orjson.dumps({"id": doc.id, "title": doc.title, "abstract": doc.abstract}))
            handle.write(b"\n")


def _run_bm25(dataset: beir.Dataset, k: int) -> tuple[dict[str, list[str]], list[float]]:
    index = LexicalSnapshot.build((d.id, document_text(d.title, d.abstract)) for d in dataset.documents)
    rankings, latencies = {}, []
    for query_id, text in dataset.queries.items():
        start = time.perf_counter()
        rankings[query_id] = [doc for doc, _ in index.top(index.scores(text), k)]
        latencies.append((time.perf_counter() - start) * 1000)
    return rankings, latencies


def _run_service(
    stub, method: Method, dataset: beir.Dataset, vectors: dict[str, list[float]], k: int
) -> tuple[dict[str, list[str]], list[float]]:
    rankings, latencies = {}, []
    for query_id, text in dataset.queries.items():
        request = rpb.SearchRequest(
            query_vector=vectors[query_id] if method.mode != rpb.SEARCH_MODE_LEXICAL else [],
            query_text=text if method.mode != rpb.SEARCH_MODE_DENSE else "",
            mode=method.mode, top_k=k, diversity=method.diversity,
            fusion=method.fusion, lexical_weight=method.lexical_weight,
        )
        start = time.perf_counter()
        reply = stub.Search(request, timeout=SEARCH_TIMEOUT_S)
        latencies.append((time.perf_counter() - start) * 1000)
        rankings[query_id] = [p.paper.id for p in reply.papers]
    return rankings, latencies


def evaluate(
    dataset_dir: Path, options: EvalOptions, console: Console,
    on_method: Callable[[str], None] = lambda name: None,
) -> EvalReport:
    dataset = beir.load(dataset_dir)
    k = options.k
    console.print(
        f"dataset {dataset.root}: {len(dataset.documents):,} documents, "
        f"{len(dataset.queries):,} queries with relevance judgements"
    )
    for note in dataset.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    with tempfile.TemporaryDirectory(prefix="citeweave-eval-") as tmp_name:
        tmp = Path(tmp_name)
        corpus = tmp / "corpus.jsonl"
        _write_corpus(dataset.documents, corpus)
        stack, metrics_port = eval_stack(
            tmp, model=options.model, embedding_cache=options.embedding_cache,
            log_dir=options.log_dir,
        )
        try:
            stack.start(timeout_s=options.start_timeout_s, log=console.print)
            summary, _ = run_sync(
                stack.addr("sync"),
                sync_pb2.SyncRequest(source_path=str(corpus), format=sync_pb2.SOURCE_FORMAT_JSONL),
                console,
            )
            with sync_channel(stack.addr("embedder")) as emb, \
                    sync_channel(stack.addr("retriever")) as ret:
                retriever = retriever_pb2_grpc.RetrieverServiceStub(ret)
                wait_lexical_index(retriever)
                stored = retriever.Stats(rpb.StatsRequest(), timeout=30).paper_count
                ids = list(dataset.queries)
                embedded = embed_texts(embedder_pb2_grpc.EmbedderServiceStub(emb),
                                       [dataset.queries[q] for q in ids])
                vectors = dict(zip(ids, embedded))
                results = {}
                for method in options.methods:
                    on_method(method.name)
                    if method.in_process_bm25:
                        rankings, latencies = _run_bm25(dataset, k)
                    else:
                        rankings, latencies = _run_service(retriever, method, dataset, vectors, k)
                    results[method.name] = summarize(rankings, dataset.qrels, latencies, k)
            texts, hits = embedder_counters(metrics_port)
        finally:
            stack.stop()
    return EvalReport(
        results=results, queries=len(dataset.queries), documents=len(dataset.documents),
        stored=int(stored), sync_failed=int(summary.counts.failed),
        texts_embedded=texts - hits, texts_from_cache=hits, notes=dataset.notes,
    )
