"""Summaries and syntheses with either backend, and the fall back from the LLM to the extractive
writer. No gRPC here: app.py maps requests and responses.

Whatever writes the text, it goes through one CitationResolver, so both backends give the same
guarantee: every citation in the result names a shortlisted paper, with the corpus record's names
and year. An LLM failure never fails the call: the extractive writer takes over and the result
says why. A failure after text was streamed sends a Reset first, so the client drops that text.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from services.generator import extractive, metrics, prompts
from services.generator.citations import CitationResolver, CitationSpan, Reference, Removed, Style
from services.generator.llm import FaultKind, LlmFault, OpenAiBackend, Usage
from services.generator.output import OutputFilter
from services.generator.papers import Paper, with_keys
from services.generator.settings import BackendName, GeneratorSettings

log = logging.getLogger("citeweave.generator")

Mode = Literal["related_work", "answer"]
# Leave this much of the caller's deadline for the extractive fallback and the answer.
FALLBACK_MARGIN_S = 0.5
# Tokens kept free besides the answer: chat-template overhead of the endpoint.
TEMPLATE_TOKENS = 64
SUMMARY_EXCERPTS = 3
EXCERPT_DIVERSITY = 0.3
RETRYABLE_OUTPUT = (FaultKind.EMPTY, FaultKind.MALFORMED, FaultKind.REFUSAL)


class BackendUnavailable(Exception):
    """The request asks for the LLM backend and none is configured."""


@dataclass
class SummaryResult:
    paper_id: str
    summary: str
    usage: Usage
    backend: BackendName
    fallback_reason: str = ""
    excerpts: list[extractive.Excerpt] = field(default_factory=list)


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Reset:
    reason: str


@dataclass
class SynthesisOutcome:
    text: str
    citations: list[CitationSpan]
    references: list[Reference]
    bibtex: str
    removed: list[Removed]
    repaired: int
    usage: Usage
    backend: BackendName
    requested_backend: BackendName
    fallback_reason: str
    note: str
    papers_shortlisted: int
    uncited_paper_ids: list[str]
    elapsed_ms: float


@dataclass(frozen=True)
class _Written:
    """The LLM's text, complete and resolved."""

    text: str
    resolver: CitationResolver


def default_max_paragraphs(papers: int) -> int:
    return max(1, math.ceil(papers / 2))


