"""Citegeist's depth (3.1): fetch the longlist's full text, pick `depth` pages per paper with the
retriever's selection rule, score each paper by the mean similarity of its abstract and chosen
pages to the input, and shortlist `breadth` papers.

Papers run concurrently (fetch, embed pages, select as soon as each PDF arrives), so the slowest
download, not the sum of them, bounds the stage. A paper whose full text cannot be had is scored
on its abstract alone and marked; nothing about one paper stops the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import grpc
import numpy as np

from citeweave.fetcher.v1 import fetcher_pb2
from citeweave.retriever.v1 import retriever_pb2
from services.gateway.peers import EmbedderCallError, Peers

DEPTH_DEFAULT, DEPTH_MIN, DEPTH_MAX = 2, 1, 5
# The shortlist size; the retriever enforces the same range on its own contract.
BREADTH_MIN, BREADTH_DEFAULT, BREADTH_MAX = 5, 10, 20
# The model reads ~384 tokens of a page; sending more only costs tokenizing and bytes.
PAGE_EMBED_CHARS = 4000
FULL_TEXT, ABSTRACT_ONLY = "full_text", "abstract_only"

Progress = Callable[[str, int, int, str], None]  # (stage, done, total, message)


@dataclass
class DepthOptions:
    breadth: int = 10
    depth: int = DEPTH_DEFAULT
    diversity: float = 0.0
    rule: int = retriever_pb2.SELECTION_RULE_MMR
    page_aggregation: int = retriever_pb2.PAGE_AGGREGATION_SUM
    # Papers in flight at once; 1 is the sequential baseline of `citeweave bench fetcher`.
    concurrency: int = 16
    fetch_timeout_s: float = 120.0
    embed_timeout_s: float = 300.0


@dataclass
class ChosenPage:
    number: int
    text: str
    similarity: float
    reason: str


@dataclass
class DeepPaper:
    """A longlist paper after the depth stage."""

    scored: retriever_pb2.ScoredPaper  # as the longlist returned it
    score: float  # mean similarity of the abstract and the chosen pages
    pages: list[ChosenPage] = field(default_factory=list)
    text_source: str = ABSTRACT_ONLY
    fallback_reason: str = ""
    kept_pages: int = 0
    from_cache: bool = False
    fetch_ms: float = 0.0

    @property
    def id(self) -> str:
        return self.scored.paper.id


@dataclass
class Shortlist:
    papers: list[DeepPaper]  # the shortlist, best first
    longlist: list[DeepPaper]  # every longlist paper, in longlist order, with its depth score
    seconds: dict[str, float]
    warnings: list[str]


def _query(query_vectors: np.ndarray) -> dict:
    """SelectPassages' query fields for one or several input vectors."""
    if len(query_vectors) == 1:
        return {"query_vector": query_vectors[0].tolist()}
    return {"query_vectors": [retriever_pb2.CandidateVector(values=v.tolist())
                              for v in query_vectors]}


def _rpc_reason(service: str, error: grpc.RpcError) -> str:
    if isinstance(error, EmbedderCallError):
        service = f"embedder {error.addr}"
    return f"{service} failed ({error.code().name}: {error.details()})"


class DepthStage:
    def __init__(self, peers: Peers, options: DepthOptions, progress: Progress | None = None):
        self.peers = peers
        self.options = options
        self.progress = progress or (lambda *args: None)
        self._done = 0

    async def run(
        self, query_vectors: np.ndarray, longlist: Sequence[retriever_pb2.ScoredPaper]
    ) -> Shortlist:
        start = time.perf_counter()
        gate = asyncio.Semaphore(max(1, self.options.concurrency))
        self._done = 0
        deep = await asyncio.gather(
            *(self._paper(query_vectors, scored, gate, len(longlist)) for scored in longlist)
        )
        order = sorted(range(len(deep)), key=lambda i: (-deep[i].score, i))
        shortlist = [deep[i] for i in order[: self.options.breadth]]
        warnings = [
            f"{p.id}: judged on its abstract only — {p.fallback_reason}"
            for p in shortlist if p.text_source == ABSTRACT_ONLY
        ]
        self.progress("shortlist", len(shortlist), len(deep),
                      f"shortlisted {len(shortlist)} of {len(deep)} papers")
        return Shortlist(shortlist, list(deep), {"depth": time.perf_counter() - start}, warnings)

    async def _paper(
        self,
        query_vectors: np.ndarray,
        scored: retriever_pb2.ScoredPaper,
        gate: asyncio.Semaphore,
        total: int,
    ) -> DeepPaper:
        paper = DeepPaper(scored=scored, score=float(scored.similarity))
        async with gate:
            await self._deepen(paper, query_vectors)
        self._done += 1
        what = (f"{len(paper.pages)} pages chosen" if paper.text_source == FULL_TEXT
                else f"abstract only ({paper.fallback_reason})")
        self.progress("fetching", self._done, total, f"{paper.id}: {what}")
        return paper

    async def _deepen(self, paper: DeepPaper, query_vectors: np.ndarray) -> None:
        start = time.perf_counter()
        try:
            fetched = await self.peers.fetcher.FetchPaper(
                fetcher_pb2.FetchPaperRequest(id=paper.id, skip_metadata=True),
                timeout=self.options.fetch_timeout_s,
            )
        except grpc.RpcError as error:
            paper.fallback_reason = _rpc_reason("fetcher", error)
            return
        finally:
            paper.fetch_ms = (time.perf_counter() - start) * 1000
        if fetched.text_source != fetcher_pb2.TEXT_SOURCE_FULL_TEXT or not fetched.pages:
            paper.fallback_reason = fetched.fallback_reason or "no content pages"
            return
        paper.kept_pages = len(fetched.pages)
        paper.from_cache = fetched.from_cache
        try:
            vectors = await self.peers.embed(
                [p.text[:PAGE_EMBED_CHARS] for p in fetched.pages], self.options.embed_timeout_s
            )
            selected = await self.peers.retriever.SelectPassages(
                retriever_pb2.SelectPassagesRequest(
                    **_query(query_vectors),
                    candidates=[retriever_pb2.CandidateVector(values=v.tolist()) for v in vectors],
                    k=self.options.depth,
                    diversity=self.options.diversity,
                    rule=self.options.rule,
                    aggregation=self.options.page_aggregation,
                ),
                timeout=self.options.embed_timeout_s,
            )
        except grpc.RpcError as error:
            paper.fallback_reason = _rpc_reason("page selection", error)
            return
        paper.text_source = FULL_TEXT
        paper.pages = [
            ChosenPage(fetched.pages[s.index].number, fetched.pages[s.index].text,
                       s.similarity, s.reason)
            for s in selected.selections
        ]
        # Citegeist 3.1: the mean over the abstract and the chosen pages.
        paper.score = float(np.mean([paper.scored.similarity, *(p.similarity for p in paper.pages)]))
