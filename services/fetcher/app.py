"""The fetcher gRPC service: arXiv metadata, PDFs (disk cache, then a directory or HTTP), page
text extraction and filtering.

A paper whose PDF cannot be had or read is not an error: FetchPaper answers OK with
ABSTRACT_ONLY and the cause, so a pipeline fetching a whole longlist goes on. Only a malformed id
(INVALID_ARGUMENT), an id arXiv does not know (NOT_FOUND) and an unreachable arXiv API
(UNAVAILABLE) fail a call. Nothing here blocks the event loop: SQLite and file I/O run on a small
thread pool, arXiv API requests on their own thread, extraction in worker processes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import grpc

from citeweave.fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc
from services.common.errors import CiteweaveError, InvalidArgument, Unavailable
from services.fetcher import metrics
from services.fetcher.cache import PdfCache
from services.fetcher.download import MIB, PdfSource, SingleFlight, too_large
from services.fetcher.extraction import Extractor
from services.fetcher.ids import PaperId, parse_id
from services.fetcher.metadata import ArxivLookup, MetadataBatcher, Record
from services.fetcher.pages import DropReason, Extraction, PdfProblem, Problem
from services.fetcher.settings import FetcherSettings

log = logging.getLogger("citeweave.fetcher")
T = TypeVar("T")

SERVICE_NAME = fetcher_pb2.DESCRIPTOR.services_by_name["FetcherService"].full_name
# Stop waiting this long before the caller's deadline, so the fallback answer still reaches it.
RESPONSE_MARGIN_S = 0.25
IO_THREADS = 4
# Opens in a worker and fails (NOT_PDF): warm-up waits for a started extraction worker with it.
_WARM_UP_PDF = b"%PDF-1.4\n%%EOF\n"
FILENAME_SHOWN_CHARS = 120

FALLBACK_CAUSES = {
    Problem.NOT_FOUND: fetcher_pb2.FALLBACK_CAUSE_NOT_FOUND,
    Problem.TIMEOUT: fetcher_pb2.FALLBACK_CAUSE_TIMEOUT,
    Problem.UNAVAILABLE: fetcher_pb2.FALLBACK_CAUSE_UNAVAILABLE,
    Problem.NOT_PDF: fetcher_pb2.FALLBACK_CAUSE_NOT_PDF,
    Problem.ENCRYPTED: fetcher_pb2.FALLBACK_CAUSE_ENCRYPTED,
    Problem.TOO_LARGE: fetcher_pb2.FALLBACK_CAUSE_TOO_LARGE,
    Problem.TOO_MANY_PAGES: fetcher_pb2.FALLBACK_CAUSE_TOO_MANY_PAGES,
    Problem.NO_TEXT: fetcher_pb2.FALLBACK_CAUSE_NO_TEXT,
    Problem.UNREADABLE: fetcher_pb2.FALLBACK_CAUSE_UNREADABLE,
}
assert set(FALLBACK_CAUSES) == set(Problem)  # every Problem has its cause

DROP_REASONS = {
    DropReason.REFERENCES: fetcher_pb2.DROP_REASON_REFERENCES,
    DropReason.APPENDIX: fetcher_pb2.DROP_REASON_APPENDIX,
    DropReason.ACKNOWLEDGEMENTS: fetcher_pb2.DROP_REASON_ACKNOWLEDGEMENTS,
    DropReason.SUPPLEMENTARY: fetcher_pb2.DROP_REASON_SUPPLEMENTARY,
    DropReason.EMPTY: fetcher_pb2.DROP_REASON_EMPTY,
}
assert set(DROP_REASONS) == set(DropReason)


@dataclass(frozen=True)
class PdfBytes:
    data: bytes
    url: str
    from_cache: bool
    download_ms: float


def _pages(extraction: Extraction) -> tuple[list[fetcher_pb2.Page], list[fetcher_pb2.DroppedPart]]:
    pages = [fetcher_pb2.Page(number=p.number, text=p.text, partial=p.partial)
             for p in extraction.pages]
    dropped = [
        fetcher_pb2.DroppedPart(
            page_number=d.number, reason=DROP_REASONS[d.reason], heading=d.heading,
            dropped_chars=d.chars,
        )
        for d in extraction.dropped
    ]
    return pages, dropped


def _metadata(paper_id: PaperId, record: Record | None, pdf_url: str) -> fetcher_pb2.PaperMetadata:
    if record is None:
        return fetcher_pb2.PaperMetadata(id=paper_id.value, pdf_url=pdf_url)
    return fetcher_pb2.PaperMetadata(
        id=record.id, title=record.title, abstract=record.abstract, authors=record.authors,
        year=record.year, categories=record.categories, pdf_url=pdf_url,
    )


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


class FetcherServicer(fetcher_pb2_grpc.FetcherServiceServicer):
    def __init__(self, app: "FetcherApp"):
        self.app = app

    async def FetchPaper(self, request, context):
        return await self.app.fetch_paper(request, context.time_remaining())

    async def ExtractPdf(self, request, context):
        return await self.app.extract_pdf(request)


class FetcherApp:
    """ServiceApp for services.common.server: opens the cache, the HTTP client and the extraction
    workers in warm-up, closes them at the end."""

    name = "fetcher"
    service_names = (SERVICE_NAME,)

    def __init__(self, settings: FetcherSettings):
        self.settings = settings
        # SQLite and file reads; small, so a burst of cache reads cannot hog the machine.
        self._io = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="fetcher-io")
        self.cache: PdfCache | None = None
        self.source = PdfSource(settings, self._io)
        self.metadata: MetadataBatcher | None = None
        self.extractor: Extractor | None = None
        self.flights: SingleFlight[PdfBytes] = SingleFlight()
        # The arxiv client is not thread-safe (its rate limit lives in plain attributes).
        self._arxiv = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arxiv")
        self._ready = False
        # One JSON line per fetch is ours; the libraries' per-request lines would double it.
        for noisy in ("httpx", "httpcore", "arxiv"):
            logging.getLogger(noisy).setLevel(logging.WARNING)

    # -- lifecycle --------------------------------------------------------------------------

    def register(self, server: grpc.aio.Server) -> None:
        fetcher_pb2_grpc.add_FetcherServiceServicer_to_server(FetcherServicer(self), server)

    async def warm_up(self) -> None:
        settings = self.settings
        try:
            self.cache = await self.io(
                PdfCache, settings.cache_dir, settings.cache_max_mb * MIB,
                settings.unversioned_ttl_s,
            )
        except OSError as exc:
            raise RuntimeError(
                f"cannot use the cache directory {settings.cache_dir} ({exc}); point "
                "CITEWEAVE_FETCHER_CACHE_DIR at a writable directory"
            ) from None
        await self.source.start()
        self.metadata = MetadataBatcher(
            settings, ArxivLookup(settings), self._arxiv, self.cache, self._io
        )
        self.metadata.start()
        self.extractor = Extractor(
            timeout_s=settings.extraction_timeout_s,
            workers=settings.extract_workers,
            max_pages=settings.max_pages,
        )
        # The workers are spawned processes that import pymupdf (~1 s); SERVING only after.
        try:
            await self.extractor.extract(_WARM_UP_PDF)
        except PdfProblem:
            pass
        self._ready = True
        log.info(
            "fetcher ready",
            extra={"cache_dir": str(settings.cache_dir), "cache_max_mb": settings.cache_max_mb,
                   "source": str(settings.pdf_dir or settings.pdf_url_template),
                   "arxiv_api_url": settings.arxiv_api_url},
        )

    async def close(self) -> None:
        self._ready = False
        await self.flights.cancel_all()
        if self.metadata is not None:
            await self.metadata.stop()
        await self.source.close()
        if self.extractor is not None:
            await asyncio.to_thread(self.extractor.close)  # joins the worker processes
            self.extractor = None
        self._arxiv.shutdown(wait=False, cancel_futures=True)
        if self.cache is not None:
            await self.io(self.cache.close)
            self.cache = None
        self._io.shutdown(wait=True)

    async def io(self, fn: Callable[..., T], *args) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._io, functools.partial(fn, *args))

    def _check_ready(self) -> None:
        if not self._ready:
            # RPCs are accepted while health still says NOT_SERVING (warm-up, shutdown).
            raise Unavailable("the fetcher is not ready; retry when health reports SERVING")

    # -- FetchPaper -------------------------------------------------------------------------

    async def fetch_paper(
        self, request: fetcher_pb2.FetchPaperRequest, time_remaining: float | None
    ) -> fetcher_pb2.FetchPaperResponse:
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        deadline = None
        if time_remaining is not None:
            deadline = loop.time() + time_remaining - RESPONSE_MARGIN_S
        outcome, response = "error", None
        with metrics.FETCHES_IN_FLIGHT.track_inprogress():
            try:
                paper_id = parse_id(request.id, local_ids=self.settings.pdf_dir is not None)
                self._check_ready()
                response = await self._fetch(paper_id, request.skip_metadata, deadline)
                cause = response.fallback_cause
                outcome = ("full_text" if response.text_source == fetcher_pb2.TEXT_SOURCE_FULL_TEXT
                           else fetcher_pb2.FallbackCause.Name(cause).removeprefix(
                               "FALLBACK_CAUSE_").lower())
                metrics.FETCHES.labels(outcome).inc()
                return response
            except CiteweaveError as exc:
                outcome = f"error_{exc.code.name.lower()}"
                raise
            finally:
                log.info(
                    "fetch",
                    extra={
                        "id": request.id[:200],
                        "outcome": outcome,
                        "cache_hit": bool(response and response.from_cache),
                        "ms": round(_ms(start), 1),
                        "pdf_bytes": response.pdf_bytes if response else 0,
                        "download_ms": round(response.download_ms, 1) if response else 0.0,
                        "extract_ms": round(response.extract_ms, 1) if response else 0.0,
                        "pages": len(response.pages) if response else 0,
                        "reason": response.fallback_reason if response else "",
                    },
                )

    def _budget(self, deadline: float | None, cap: float | None = None) -> float | None:
        """Seconds left before the caller's deadline (less the response margin), at most cap."""
        if deadline is None:
            return cap
        left = max(0.0, deadline - asyncio.get_running_loop().time())
        return left if cap is None else min(cap, left)

    async def _fetch(
        self, paper_id: PaperId, skip_metadata: bool, deadline: float | None
    ) -> fetcher_pb2.FetchPaperResponse:
        record = None
        if paper_id.arxiv and not skip_metadata:
            budget = self._budget(deadline, self.settings.metadata_timeout_s)
            record = await self.metadata.get(paper_id, budget)
        pdf_id = paper_id
        if record is not None and not paper_id.versioned and record.version is not None:
            # The PDF of the version the record describes: text and metadata agree, and the
            # cache entry never expires.
            pdf_id = paper_id.with_version(record.version)
        response = fetcher_pb2.FetchPaperResponse(
            metadata=_metadata(paper_id, record, self.source.url_for(pdf_id))
        )
        try:
            pdf = await self._pdf(paper_id, pdf_id, deadline)
            response.metadata.pdf_url = pdf.url
            response.from_cache = pdf.from_cache
            response.pdf_bytes = len(pdf.data)
            response.download_ms = pdf.download_ms
            extract_start = time.perf_counter()
            try:
                extraction = await self._extract(pdf.data, deadline)
            finally:
                response.extract_ms = _ms(extract_start)  # a refused PDF took time too
            pages, dropped = _pages(extraction)
            response.pages.extend(pages)
            response.dropped_parts.extend(dropped)
            response.page_count = extraction.page_count
            response.text_source = fetcher_pb2.TEXT_SOURCE_FULL_TEXT
        except PdfProblem as problem:
            self._fall_back(response, problem.problem, problem.message)
        except Exception as exc:  # noqa: BLE001 - nothing a PDF does may fail the call
            log.exception("reading the PDF failed unexpectedly", extra={"id": paper_id.value})
            self._fall_back(
                response, Problem.UNREADABLE, f"the PDF could not be read ({type(exc).__name__})"
            )
        return response

    @staticmethod
    def _fall_back(response: fetcher_pb2.FetchPaperResponse, problem: Problem, reason: str) -> None:
        del response.pages[:]
        del response.dropped_parts[:]
        response.text_source = fetcher_pb2.TEXT_SOURCE_ABSTRACT_ONLY
        response.fallback_cause = FALLBACK_CAUSES[problem]
        response.fallback_reason = reason

    async def _pdf(self, asked: PaperId, pdf_id: PaperId, deadline: float | None) -> PdfBytes:
        """The PDF from the cache or its source; one load per id at a time in this process."""
        budget = self._budget(deadline)
        key = pdf_id.value
        try:
            pdf, joined = await self.flights.run(key, lambda: self._load(asked, pdf_id), budget)
        except TimeoutError:
            raise PdfProblem(
                Problem.TIMEOUT,
                f"the PDF of {pdf_id.value} did not arrive within the {budget:.1f}s left before "
                "the call's deadline",
            ) from None
        if joined:
            metrics.SHARED_DOWNLOADS.inc()
        return pdf

    async def _load(self, asked: PaperId, pdf_id: PaperId) -> PdfBytes:
        if self.source.local:
            # Reading the directory costs what reading the cache would; nothing is copied.
            local = await self.source.fetch(pdf_id)
            return PdfBytes(local.data, local.url, False, local.download_ms)
        url = self.source.url_for(pdf_id)
        cache = self.cache if self.settings.cache_max_mb else None
        if cache is not None:
            try:
                cached = await self.io(cache.get, pdf_id.value)
            except Exception:  # noqa: BLE001 - a cache that cannot be read is a miss
                log.exception("could not read the PDF cache", extra={"id": pdf_id.value})
                cached = None
            if cached is not None:
                metrics.CACHE_HITS.inc()
                return PdfBytes(cached.data, url, True, 0.0)
            metrics.CACHE_MISSES.inc()
        downloaded = await self.source.fetch(pdf_id)
        if cache is not None:
            # Under the id downloaded and, when that is a version resolved from the record,
            # under the id asked for (expiring): both name one blob.
            keys = {pdf_id.value: not pdf_id.versioned, asked.value: not asked.versioned}
            try:
                for key, expires in keys.items():
                    await self.io(cache.put, key, downloaded.data, expires)
            except Exception:  # noqa: BLE001 - a cache that cannot be written costs speed only
                log.exception("could not cache a PDF", extra={"id": pdf_id.value})
        return PdfBytes(downloaded.data, downloaded.url, False, downloaded.download_ms)

    async def _extract(self, data: bytes, deadline: float | None) -> Extraction:
        if len(data) > self.settings.max_pdf_bytes:  # cached under a larger limit
            raise too_large("the PDF", len(data), self.settings.max_pdf_bytes)
        budget = self._budget(deadline)
        start = time.perf_counter()
        try:
            extraction = await asyncio.wait_for(self.extractor.extract(data), budget)
        except TimeoutError:
            raise PdfProblem(
                Problem.TIMEOUT,
                f"the text extraction did not finish within the {budget:.1f}s left before the "
                "call's deadline",
            ) from None
        metrics.EXTRACT_SECONDS.observe(time.perf_counter() - start)
        return extraction

    # -- ExtractPdf -------------------------------------------------------------------------

    async def extract_pdf(
        self, request: fetcher_pb2.ExtractPdfRequest
    ) -> fetcher_pb2.ExtractPdfResponse:
        name = request.filename[:FILENAME_SHOWN_CHARS]
        label = repr(name) if name else "the PDF"
        size = len(request.pdf)
        if not size:
            metrics.EXTRACT_PDF_CALLS.labels("empty").inc()
            named = f" ({name})" if name else ""
            raise InvalidArgument(f"pdf is empty; send the bytes of a PDF file{named}")
        limit = self.settings.max_pdf_bytes
        if size > limit:
            metrics.EXTRACT_PDF_CALLS.labels(Problem.TOO_LARGE.value).inc()
            raise InvalidArgument(
                f"{label} is {size / MIB:.1f} MiB; the limit is {self.settings.max_pdf_mb:g} MiB "
                "(CITEWEAVE_FETCHER_MAX_PDF_MB)"
            )
        self._check_ready()
        start = time.perf_counter()
        try:
            extraction = await self.extractor.extract(bytes(request.pdf))
        except PdfProblem as problem:
            metrics.EXTRACT_PDF_CALLS.labels(problem.problem.value).inc()
            message = f"{name}: {problem.message}" if name else problem.message
            raise InvalidArgument(message) from None
        elapsed = time.perf_counter() - start
        metrics.EXTRACT_SECONDS.observe(elapsed)
        metrics.EXTRACT_PDF_CALLS.labels("ok").inc()
        pages, dropped = _pages(extraction)
        log.info("extract", extra={"upload": name, "pdf_bytes": size, "pages": len(pages),
                                   "ms": round(elapsed * 1000.0, 1)})
        return fetcher_pb2.ExtractPdfResponse(
            pages=pages, dropped_parts=dropped, page_count=extraction.page_count,
            title=extraction.title, extract_ms=extraction.extract_ms or elapsed * 1000.0,
        )