class Generator:
    def __init__(self, settings: GeneratorSettings, llm: OpenAiBackend | None):
        self.settings = settings
        self.llm = llm

    def backend(self, requested: BackendName | None) -> BackendName:
        chosen = requested or self.settings.backend
        if chosen is BackendName.OPENAI and self.llm is None:
            raise BackendUnavailable(
                "the openai backend is not configured on this generator: set "
                "CITEWEAVE_GENERATOR_OPENAI_BASE_URL and _OPENAI_MODEL, or ask for the "
                "extractive backend"
            )
        return chosen

    def _prompt_chars(self, answer_tokens: int) -> int:
        tokens = self.settings.context_tokens - answer_tokens - TEMPLATE_TOKENS
        return int(tokens * self.settings.chars_per_token)

    @staticmethod
    def _deadline(time_remaining: float | None) -> float | None:
        if time_remaining is None:
            return None
        return time.monotonic() + max(0.0, time_remaining - FALLBACK_MARGIN_S)

    # --- summaries ----------------------------------------------------------------------------

    async def summarize(
        self, source: str, paper: Paper, mode: Mode, requested: BackendName | None,
        time_remaining: float | None = None,
    ) -> SummaryResult:
        backend = self.backend(requested)
        if backend is BackendName.OPENAI:
            try:
                result = await self._summarize_llm(source, paper, mode, self._deadline(time_remaining))
                metrics.REQUESTS.labels("Summarize", backend.value).inc()
                return result
            except LlmFault as fault:
                metrics.FALLBACKS.labels("Summarize", fault.kind.value).inc()
                log.warning("summary falls back to the extractive writer",
                            extra={"paper_id": paper.id, "reason": fault.reason})
                return self._summarize_extractive(source, paper, fault.reason)
        return self._summarize_extractive(source, paper, "")

    def _summarize_extractive(self, source: str, paper: Paper, fallback_reason: str) -> SummaryResult:
        metrics.REQUESTS.labels("Summarize", BackendName.EXTRACTIVE.value).inc()
        chosen = extractive.excerpts(source, paper, k=SUMMARY_EXCERPTS, diversity=EXCERPT_DIVERSITY)
        return SummaryResult(
            paper_id=paper.id, summary=" ".join(e.text for e in chosen), usage=Usage(),
            backend=BackendName.EXTRACTIVE, fallback_reason=fallback_reason, excerpts=chosen,
        )

    async def _summarize_llm(
        self, source: str, paper: Paper, mode: Mode, deadline: float | None
    ) -> SummaryResult:
        assert self.llm is not None
        template = prompts.SUMMARY_ANSWER if mode == "answer" else prompts.SUMMARY_RELATED_WORK
        pages = [(p.number, p.text) for p in paper.pages]
        budget = self._prompt_chars(self.settings.summary_max_tokens)
        try:
            messages = prompts.summary_messages(template, source, paper, pages, budget)
            completion = await self.llm.complete(messages, self.settings.summary_max_tokens, deadline)
        except LlmFault as fault:
            if fault.kind is not FaultKind.CONTEXT_OVERFLOW:
                raise
            # Our estimate of the model's tokens was too low: once more with half the room.
            messages = prompts.summary_messages(template, source, paper, pages, budget // 2)
            completion = await self.llm.complete(messages, self.settings.summary_max_tokens, deadline)
        # A summary is about one paper and is never shown with citations: any marker the model
        # wrote (keys it was never given, years) is dropped here.
        summary = CitationResolver([]).render(completion.text).strip()
        if not summary:
            raise LlmFault(FaultKind.EMPTY, "the summary had nothing but citations")
        return SummaryResult(
            paper_id=paper.id, summary=summary, usage=completion.usage, backend=BackendName.OPENAI
        )

    # --- synthesis ----------------------------------------------------------------------------

    async def synthesize(
        self, source: str, papers: Sequence[Paper], mode: Mode, style: Style,
        requested: BackendName | None, max_paragraphs: int = 0,
        time_remaining: float | None = None,
    ) -> AsyncIterator[Delta | Reset | SynthesisOutcome]:
        started = time.perf_counter()
        backend = self.backend(requested)
        papers = with_keys(papers)
        max_paragraphs = max_paragraphs or default_max_paragraphs(len(papers))
        fallback_reason = ""
        usage = Usage()
        if backend is BackendName.OPENAI:
            try:
                async for event in self._synthesize_llm(
                    source, papers, mode, style, max_paragraphs, usage,
                    self._deadline(time_remaining),
                ):
                    if isinstance(event, _Written):
                        yield self._outcome(
                            event.text, event.resolver, papers, usage, BackendName.OPENAI,
                            backend, "",
                            f"written by {self.llm.model} through an OpenAI-compatible endpoint; "
                            "every citation checked against the shortlist", started,
                        )
                        return
                    yield event
            except LlmFault as fault:
                metrics.FALLBACKS.labels("Synthesize", fault.kind.value).inc()
                log.warning("synthesis falls back to the extractive writer",
                            extra={"papers": len(papers), "reason": fault.reason})
                fallback_reason = fault.reason
        resolver = CitationResolver(papers, style)
        draft = extractive.write(
            source, papers, mode=mode, max_paragraphs=max_paragraphs,
            sentences_per_paper=self.settings.extractive_sentences,
        )
        paragraphs = draft.text.split("\n\n")
        rendered = []
        for i, paragraph in enumerate(paragraphs):
            piece = resolver.render(paragraph + ("\n\n" if i < len(paragraphs) - 1 else ""))
            rendered.append(piece)
            yield Delta(piece)
        note = draft.note if not fallback_reason else f"{draft.note}; the LLM failed ({fallback_reason})"
        yield self._outcome(
            "".join(rendered), resolver, papers, usage, BackendName.EXTRACTIVE, backend,
            fallback_reason, note, started,
        )

    async def _synthesize_llm(
        self, source: str, papers: list[Paper], mode: Mode, style: Style, max_paragraphs: int,
        usage: Usage, deadline: float | None,
    ) -> AsyncIterator[Delta | Reset | _Written]:
        """Deltas, then the written text; raises LlmFault (after a Reset when text was
        already shown) when the extractive writer must take over."""
        assert self.llm is not None
        template = prompts.SYNTHESIS_ANSWER if mode == "answer" else prompts.SYNTHESIS_RELATED_WORK
        budget = self._prompt_chars(self.settings.synthesis_max_tokens)
        output_retries = self.settings.output_retries
        overflow_retried = False
        while True:
            messages = prompts.synthesis_messages(template, source, papers, max_paragraphs, budget)
            resolver = CitationResolver(papers, style)
            output = OutputFilter(resolver)
            shown = False
            try:
                async for raw in self.llm.stream(
                    messages, self.settings.synthesis_max_tokens, usage, deadline
                ):
                    for delta in output.feed(raw):
                        shown = True
                        yield Delta(delta)
                for delta in output.finish():
                    shown = True
                    yield Delta(delta)
                output.check_echo(source, papers)
                if not resolver.citations:
                    raise LlmFault(FaultKind.EMPTY, "the text cites none of the shortlisted papers")
            except LlmFault as fault:
                metrics.LLM_FAULTS.labels(fault.kind.value).inc()
                log.info("synthesis attempt failed", extra={"reason": fault.reason, "shown": shown})
                if shown:
                    yield Reset(f"{fault.reason}; the extractive writer takes over")
                    raise
                if fault.kind is FaultKind.CONTEXT_OVERFLOW and not overflow_retried:
                    overflow_retried, budget = True, budget // 2
                    continue
                if fault.kind in RETRYABLE_OUTPUT and output_retries > 0:
                    output_retries -= 1
                    continue
                raise
            yield _Written(output.text, resolver)
            return

    def _outcome(
        self, text: str, resolver: CitationResolver, papers: Sequence[Paper], usage: Usage,
        backend: BackendName, requested: BackendName, fallback_reason: str, note: str,
        started: float,
    ) -> SynthesisOutcome:
        for removed in resolver.removed:
            metrics.CITATIONS_REMOVED.labels(removed.reason).inc()
        metrics.CITATIONS_REPAIRED.inc(resolver.repaired)
        metrics.REQUESTS.labels("Synthesize", backend.value).inc()
        cited = {c.paper_id for c in resolver.citations}
        return SynthesisOutcome(
            text=text, citations=list(resolver.citations), references=resolver.references(),
            bibtex=resolver.bibtex(), removed=list(resolver.removed), repaired=resolver.repaired,
            usage=usage, backend=backend, requested_backend=requested,
            fallback_reason=fallback_reason, note=note, papers_shortlisted=len(papers),
            uncited_paper_ids=[p.id for p in papers if p.id not in cited],
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
        )
