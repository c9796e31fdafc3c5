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
from services.common.errors import FailedPrecondition, InvalidArgument, Unavailable, check_range
from services.retriever import records
from services.retriever.aggregation import aggregate, aggregation, query_matrix, relevance_name
from services.retriever.fusion import Candidate, Fusion, fused_scores, scaled_to_best
from services.retriever.lexical import LexicalSnapshot, document_text
from services.retriever.peers import embedder_dimension
from services.retriever.selection import Aggregation, normalize_rows, select
from services.retriever.settings import RetrieverSettings
from services.retriever.settle import WriteSettler
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
TOP_K_MAX = 200
QUERY_TEXT_MAX_CHARS = 10000
LEXICAL_OVERFETCH_FILTERED = 5
TEXT_PAGE_SIZE = 10000

_FUSIONS = {
    retriever_pb2.FUSION_UNSPECIFIED: None,
    retriever_pb2.FUSION_RRF: Fusion.RRF,
    retriever_pb2.FUSION_WEIGHTED: Fusion.WEIGHTED,
}
_RELEVANCE_NAMES = {
    retriever_pb2.SEARCH_MODE_DENSE: "similarity",
    retriever_pb2.SEARCH_MODE_LEXICAL: "BM25 relevance",
    retriever_pb2.SEARCH_MODE_HYBRID: "fused relevance",
}
_FUSION_PB = {Fusion.RRF: retriever_pb2.FUSION_RRF, Fusion.WEIGHTED: retriever_pb2.FUSION_WEIGHTED}

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


def _mode(value: int) -> int:
    if value == retriever_pb2.SEARCH_MODE_UNSPECIFIED:
        return retriever_pb2.SEARCH_MODE_DENSE
    if value not in retriever_pb2.SearchMode.values():
        raise InvalidArgument(
            f"mode {value} is unknown; use SEARCH_MODE_DENSE (1), SEARCH_MODE_LEXICAL (2) or "
            "SEARCH_MODE_HYBRID (3)"
        )
    return value


def _query_text(text: str, mode: int) -> str:
    text = text.strip()
    if mode != retriever_pb2.SEARCH_MODE_DENSE and not text:
        raise InvalidArgument(
            f"query_text is empty; {retriever_pb2.SearchMode.Name(mode)} searches by the words "
            "of the query, so send them in query_text"
        )
    if len(text) > QUERY_TEXT_MAX_CHARS:
        raise InvalidArgument(
            f"query_text has {len(text):,} characters; at most {QUERY_TEXT_MAX_CHARS:,} are allowed"
        )
    return text


def _cosine(vector, query: np.ndarray | None) -> float:
    """Cosine to the (normalized) query; 0 in lexical mode, which may come without one."""
    if query is None:
        return 0.0
    vector = np.asarray(vector, dtype=np.float32)
    return float(vector @ query / ((np.linalg.norm(vector) * np.linalg.norm(query)) or 1.0))


