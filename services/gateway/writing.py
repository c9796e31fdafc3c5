"""From a shortlist to a written section: one Summarize per shortlisted paper (concurrently, up to
`concurrency` in flight), then one streamed Synthesize over all of them.

Each paper goes to the generator with its corpus record as the retriever returned it and the pages
the depth stage chose (none when it was judged on its abstract). The synthesis gets each paper's
summary, vector (when the longlist carried one), pages and shortlist score. The streamed deltas
are collected into the text, dropping what came before a reset; the final SynthesisResult is the
authority (its text equals the deltas since the last reset).

A gRPC error of the generator is not handled here: it propagates, and the other summaries in
flight are cancelled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from citeweave.generator.v1 import generator_pb2 as gpb
from citeweave.generator.v1 import generator_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2
from services.gateway.depth import DeepPaper, Shortlist

# (stage, done, total, message): ("summarizing", k, N, ...) after each summary, ("writing",
# characters so far, 0, ...) after each delta.
WriteProgress = Callable[[str, int, int, str], None]
# ("delta", text) for each streamed piece of text, ("reset", reason) when the text so far is void.
TextStream = Callable[[str, str], None]


@dataclass
class Written:
    result: gpb.SynthesisResult
    summaries: list[gpb.SummarizeResponse]  # in shortlist order
    seconds: dict[str, float]  # {"summarize": s, "synthesize": s}
    text: str = ""  # the deltas since the last reset, as a streaming client shows them
    resets: int = 0  # how often the generator voided the text streamed so far


def source_paper(paper: retriever_pb2.Paper) -> gpb.SourcePaper:
    return gpb.SourcePaper(
        id=paper.id, title=paper.title, abstract=paper.abstract, authors=list(paper.authors),
        year=paper.year, url=paper.url, categories=list(paper.categories),
    )


def page_texts(paper: DeepPaper) -> list[gpb.PageText]:
    return [gpb.PageText(number=page.number, text=page.text) for page in paper.pages]


# The names clients and the command line use for the generator's enums.
BACKEND_BY_NAME = {"extractive": gpb.BACKEND_EXTRACTIVE, "openai": gpb.BACKEND_OPENAI}
STYLE_BY_NAME = {"numeric": gpb.CITATION_STYLE_NUMERIC,
                 "author-year": gpb.CITATION_STYLE_AUTHOR_YEAR}


def backend_name(value: int) -> str:
    """"extractive", "openai" ("unspecified" for the default)."""
    return gpb.Backend.Name(value).removeprefix("BACKEND_").lower()


async def _summarize_all(
    generator: generator_pb2_grpc.GeneratorServiceStub,
    source_text: str,
    papers: list[DeepPaper],
    mode: int,
    backend: int,
    concurrency: int,
    progress: WriteProgress,
    timeout_s: float,
) -> list[gpb.SummarizeResponse]:
    gate = asyncio.Semaphore(max(1, concurrency))
    done = 0

    async def one(paper: DeepPaper) -> gpb.SummarizeResponse:
        nonlocal done
        async with gate:
            reply = await generator.Summarize(
                gpb.SummarizeRequest(
                    source_text=source_text, paper=source_paper(paper.scored.paper),
                    pages=page_texts(paper), backend=backend, mode=mode,
                ),
                timeout=timeout_s,
            )
        done += 1
        how = backend_name(reply.backend)
        if reply.fallback_reason:
            how += f" (fallback: {reply.fallback_reason})"
        progress("summarizing", done, len(papers), f"{paper.id}: {how}")
        return reply

    tasks = [asyncio.ensure_future(one(paper)) for paper in papers]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def write_section(
    generator: generator_pb2_grpc.GeneratorServiceStub,
    source_text: str,
    shortlist: Shortlist,
    *,
    mode: int = gpb.MODE_RELATED_WORK,
    style: int = gpb.CITATION_STYLE_NUMERIC,
    backend: int = gpb.BACKEND_UNSPECIFIED,
    concurrency: int = 8,
    progress: WriteProgress | None = None,
    timeout_s: float = 300,
    on_text: TextStream | None = None,
) -> Written:
    """Summaries of every shortlisted paper, then the synthesis; `timeout_s` is the deadline of
    each call (one Summarize, or the whole Synthesize stream). ValueError for an empty shortlist."""
    progress = progress or (lambda *args: None)
    on_text = on_text or (lambda *args: None)
    papers = list(shortlist.papers)
    if not papers:
        raise ValueError("the shortlist is empty: there is nothing to write from")
    started = time.perf_counter()
    summaries = await _summarize_all(
        generator, source_text, papers, mode, backend, concurrency, progress, timeout_s
    )
    summarized = time.perf_counter()
    request = gpb.SynthesizeRequest(
        source_text=source_text, mode=mode, citation_style=style, backend=backend,
        summaries=[
            gpb.PaperSummary(
                paper=source_paper(paper.scored.paper), summary=summary.summary,
                vector=list(paper.scored.vector), pages=page_texts(paper), relevance=paper.score,
            )
            for paper, summary in zip(papers, summaries, strict=True)
        ],
    )
    parts: list[str] = []
    chars = resets = 0
    result = None
    async for event in generator.Synthesize(request, timeout=timeout_s):
        kind = event.WhichOneof("event")
        if kind == "text_delta":
            parts.append(event.text_delta)
            chars += len(event.text_delta)
            on_text("delta", event.text_delta)
            progress("writing", chars, 0, f"{chars:,} characters written")
        elif kind == "reset":
            parts.clear()
            chars = 0
            resets += 1
            on_text("reset", event.reset.reason)
            progress("writing", 0, 0, f"starting over: {event.reset.reason}")
        elif kind == "result":
            result = event.result
    if result is None:
        raise RuntimeError("the generator ended the Synthesize stream without a result")
    finished = time.perf_counter()
    return Written(
        result=result, summaries=summaries,
        seconds={"summarize": summarized - started, "synthesize": finished - summarized},
        text="".join(parts), resets=resets,
    )
