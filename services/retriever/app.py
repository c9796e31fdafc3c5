"""The retriever gRPC service: the only owner of the vector store."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import grpc
import numpy as np

from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from services.common.errors import InvalidArgument, Unavailable, check_range
from services.retriever import records
from services.retriever.peers import embedder_dimension
from services.retriever.selection import Aggregation, select
from services.retriever.settings import RetrieverSettings
from services.retriever.store import VECTOR_FIELD, PaperStore

log = logging.getLogger("citeweave.retriever")
T = TypeVar("T")

SERVICE_NAME = retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name

BREADTH_DEFAULT, BREADTH_MIN, BREADTH_MAX = 10, 5, 20
CANDIDATES_PER_BREADTH = 6  # similarity search returns 6*breadth ...
LONGLIST_PER_BREADTH = 3  # ... of which the selection rule keeps 3*breadth
DEPTH_MIN, DEPTH_MAX = 1, 5
MAX_PASSAGE_CANDIDATES = 5000
PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX = 1000, 10000

_RULES = {
    retriever_pb2.SELECTION_RULE_UNSPECIFIED: (retriever_pb2.SELECTION_RULE_MMR, Aggregation.MAX),
    retriever_pb2.SELECTION_RULE_MMR: (retriever_pb2.SELECTION_RULE_MMR, Aggregation.MAX),
    retriever_pb2.SELECTION_RULE_CITEGEIST_MIN: (
        retriever_pb2.SELECTION_RULE_CITEGEIST_MIN, Aggregation.MIN,
    ),
}


def _rule(value: int) -> tuple[int, Aggregation]:
    if value not in _RULES:
        raise InvalidArgument(
            f"rule {value} is unknown; use SELECTION_RULE_MMR (1) or SELECTION_RULE_CITEGEIST_MIN (2)"
        )
    return _RULES[value]


def _diversity(value: float) -> float:
    check_range("diversity", value, 0.0, 1.0)
    return float(value)


def _check_ids(ids) -> list[str]:
    if any(not i for i in ids):
        raise InvalidArgument("ids must be non-empty strings")
    return list(ids)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


class RetrieverServicer(retriever_pb2_grpc.RetrieverServiceServicer):
    def __init__(self, app: "RetrieverApp"):
        self.app = app

    @property
    def store(self) -> PaperStore:
        return self.app.store

    async def Search(self, request, context):
        dimension = self.store.dimension
        query = records.check_vector(request.query_vector, dimension, "query_vector")
        breadth = request.breadth or BREADTH_DEFAULT
        check_range("breadth", breadth, BREADTH_MIN, BREADTH_MAX)
        diversity = _diversity(request.diversity)
        rule, aggregation = _rule(request.rule)
        expression = records.filter_expression(request.filter)

        start = time.perf_counter()
        hits = await self.app.call(
            self.store.search, query.tolist(), CANDIDATES_PER_BREADTH * breadth, expression
        )
        search_ms = _ms(start)

        start = time.perf_counter()
        picks = []
        if hits:
            vectors = np.asarray([h.row[VECTOR_FIELD] for h in hits], dtype=np.float32)
            sims = np.asarray([h.similarity for h in hits])
            picks = select(sims, vectors, LONGLIST_PER_BREADTH * breadth, diversity, aggregation)
        selection_ms = _ms(start)

        papers = []
        for rank, pick in enumerate(picks, start=1):
            hit = hits[pick.index]
            papers.append(
                retriever_pb2.ScoredPaper(
                    paper=records.paper_from_row(hit.row),
                    similarity=pick.similarity,
                    selection_score=pick.selection_score,
                    rank=rank,
                    candidate_rank=pick.index + 1,
                    reason=pick.reason,
                    vector=hit.row[VECTOR_FIELD] if request.include_vectors else (),
                    max_similarity_to_selected=pick.max_similarity_to_selected,
                )
            )
        return retriever_pb2.SearchResponse(
            papers=papers,
            candidates_considered=len(hits),
            rule=rule,
            breadth=breadth,
            diversity=diversity,
            search_ms=search_ms,
            selection_ms=selection_ms,
        )

    async def SelectPassages(self, request, context):
        check_range("k (depth)", request.k, DEPTH_MIN, DEPTH_MAX)
        diversity = _diversity(request.diversity)
        _, aggregation = _rule(request.rule)
        if not request.query_vector:
            raise InvalidArgument("query_vector is empty")
        dimension = len(request.query_vector)
        query = records.check_vector(request.query_vector, dimension, "query_vector")
        if len(request.candidates) > MAX_PASSAGE_CANDIDATES:
            raise InvalidArgument(
                f"at most {MAX_PASSAGE_CANDIDATES} candidates per request, "
                f"got {len(request.candidates)}"
            )
        if not request.candidates:
            return retriever_pb2.SelectPassagesResponse()
        candidates = np.stack([
            records.check_vector(c.values, dimension, f"candidates[{i}]", "query_vector has")
            for i, c in enumerate(request.candidates)
        ])
        unit_query = query / np.linalg.norm(query)
        unit = candidates / np.linalg.norm(candidates, axis=1, keepdims=True)
        picks = select(unit @ unit_query, unit, int(request.k), diversity, aggregation)
        return retriever_pb2.SelectPassagesResponse(
            selections=[
                retriever_pb2.Selection(
                    index=p.index,
                    similarity=p.similarity,
                    selection_score=p.selection_score,
                    reason=p.reason,
                )
                for p in picks
            ]
        )

    async def Upsert(self, request, context):
        rows = records.rows_from_request(request.records, self.store.dimension)
        if not rows:
            return retriever_pb2.UpsertResponse(upserted_count=0)
        count = await self.app.call(self.store.upsert, rows)
        return retriever_pb2.UpsertResponse(upserted_count=count)

    async def Delete(self, request, context):
        ids = _check_ids(request.ids)
        deleted = await self.app.call(self.store.delete, ids) if ids else 0
        return retriever_pb2.DeleteResponse(deleted_count=deleted)

    async def Get(self, request, context):
        ids = _check_ids(request.ids)
        found = await self.app.call(self.store.get, ids, request.include_vectors) if ids else {}
        response = retriever_pb2.GetResponse()
        for paper_id in dict.fromkeys(ids):
            row = found.get(paper_id)
            if row is None:
                response.missing_ids.append(paper_id)
                continue
            response.records.append(
                retriever_pb2.PaperRecord(
                    paper=records.paper_from_row(row),
                    vector=row.get(VECTOR_FIELD, ()) if request.include_vectors else (),
                )
            )
        return response

    async def ListHashes(self, request, context) -> AsyncIterator[retriever_pb2.ListHashesResponse]:
        page_size = request.page_size or PAGE_SIZE_DEFAULT
        check_range("page_size", page_size, 1, PAGE_SIZE_MAX)
        pages = self.store.iter_hashes(page_size)
        try:
            while True:
                # The generator holds a Milvus iterator; it is advanced only on the store thread.
                page = await self.app.call(next, pages, None)
                if page is None:
                    return
                yield retriever_pb2.ListHashesResponse(
                    entries=[retriever_pb2.IdHash(id=i, sha256=h) for i, h in page]
                )
        finally:
            await self.app.call(pages.close)

    async def Stats(self, request, context):
        count = await self.app.call(self.store.count)
        index_type, metric_type = await self.app.call(self.store.index_info)
        return retriever_pb2.StatsResponse(
            paper_count=count,
            dimension=self.store.dimension,
            collection=self.store.collection,
            store_kind=self.store.kind,
            index_type=index_type,
            metric_type=metric_type,
        )


class RetrieverApp:
    """ServiceApp for services.common.server: opens the store in warm-up, closes it at the end."""

    name = "retriever"
    service_names = (SERVICE_NAME,)

    def __init__(self, settings: RetrieverSettings):
        self.settings = settings
        self._store: PaperStore | None = None
        self._opening: PaperStore | None = None
        # One thread for every store call: Milvus Lite's in-process engine admits one user, and
        # the event loop must never block on it.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="milvus")

    @property
    def store(self) -> PaperStore:
        if self._store is None:
            # RPCs are accepted while health still says NOT_SERVING (warm-up, shutdown).
            raise Unavailable("the vector store is not open; retry when health reports SERVING")
        return self._store

    async def call(self, fn: Callable[..., T], *args) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    def register(self, server: grpc.aio.Server) -> None:
        retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(RetrieverServicer(self), server)

    async def warm_up(self) -> None:
        dimension = self.settings.dimension
        if self.settings.embedder_addr:
            dimension = await embedder_dimension(
                self.settings.embedder_addr, self.settings.embedder_wait_s
            )
            log.info("dimension from embedder", extra={"dimension": dimension})
        self._opening = PaperStore(self.settings, dimension)
        await self.call(self._opening.open)
        self._store, self._opening = self._opening, None

    async def close(self) -> None:
        # A SIGTERM during warm-up cancels the await, not the open running on the store thread;
        # queued behind it on that single thread, close() still releases what open() took.
        store = self._store or self._opening
        self._store = self._opening = None
        if store is not None:
            await self.call(store.close)
        self._executor.shutdown(wait=True)