def _aggregate_over_queries(
    candidates: dict[str, Candidate], queries: np.ndarray, how: int
) -> dict[str, np.ndarray]:
    """Sets each candidate's cosine to its aggregate over every query vector (not only those
    whose search found it) and returns the per-query cosines by id."""
    ids = list(candidates)
    vectors = normalize_rows(np.asarray([candidates[i].row[VECTOR_FIELD] for i in ids]))
    similarities = vectors @ queries.T
    for paper_id, value in zip(ids, aggregate(similarities, how)):
        candidates[paper_id].cosine = float(value)
    return dict(zip(ids, similarities))


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
        mode = _mode(request.mode)
        needs_vector = mode != retriever_pb2.SEARCH_MODE_LEXICAL
        if request.query_vectors and mode != retriever_pb2.SEARCH_MODE_DENSE:
            raise InvalidArgument(
                "query_vectors work with SEARCH_MODE_DENSE only; for a lexical or hybrid search "
                "send one query_vector and query_text"
            )
        how = aggregation(request.page_aggregation)
        queries = None  # unit rows, one per query vector
        if needs_vector or request.query_vector:
            queries = query_matrix(
                request.query_vector, request.query_vectors, self.store.dimension,
                "the store's dimension is",
            )
        query = queries[0] if queries is not None and len(queries) == 1 else None
        text = _query_text(request.query_text, mode)
        lexical = self.app.lexical_snapshot() if mode != retriever_pb2.SEARCH_MODE_DENSE else None
        if request.top_k:
            check_range("top_k", request.top_k, 1, TOP_K_MAX)
            breadth = 0
            picks_wanted, candidate_count = request.top_k, 2 * request.top_k
        else:
            breadth = request.breadth or BREADTH_DEFAULT
            check_range("breadth", breadth, BREADTH_MIN, BREADTH_MAX)
            picks_wanted = LONGLIST_PER_BREADTH * breadth
            candidate_count = CANDIDATES_PER_BREADTH * breadth
        diversity = _diversity(request.diversity)
        rule, rule_aggregation = _rule(request.rule)
        fusion, lexical_weight = self._fusion(request)
        expression = records.filter_expression(request.filter)

        start = time.perf_counter()
        candidates: dict[str, Candidate] = {}
        query_similarities: dict[str, np.ndarray] = {}
        if needs_vector:
            per_query = await self.app.call(
                self.store.search_many, queries.tolist(), candidate_count, expression
            )
            for hits in per_query:
                for rank, hit in enumerate(hits, start=1):
                    known = candidates.get(hit.row["id"])
                    if known is None:
                        candidates[hit.row["id"]] = Candidate(hit.row, hit.similarity, dense_rank=rank)
                    else:
                        known.dense_rank = min(known.dense_rank, rank)
            if len(queries) > 1:
                query_similarities = _aggregate_over_queries(candidates, queries, how)
        search_ms = _ms(start)
        lexical_ms = 0.0
        if lexical is not None:
            start = time.perf_counter()
            await self._add_lexical(candidates, lexical, text, query, candidate_count, expression)
            lexical_ms = _ms(start)

        start = time.perf_counter()
        ranked = list(candidates.values())
        relevance = self._relevance(ranked, mode, fusion, lexical_weight)
        order = np.argsort(-relevance, kind="stable")[:candidate_count]
        ranked = [ranked[i] for i in order]
        relevance = relevance[order]
        picks = []
        if ranked:
            vectors = np.asarray([c.row[VECTOR_FIELD] for c in ranked], dtype=np.float32)
            name = _RELEVANCE_NAMES[mode]
            if mode == retriever_pb2.SEARCH_MODE_DENSE:
                name = relevance_name(how, len(queries))
            picks = select(relevance, vectors, picks_wanted, diversity, rule_aggregation,
                           relevance_name=name)
        selection_ms = _ms(start)

        papers = []
        for rank, pick in enumerate(picks, start=1):
            chosen = ranked[pick.index]
            papers.append(
                retriever_pb2.ScoredPaper(
                    paper=records.paper_from_row(chosen.row),
                    similarity=chosen.cosine,
                    selection_score=pick.selection_score,
                    rank=rank,
                    candidate_rank=pick.index + 1,
                    reason=pick.reason,
                    vector=chosen.row[VECTOR_FIELD] if request.include_vectors else (),
                    max_similarity_to_selected=pick.max_similarity_to_selected,
                    lexical_score=chosen.bm25,
                    relevance=pick.similarity,
                    query_similarities=query_similarities.get(chosen.row["id"], ()),
                )
            )
        hybrid = mode == retriever_pb2.SEARCH_MODE_HYBRID
        return retriever_pb2.SearchResponse(
            papers=papers,
            candidates_considered=len(ranked),
            rule=rule,
            breadth=breadth,
            diversity=diversity,
            search_ms=search_ms,
            selection_ms=selection_ms,
            mode=mode,
            fusion=_FUSION_PB[fusion] if hybrid else retriever_pb2.FUSION_UNSPECIFIED,
            lexical_weight=lexical_weight if hybrid and fusion is Fusion.WEIGHTED else 0.0,
            lexical_ms=lexical_ms,
            query_count=len(queries) if queries is not None else 0,
            page_aggregation=how if queries is not None and len(queries) > 1 else 0,
        )

    def _fusion(self, request) -> tuple[Fusion, float]:
        if request.fusion not in _FUSIONS:
            raise InvalidArgument(
                f"fusion {request.fusion} is unknown; use FUSION_RRF (1) or FUSION_WEIGHTED (2)"
            )
        fusion = _FUSIONS[request.fusion] or Fusion(self.app.settings.fusion)
        weight = request.lexical_weight or self.app.settings.lexical_weight
        check_range("lexical_weight", weight, 0.0, 1.0)
        return fusion, float(weight)

    async def _add_lexical(
        self,
        candidates: dict[str, Candidate],
        lexical: LexicalSnapshot,
        text: str,
        query: np.ndarray | None,
        candidate_count: int,
        expression: str,
    ) -> None:
        """Adds the lexical ranking to the candidates: BM25 scores for the dense ones, and the
        best BM25 papers that pass the filter, looked up in the store for their rows."""
        scores = await asyncio.to_thread(lexical.scores, text)
        for paper_id, candidate in candidates.items():
            candidate.bm25 = lexical.score_of(scores, paper_id)
        # A filter drops lexical hits only after the lookup, so ask for more when one is set.
        wanted = candidate_count * (LEXICAL_OVERFETCH_FILTERED if expression else 1)
        best = lexical.top(scores, wanted)
        missing = [paper_id for paper_id, _ in best if paper_id not in candidates]
        rows = await self.app.call(self.store.get, missing, True, expression) if missing else {}
        rank = 0
        for paper_id, score in best:
            if paper_id not in candidates and paper_id not in rows:
                continue  # filtered out, or deleted since the index was built
            rank += 1
            if rank > candidate_count:
                break
            candidate = candidates.get(paper_id)
            if candidate is None:
                row = rows[paper_id]
                cosine = _cosine(row[VECTOR_FIELD], query)
                candidate = candidates[paper_id] = Candidate(row, cosine, bm25=score)
            candidate.lexical_rank = rank

    @staticmethod
    def _relevance(
        ranked: list[Candidate], mode: int, fusion: Fusion, lexical_weight: float
    ) -> np.ndarray:
        if not ranked:
            return np.zeros(0)
        if mode == retriever_pb2.SEARCH_MODE_DENSE:
            return np.asarray([c.cosine for c in ranked], dtype=np.float64)
        if mode == retriever_pb2.SEARCH_MODE_LEXICAL:
            return scaled_to_best(np.asarray([c.bm25 for c in ranked], dtype=np.float64))
        return scaled_to_best(fused_scores(ranked, fusion, lexical_weight))

    async def SelectPassages(self, request, context):
        check_range("k (depth)", request.k, DEPTH_MIN, DEPTH_MAX)
        diversity = _diversity(request.diversity)
        _, rule_aggregation = _rule(request.rule)
        how = aggregation(request.aggregation)
        queries = query_matrix(request.query_vector, request.query_vectors, None, "the first has")
        dimension = queries.shape[1]
        expected = "query_vector has" if request.query_vector else "query_vectors[0] has"
        if len(request.candidates) > MAX_PASSAGE_CANDIDATES:
            raise InvalidArgument(
                f"at most {MAX_PASSAGE_CANDIDATES} candidates per request, "
                f"got {len(request.candidates)}"
            )
        if not request.candidates:
            return retriever_pb2.SelectPassagesResponse()
        candidates = np.stack([
            records.check_vector(c.values, dimension, f"candidates[{i}]", expected)
            for i, c in enumerate(request.candidates)
        ])
        unit = normalize_rows(candidates)
        picks = select(
            aggregate(unit @ queries.T, how), unit, int(request.k), diversity, rule_aggregation,
            relevance_name=relevance_name(how, len(queries)),
        )
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
        self.app.note_write()
        return retriever_pb2.UpsertResponse(upserted_count=count)

    async def Delete(self, request, context):
        ids = _check_ids(request.ids)
        deleted = await self.app.call(self.store.delete, ids) if ids else 0
        if deleted:
            self.app.note_write()
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
            lexical_documents=len(self.app.lexical) if self.app.lexical is not None else 0,
            lexical_stale=self.app.lexical is not None and self.app.settler.stale,
            lexical_enabled=self.app.lexical is not None,
        )


