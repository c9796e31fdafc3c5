"""The gateway's pipeline: a request in, a stream of progress events, text and one result out.

Citegeist's stages run in order: the input is read and embedded, the retriever selects the
longlist, the depth stage fetches full texts and chooses pages (papers concurrently), the
shortlist is summarized (concurrently) and the synthesis streams its text. The work runs in its
own task and talks to the caller through a queue, so a caller that goes away (a gRPC client
disconnecting, a browser closing the page) cancels the task and with it every downstream call.

Every downstream call gets the time left of the request's deadline. A service that cannot be
reached ends the request with UNAVAILABLE naming it, except the generator: when writing fails,
the result still carries the longlist and shortlist, and `generation_error` says why.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pymupdf
import grpc

from citeweave.gateway.v1 import gateway_pb2 as gw
from citeweave.generator.v1 import generator_pb2 as gpb
from citeweave.generator.v1 import generator_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2
from services.common.clients import aio_channel
from services.common.errors import (
    CiteweaveError,
    DeadlineExceeded,
    InvalidArgument,
    Unavailable,
    check_range,
)
from services.gateway import convert
from services.gateway.depth import (
    BREADTH_DEFAULT,
    BREADTH_MAX,
    BREADTH_MIN,
    DEPTH_DEFAULT,
    DEPTH_MAX,
    DEPTH_MIN,
    DepthOptions,
    DepthStage,
)
from services.gateway.peers import Peers
from services.gateway.pipeline import (
    QueryInput,
    abstract_input,
    extract_pdf,
    pages_input,
    search_request,
)
from services.gateway.settings import GatewaySettings
from services.gateway.writing import BACKEND_BY_NAME, backend_name, write_section

log = logging.getLogger("citeweave.gateway")

DIVERSITY_DEFAULT = 0.0
RULES = {
    gw.SELECTION_RULE_UNSPECIFIED: retriever_pb2.SELECTION_RULE_MMR,
    gw.SELECTION_RULE_MMR: retriever_pb2.SELECTION_RULE_MMR,
    gw.SELECTION_RULE_CITEGEIST_MIN: retriever_pb2.SELECTION_RULE_CITEGEIST_MIN,
}
STYLES = {
    gw.CITATION_STYLE_UNSPECIFIED: gpb.CITATION_STYLE_NUMERIC,
    gw.CITATION_STYLE_NUMERIC: gpb.CITATION_STYLE_NUMERIC,
    gw.CITATION_STYLE_AUTHOR_YEAR: gpb.CITATION_STYLE_AUTHOR_YEAR,
}
BACKENDS = {
    gw.GENERATOR_BACKEND_UNSPECIFIED: gpb.BACKEND_UNSPECIFIED,
    gw.GENERATOR_BACKEND_OPENAI: gpb.BACKEND_OPENAI,
    gw.GENERATOR_BACKEND_EXTRACTIVE: gpb.BACKEND_EXTRACTIVE,
}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# Where each stage's progress lies on the 0..100 bar: roughly where the time goes with full
# texts and the extractive writer (fetching dominates; an LLM makes summaries and writing longer).
PERCENT_SPANS = {
    "embedding": (0, 5), "longlist": (5, 10), "fetching": (10, 55), "pages": (55, 57),
    "shortlist": (57, 60), "summarizing": (60, 85), "writing": (85, 99), "done": (100, 100),
}
# A section of `breadth` papers runs to roughly this many characters a paper; the writing bar
# moves with the text and stops short of 99 if the text runs longer.
CHARS_PER_PAPER = 300
_END = object()


@dataclass
class Request:
    """A GenerateRelatedWork, Answer or SearchPapers request, checked."""

    kind: str  # "abstract", "pdf" or "question"
    text: str = ""
    pdf: bytes = b""
    filename: str = ""
    options: DepthOptions = field(default_factory=DepthOptions)
    search_filter: retriever_pb2.SearchFilter = field(default_factory=retriever_pb2.SearchFilter)
    style: int = gpb.CITATION_STYLE_NUMERIC
    backend: int = gpb.BACKEND_UNSPECIFIED


def _normalized(title: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", title.lower()))


# More per-paper "judged on its abstract only" warnings than this become one line (each paper's
# reason stays in the shortlist's fallback_reason).
MAX_PAPER_WARNINGS = 3


def _abstract_only_warnings(warnings: list[str]) -> list[str]:
    if len(warnings) <= MAX_PAPER_WARNINGS:
        return warnings
    return [f"{len(warnings)} shortlisted papers were judged on their abstract only, e.g. "
            f"{warnings[0]}; each paper's reason is in the shortlist"]


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded("the request ran out of time; ask for a smaller breadth or "
                                   "depth, or set a longer deadline")
        return min(left, cap) if cap else left


class ProgressBar:
    """Turns (stage, done, total, message) into Progress messages whose percent never goes down."""

    def __init__(self, emit: Callable[[gw.Progress], None], breadth: int):
        self.emit = emit
        self.breadth = breadth
        self.percent = 0

    def __call__(self, stage: str, done: int = 0, total: int = 0, message: str = "") -> None:
        low, high = PERCENT_SPANS[stage]
        if stage == "writing":
            fraction = min(1.0, done / (CHARS_PER_PAPER * self.breadth))
        else:
            fraction = done / total if total else 1.0
        percent = max(self.percent, int(low + (high - low) * fraction))
        if stage == "writing" and percent == self.percent and done:
            return  # one event per percent, not one per delta
        self.percent = percent
        self.emit(gw.Progress(stage=convert.STAGE_BY_NAME[stage], percent=percent,
                              message=message, done=done, total=total))


class Gateway:
    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.peers = Peers.connect(
            settings.embedder_addr_list, settings.retriever_addr, settings.fetcher_addr
        )
        self._generator_channel = aio_channel(settings.generator_addr)
        self.generator = generator_pb2_grpc.GeneratorServiceStub(self._generator_channel)
        self.addrs = {
            "embedder": settings.embedder_addrs, "retriever": settings.retriever_addr,
            "fetcher": settings.fetcher_addr, "generator": settings.generator_addr,
        }

    async def close(self) -> None:
        await self.peers.close()
        await self._generator_channel.close()

    # The public calls.

    async def generate(
        self, request: gw.GenerateRelatedWorkRequest, deadline_s: float | None = None
    ) -> AsyncIterator[gw.GenerateRelatedWorkResponse]:
        which = request.WhichOneof("input")
        checked = self._check_input(which, request.abstract, request.pdf, request.filename)
        self._check_generation(checked, request.options, request.citation_style, request.backend)
        async for event in self._stream(checked, gpb.MODE_RELATED_WORK, deadline_s):
            yield gw.GenerateRelatedWorkResponse(**event)

    async def answer(
        self, request: gw.AnswerRequest, deadline_s: float | None = None
    ) -> AsyncIterator[gw.AnswerResponse]:
        question = request.question.strip()
        if not question:
            raise InvalidArgument("question is empty: ask a question about the literature")
        if len(question) > self.settings.max_question_chars:
            raise InvalidArgument(f"question has {len(question):,} characters; at most "
                                  f"{self.settings.max_question_chars:,} are accepted")
        checked = Request("question", text=question)
        self._check_generation(checked, request.options, request.citation_style, request.backend)
        async for event in self._stream(checked, gpb.MODE_ANSWER, deadline_s):
            yield gw.AnswerResponse(**event)

    async def search(
        self, request: gw.SearchPapersRequest, deadline_s: float | None = None
    ) -> gw.SearchPapersResponse:
        checked = self._check_input(request.WhichOneof("input"), request.abstract, request.pdf,
                                    request.filename)
        checked.options, checked.search_filter = self._options(request.options)
        deadline = Deadline(self._budget(deadline_s))
        start = time.perf_counter()
        query = await self._read_input(checked, deadline)
        embedded = time.perf_counter()
        longlist = await self._call(
            "retriever", self.peers.retriever.Search(
                search_request(query, checked.options, checked.search_filter),
                timeout=deadline.left()))
        return gw.SearchPapersResponse(
            longlist=[convert.longlist_paper(p) for p in longlist.papers],
            timings=convert.timings({"embedding": embedded - start,
                                     "longlist": time.perf_counter() - embedded}),
            warnings=query.warnings,
        )

    async def info(self) -> gw.GetInfoResponse:
        """What this endpoint accepts. Downstream facts (backends, store size) are left empty
        when their service does not answer within a second: the ranges still hold."""
        reply = gw.GetInfoResponse(
            breadth=gw.Range(min=BREADTH_MIN, max=BREADTH_MAX, default=BREADTH_DEFAULT),
            depth=gw.Range(min=DEPTH_MIN, max=DEPTH_MAX, default=DEPTH_DEFAULT),
            diversity=gw.Range(min=0, max=1, default=DIVERSITY_DEFAULT),
            max_abstract_chars=self.settings.max_abstract_chars,
            max_question_chars=self.settings.max_question_chars,
            max_pdf_bytes=self.settings.max_pdf_bytes,
            max_pdf_pages=self.settings.max_pdf_pages,
            default_backend=self.settings.default_backend,
        )
        try:
            generator = await self.generator.GetInfo(gpb.GetInfoRequest(), timeout=1.0)
            if not reply.default_backend:
                reply.default_backend = backend_name(generator.default_backend)
            if self.settings.allow_backend_choice:
                reply.backends.extend(backend_name(b) for b in generator.backends)
        except grpc.RpcError:
            pass
        try:
            stats = await self.peers.retriever.Stats(retriever_pb2.StatsRequest(), timeout=1.0)
            reply.papers = stats.paper_count
        except grpc.RpcError:
            pass
        return reply

    # Checking requests.

    def _check_input(self, which: str | None, abstract: str, pdf: bytes, filename: str) -> Request:
        if which == "pdf":
            return Request("pdf", pdf=self._check_pdf(pdf, filename or "the upload"),
                           filename=filename or "upload.pdf")
        text = abstract.strip()
        if not text:
            raise InvalidArgument("give an abstract (text) or the PDF of your paper")
        if len(text) > self.settings.max_abstract_chars:
            raise InvalidArgument(
                f"the abstract has {len(text):,} characters; at most "
                f"{self.settings.max_abstract_chars:,} are accepted (for a whole paper, send the PDF)")
        return Request("abstract", text=text)

    def _check_pdf(self, pdf: bytes, name: str) -> bytes:
        limit = self.settings.max_pdf_bytes
        if len(pdf) > limit:
            raise InvalidArgument(f"{name} is {len(pdf) / 2**20:.1f} MiB; PDFs up to "
                                  f"{limit / 2**20:g} MiB are accepted")
        if not pdf.lstrip()[:5] == b"%PDF-":
            raise InvalidArgument(f"{name} is not a PDF: upload the PDF of your paper")
        try:
            with pymupdf.open(stream=pdf, filetype="pdf") as document:
                pages = document.page_count
        except Exception as exc:  # pymupdf raises several types for broken files
            raise InvalidArgument(f"{name} could not be read as a PDF ({exc})") from None
        if pages > self.settings.max_pdf_pages:
            raise InvalidArgument(f"{name} has {pages} pages; PDFs of up to "
                                  f"{self.settings.max_pdf_pages} pages are accepted")
        return pdf

    def _options(
        self, options: gw.RetrievalOptions
    ) -> tuple[DepthOptions, retriever_pb2.SearchFilter]:
        breadth = options.breadth if options.HasField("breadth") else BREADTH_DEFAULT
        depth = options.depth if options.HasField("depth") else DEPTH_DEFAULT
        diversity = options.diversity if options.HasField("diversity") else DIVERSITY_DEFAULT
        check_range("breadth", breadth, BREADTH_MIN, BREADTH_MAX)
        check_range("depth", depth, DEPTH_MIN, DEPTH_MAX)
        check_range("diversity", diversity, 0.0, 1.0)
        if options.rule not in RULES:
            raise InvalidArgument(f"rule {options.rule} is not a known selection rule")
        filters = options.filters
        for name in ("date_from", "date_to"):
            value = getattr(filters, name)
            if value and not _DATE.match(value):
                raise InvalidArgument(f"filters.{name} must be YYYY-MM-DD, got {value!r}")
        depth_options = DepthOptions(
            breadth=breadth, depth=depth, diversity=diversity, rule=RULES[options.rule],
            concurrency=self.settings.fetch_concurrency,
        )
        search_filter = retriever_pb2.SearchFilter(
            categories=list(filters.categories), topics=list(filters.topics),
            date_from=filters.date_from, date_to=filters.date_to,
        )
        return depth_options, search_filter

    def _check_generation(self, checked: Request, options: gw.RetrievalOptions, style: int,
                          backend: int) -> None:
        checked.options, checked.search_filter = self._options(options)
        if style not in STYLES:
            raise InvalidArgument(f"citation_style {style} is not numeric or author-year")
        if backend not in BACKENDS:
            raise InvalidArgument(f"backend {backend} is not extractive or openai")
        checked.style = STYLES[style]
        if backend != gw.GENERATOR_BACKEND_UNSPECIFIED and not self.settings.allow_backend_choice:
            raise InvalidArgument("this endpoint does not let requests choose the generator "
                                  "backend; leave it unset")
        checked.backend = (BACKENDS[backend] if backend != gw.GENERATOR_BACKEND_UNSPECIFIED
                           else BACKEND_BY_NAME.get(self.settings.default_backend,
                                                    gpb.BACKEND_UNSPECIFIED))

    def _budget(self, deadline_s: float | None) -> float:
        if deadline_s is None:
            return self.settings.request_timeout_s
        return min(deadline_s, self.settings.request_timeout_s)

    # Running the pipeline.

    async def _call(self, service: str, call: Awaitable):
        """Awaits a downstream call; UNAVAILABLE naming the service when it cannot be reached,
        DEADLINE_EXCEEDED when the request's time ran out in it."""
        try:
            return await call
        except grpc.RpcError as error:
            raise self._downstream_error(service, error) from None

    def _downstream_error(self, service: str, error: grpc.RpcError) -> CiteweaveError:
        code = error.code()
        # Of several embedder replicas, the ones tried (EmbedderCallError.addr).
        where = f"the {service} ({getattr(error, 'addr', None) or self.addrs[service]})"
        if code == grpc.StatusCode.UNAVAILABLE:
            return Unavailable(f"{where} is unavailable: {error.details()}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return DeadlineExceeded(f"the request ran out of time in {where}")
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            return InvalidArgument(error.details())
        failed = CiteweaveError(f"{where} failed ({code.name}): {error.details()}")
        failed.code = code if code != grpc.StatusCode.CANCELLED else grpc.StatusCode.INTERNAL
        return failed

    async def _read_input(self, checked: Request, deadline: Deadline) -> QueryInput:
        if checked.kind == "pdf":
            extracted = await self._call("fetcher", extract_pdf(
                self.peers, checked.pdf, checked.filename, deadline.left()))
            return await self._call("embedder", pages_input(self.peers, extracted,
                                                            deadline.left()))
        return await self._call("embedder", abstract_input(self.peers, checked.text,
                                                           deadline.left()))

    async def _stream(self, checked: Request, mode: int,
                      deadline_s: float | None) -> AsyncIterator[dict]:
        queue: asyncio.Queue = asyncio.Queue()
        task = asyncio.create_task(self._run(checked, mode, Deadline(self._budget(deadline_s)),
                                             queue.put_nowait))
        task.add_done_callback(lambda _: queue.put_nowait(_END))
        try:
            while (event := await queue.get()) is not _END:
                yield event
            task.result()  # raises what the pipeline raised
        finally:
            if not task.done():
                task.cancel()
                log.info("request cancelled by the caller; downstream calls cancelled")
                await asyncio.gather(task, return_exceptions=True)

    async def _run(self, checked: Request, mode: int, deadline: Deadline,
                   emit: Callable[[dict], None]) -> None:
        options = checked.options
        bar = ProgressBar(lambda p: emit({"progress": p}), options.breadth)
        seconds: dict[str, float] = {}
        started = time.perf_counter()
        bar("embedding", 0, 1, "reading the PDF" if checked.kind == "pdf" else
            "embedding the " + ("question" if checked.kind == "question" else "abstract"))
        query = await self._read_input(checked, deadline)
        seconds["embedding"] = time.perf_counter() - started
        what = (f"{len(query.vectors)} pages of {checked.filename} embedded"
                if checked.kind == "pdf" else "input embedded")
        bar("embedding", 1, 1, what)

        start = time.perf_counter()
        longlist = await self._call("retriever", self.peers.retriever.Search(
            search_request(query, options, checked.search_filter), timeout=deadline.left()))
        seconds["longlist"] = time.perf_counter() - start
        if not longlist.papers:
            raise InvalidArgument("no paper in the corpus matches these filters; widen them")
        candidates = self._without_input_paper(query, list(longlist.papers))
        bar("longlist", 1, 1, f"longlist of {len(candidates)} papers selected")

        options.fetch_timeout_s = min(options.fetch_timeout_s, deadline.left())
        options.embed_timeout_s = min(options.embed_timeout_s, deadline.left())

        def depth_progress(stage: str, done: int, total: int, message: str) -> None:
            bar(stage, done, total, message)

        shortlist = await DepthStage(self.peers, options, depth_progress).run(
            query.vectors, candidates)
        seconds["fetching"] = shortlist.seconds["depth"]
        self._check_fetcher_reached(shortlist.longlist)
        shortlist.warnings[:] = query.warnings + _abstract_only_warnings(shortlist.warnings)
        result = gw.GenerationResult(
            longlist=[convert.ranked_paper(p, p.scored.rank) for p in shortlist.longlist],
            shortlist=[convert.ranked_paper(p, rank)
                       for rank, p in enumerate(shortlist.papers, start=1)],
            warnings=shortlist.warnings, input_kind=query.kind if checked.kind != "question"
            else "question", input_title=query.title,
        )

        def text(kind: str, value: str) -> None:
            emit({"text_delta": value} if kind == "delta" else
                 {"reset": gw.TextReset(reason=value)})

        try:
            written = await write_section(
                self.generator, self._source_text(query), shortlist, mode=mode, style=checked.style,
                backend=checked.backend, concurrency=self.settings.summary_concurrency,
                progress=bar, timeout_s=deadline.left(), on_text=text,
            )
        except (grpc.RpcError, RuntimeError) as error:
            failure = (self._downstream_error("generator", error)
                       if isinstance(error, grpc.RpcError) else CiteweaveError(str(error)))
            result.generation_error = (f"{failure.message}. The shortlist is returned without "
                                       "a written section.")
            log.warning("generation failed", extra={"detail": failure.message})
        else:
            seconds["summarizing"] = written.seconds["summarize"]
            seconds["writing"] = written.seconds["synthesize"]
            convert.fill_generation(result, written.result)
            if written.result.report.fallback_reason:
                result.warnings.append("the LLM was not used: "
                                       f"{written.result.report.fallback_reason}")
        result.timings.extend(convert.timings(seconds))
        bar("done", 1, 1, "done" if not result.generation_error else "shortlist ready; "
            "the section could not be written")
        emit({"result": result})

    @staticmethod
    def _without_input_paper(query: QueryInput, papers: list) -> list:
        """A PDF of a paper that is in the corpus finds itself first; it is not related work."""
        title = _normalized(query.title)
        if not title:
            return papers
        kept = [p for p in papers if _normalized(p.paper.title) != title]
        for paper in papers:
            if paper not in kept:
                query.warnings.append(f"{paper.paper.id} is the input paper itself "
                                      f"(“{paper.paper.title}”) and was left out")
        return kept

    def _source_text(self, query: QueryInput) -> str:
        """What the writer relates the papers to: the abstract or question, or for a PDF its
        first pages (title, abstract, introduction), not the whole paper."""
        return query.text[: self.settings.max_abstract_chars]

    def _check_fetcher_reached(self, papers) -> None:
        """Every paper's fetch failing because the fetcher cannot be reached is an outage, not
        a paper without a PDF: the request ends UNAVAILABLE naming it."""
        marker = f"fetcher failed ({grpc.StatusCode.UNAVAILABLE.name}"
        if papers and all(p.fallback_reason.startswith(marker) for p in papers):
            raise Unavailable(f"the fetcher ({self.addrs['fetcher']}) is unavailable: "
                              f"{papers[0].fallback_reason}")
