"""The generator gRPC service: Summarize, Synthesize (streamed), GetInfo.

Bad requests are INVALID_ARGUMENT naming the field; asking for the openai backend where none is
configured is FAILED_PRECONDITION. LLM failures are not errors: the extractive writer answers and
the response says why. Health is SERVING once the prompts are checked, whether or not an LLM
endpoint answers, because the extractive backend always can.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import grpc
import numpy as np

from citeweave.generator.v1 import generator_pb2 as pb
from citeweave.generator.v1 import generator_pb2_grpc
from services.common.errors import FailedPrecondition, InvalidArgument
from services.generator import prompts
from services.generator.citations import Style
from services.generator.generation import (
    BackendUnavailable,
    Delta,
    Generator,
    Mode,
    Reset,
    SummaryResult,
    SynthesisOutcome,
)
from services.generator.llm import OpenAiBackend, Usage
from services.generator.papers import Page, Paper
from services.generator.settings import BackendName, GeneratorSettings

log = logging.getLogger("citeweave.generator")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["GeneratorService"].full_name

BACKENDS = {
    pb.BACKEND_UNSPECIFIED: None,
    pb.BACKEND_OPENAI: BackendName.OPENAI,
    pb.BACKEND_EXTRACTIVE: BackendName.EXTRACTIVE,
}
BACKEND_ENUMS = {name: value for value, name in BACKENDS.items() if name is not None}
MODES: dict[int, Mode] = {
    pb.MODE_UNSPECIFIED: "related_work",
    pb.MODE_RELATED_WORK: "related_work",
    pb.MODE_ANSWER: "answer",
}
STYLES = {
    pb.CITATION_STYLE_UNSPECIFIED: Style.NUMERIC,
    pb.CITATION_STYLE_NUMERIC: Style.NUMERIC,
    pb.CITATION_STYLE_AUTHOR_YEAR: Style.AUTHOR_YEAR,
}


def _enum(table: dict, value: int, field: str, enum_name: str):
    if value not in table:
        names = ", ".join(pb.DESCRIPTOR.enum_types_by_name[enum_name].values_by_number[v].name
                          for v in table)
        raise InvalidArgument(f"{field} {value} is not one of {names}")
    return table[value]


class Limits:
    def __init__(self, settings: GeneratorSettings):
        self.settings = settings

    def source(self, text: str) -> str:
        text = text.strip()
        if not text:
            raise InvalidArgument("source_text is empty: give the abstract or the question")
        if len(text) > self.settings.max_source_chars:
            raise InvalidArgument(
                f"source_text has {len(text):,} characters, more than the "
                f"{self.settings.max_source_chars:,} accepted: send the abstract, not the paper"
            )
        return text

    def paper(self, paper: pb.SourcePaper, pages, where: str) -> Paper:
        if not paper.id.strip():
            raise InvalidArgument(f"{where}.id is empty: every paper needs its corpus id")
        if not (paper.title.strip() or paper.abstract.strip()):
            raise InvalidArgument(f"{where} ({paper.id}) has neither title nor abstract")
        if len(pages) > self.settings.max_pages:
            raise InvalidArgument(
                f"{where} ({paper.id}) has {len(pages)} pages, more than the "
                f"{self.settings.max_pages} accepted: send the chosen pages only"
            )
        for page in pages:
            if len(page.text) > self.settings.max_page_chars:
                raise InvalidArgument(
                    f"{where} ({paper.id}) page {page.number} has {len(page.text):,} characters, "
                    f"more than the {self.settings.max_page_chars:,} accepted"
                )
        return Paper(
            id=paper.id.strip(), title=paper.title.strip(), abstract=paper.abstract.strip(),
            authors=tuple(a.strip() for a in paper.authors if a.strip()), year=paper.year,
            url=paper.url, categories=tuple(paper.categories),
            pages=tuple(Page(p.number, p.text) for p in pages if p.text.strip()),
        )

    def summaries(self, summaries) -> list[Paper]:
        if not summaries:
            raise InvalidArgument("summaries is empty: give at least one shortlisted paper")
        if len(summaries) > self.settings.max_papers:
            raise InvalidArgument(
                f"{len(summaries)} papers, more than the {self.settings.max_papers} one synthesis "
                "accepts"
            )
        papers, seen, dims = [], set(), set()
        for i, item in enumerate(summaries):
            paper = self.paper(item.paper, item.pages, f"summaries[{i}].paper")
            if paper.id in seen:
                raise InvalidArgument(f"paper {paper.id} appears twice in summaries")
            seen.add(paper.id)
            vector = np.asarray(item.vector, dtype=np.float32) if item.vector else None
            if vector is not None:
                if not np.isfinite(vector).all():
                    raise InvalidArgument(f"summaries[{i}].vector has NaN or infinite values")
                dims.add(vector.shape[0])
            if not math.isfinite(item.relevance):
                raise InvalidArgument(f"summaries[{i}].relevance is not a finite number")
            papers.append(replace(paper, summary=item.summary.strip(), vector=vector,
                                relevance=item.relevance))
        if len(dims) > 1:
            raise InvalidArgument(f"paper vectors have different dimensions {sorted(dims)}")
        return papers


def _usage(usage: Usage) -> pb.TokenUsage:
    return pb.TokenUsage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)


def summary_response(result: SummaryResult) -> pb.SummarizeResponse:
    return pb.SummarizeResponse(
        paper_id=result.paper_id, summary=result.summary, usage=_usage(result.usage),
        backend=BACKEND_ENUMS[result.backend], fallback_reason=result.fallback_reason,
        excerpts=[pb.Excerpt(text=e.text, page=e.page, relevance=e.relevance)
                  for e in result.excerpts],
    )


def synthesis_result(outcome: SynthesisOutcome) -> pb.SynthesisResult:
    return pb.SynthesisResult(
        text=outcome.text,
        citations=[pb.Citation(paper_id=c.paper_id, marker=c.marker, start=c.start, end=c.end)
                   for c in outcome.citations],
        references=[pb.Reference(paper_id=r.paper_id, marker=r.marker, formatted=r.formatted,
                                 url=r.url, key=r.key) for r in outcome.references],
        bibtex=outcome.bibtex,
        report=pb.SynthesisReport(
            papers_cited=outcome.papers_shortlisted - len(outcome.uncited_paper_ids),
            papers_shortlisted=outcome.papers_shortlisted,
            removed_citations=[pb.RemovedCitation(raw=r.raw, reason=r.reason)
                               for r in outcome.removed],
            usage=_usage(outcome.usage),
            backend=BACKEND_ENUMS[outcome.backend],
            note=outcome.note,
            requested_backend=BACKEND_ENUMS[outcome.requested_backend],
            fallback_reason=outcome.fallback_reason,
            uncited_paper_ids=outcome.uncited_paper_ids,
            elapsed_ms=outcome.elapsed_ms,
            citations_repaired=outcome.repaired,
        ),
    )


class GeneratorServicer(generator_pb2_grpc.GeneratorServiceServicer):
    def __init__(self, app: "GeneratorApp"):
        self.app = app

    async def Summarize(self, request, context):
        return await self.app.summarize(request, context.time_remaining())

    async def Synthesize(self, request, context):
        async for response in self.app.synthesize(request, context.time_remaining()):
            yield response

    async def GetInfo(self, request, context):
        return self.app.info()


class GeneratorApp:
    """ServiceApp for services.common.server."""

    name = "generator"
    service_names = (SERVICE_NAME,)

    def __init__(self, settings: GeneratorSettings):
        self.settings = settings
        self.limits = Limits(settings)
        self.llm: OpenAiBackend | None = None
        self.generator = Generator(settings, None)
        for noisy in ("httpx", "httpx2", "httpcore", "openai"):
            logging.getLogger(noisy).setLevel(logging.WARNING)

    def register(self, server: grpc.aio.Server) -> None:
        generator_pb2_grpc.add_GeneratorServiceServicer_to_server(GeneratorServicer(self), server)

    async def warm_up(self) -> None:
        prompts.check_prompts()
        if self.settings.llm_configured:
            self.llm = OpenAiBackend(self.settings)
            self.generator = Generator(self.settings, self.llm)
        log.info(
            "generator ready",
            extra={"default_backend": self.settings.backend.value,
                   "llm_endpoint": self.settings.openai_base_url or None,
                   "model": self.settings.openai_model or None,
                   "max_concurrent_requests": self.settings.max_concurrent_requests},
        )

    async def close(self) -> None:
        if self.llm is not None:
            await self.llm.close()

    def _backend(self, value: int) -> BackendName | None:
        requested = _enum(BACKENDS, value, "backend", "Backend")
        try:
            self.generator.backend(requested)
        except BackendUnavailable as exc:
            raise FailedPrecondition(str(exc)) from None
        return requested

    async def summarize(self, request: pb.SummarizeRequest, time_remaining) -> pb.SummarizeResponse:
        source = self.limits.source(request.source_text)
        if not request.HasField("paper"):
            raise InvalidArgument("paper is missing: give the paper to summarize")
        paper = self.limits.paper(request.paper, request.pages, "paper")
        mode = _enum(MODES, request.mode, "mode", "Mode")
        backend = self._backend(request.backend)
        result = await self.generator.summarize(source, paper, mode, backend, time_remaining)
        return summary_response(result)

    async def synthesize(self, request: pb.SynthesizeRequest, time_remaining):
        source = self.limits.source(request.source_text)
        papers = self.limits.summaries(request.summaries)
        mode = _enum(MODES, request.mode, "mode", "Mode")
        style = _enum(STYLES, request.citation_style, "citation_style", "CitationStyle")
        backend = self._backend(request.backend)
        if request.max_paragraphs > len(papers):
            raise InvalidArgument(
                f"max_paragraphs {request.max_paragraphs} is more than the {len(papers)} papers"
            )
        async for event in self.generator.synthesize(
            source, papers, mode, style, backend, request.max_paragraphs, time_remaining
        ):
            if isinstance(event, Delta):
                yield pb.SynthesizeResponse(text_delta=event.text)
            elif isinstance(event, Reset):
                yield pb.SynthesizeResponse(reset=pb.TextReset(reason=event.reason))
            else:
                yield pb.SynthesizeResponse(result=synthesis_result(event))

    def info(self) -> pb.GetInfoResponse:
        backends = [pb.BACKEND_EXTRACTIVE] + ([pb.BACKEND_OPENAI] if self.llm else [])
        return pb.GetInfoResponse(
            default_backend=BACKEND_ENUMS[self.settings.backend], backends=backends,
            model=self.settings.openai_model if self.llm else "",
            max_concurrent_requests=self.settings.max_concurrent_requests,
        )