class RetrieverApp:
    """ServiceApp for services.common.server: opens the store in warm-up, closes it at the end."""

    name = "retriever"
    service_names = (SERVICE_NAME,)

    def __init__(self, settings: RetrieverSettings):
        self.settings = settings
        self._store: PaperStore | None = None
        self._opening: PaperStore | None = None
        # None when the lexical index is switched off.
        self.lexical: LexicalSnapshot | None = None
        self.settler: WriteSettler | None = None
        # One thread for every store call: Milvus Lite's in-process engine admits one user, and
        # the event loop must never block on it.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="milvus")

    @property
    def store(self) -> PaperStore:
        if self._store is None:
            # RPCs are accepted while health still says NOT_SERVING (warm-up, shutdown).
            raise Unavailable("the vector store is not open; retry when health reports SERVING")
        return self._store

    def lexical_snapshot(self) -> LexicalSnapshot:
        if self.lexical is None:
            raise FailedPrecondition(
                "the lexical index is switched off on this retriever "
                "(CITEWEAVE_RETRIEVER_LEXICAL_INDEX=false); use SEARCH_MODE_DENSE or turn it on"
            )
        return self.lexical

    def note_write(self) -> None:
        if self.settler is not None:
            self.settler.note_write()

    async def rebuild_lexical(self) -> None:
        start = time.perf_counter()
        rows = await self.read_texts()
        read_s = time.perf_counter() - start
        self.lexical = await asyncio.to_thread(
            LexicalSnapshot.build, ((i, document_text(t, a)) for i, t, a in rows)
        )
        log.info(
            "lexical index built",
            extra={"documents": len(self.lexical), "read_s": round(read_s, 3),
                   "total_s": round(time.perf_counter() - start, 3)},
        )

    async def flush_store(self) -> None:
        await self.call(self.store.flush)

    async def read_texts(self) -> list[tuple[str, str, str]]:
        """Every (id, title, abstract) of the store: a copy of Lite's in-memory mirror (taken on
        the store thread, so no write lands mid-copy), or pages of a server's query iterator,
        read on the store thread so searches run between them."""
        in_memory = await self.call(self.store.texts_in_memory)
        if in_memory is not None:
            return in_memory
        pages = self.store.iter_texts(TEXT_PAGE_SIZE)
        rows: list[tuple[str, str, str]] = []
        try:
            while (page := await self.call(next, pages, None)) is not None:
                rows.extend(page)
        finally:
            await self.call(pages.close)
        return rows

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
        steps = []
        if self._store.kind == "milvus-lite":
            steps.append(self.flush_store)
        if self.settings.lexical_index:
            self.lexical = LexicalSnapshot.empty()
            steps.append(self.rebuild_lexical)
            await self.rebuild_lexical()
        self.settler = WriteSettler(
            steps,
            self.settings.write_settle_delay_s,
            # Lite admits one process, so every write comes through this one.
            self.settings.lexical_refresh_interval_s if self._store.kind == "milvus-server" else 0.0,
        )
        self.settler.start()

    async def close(self) -> None:
        # A SIGTERM during warm-up cancels the await, not the open running on the store thread;
        # queued behind it on that single thread, close() still releases what open() took.
        if self.settler is not None:
            await self.settler.stop()
        store = self._store or self._opening
        self._store = self._opening = None
        if store is not None:
            await self.call(store.close)
        self._executor.shutdown(wait=True)
