"""The pipeline up to the shortlist: the input (an abstract, or the PDF of the user's own paper)
becomes query vectors, the retriever selects the longlist, the depth stage the shortlist.

A full paper is searched with every kept page, not only its first: each page is a query vector,
and the retriever scores a candidate by its similarity to all pages (sum by default; see
services/retriever/aggregation.py for why), both for the longlist and for choosing pages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from citeweave.fetcher.v1 import fetcher_pb2
from citeweave.retriever.v1 import retriever_pb2
from services.gateway.depth import PAGE_EMBED_CHARS, DepthOptions, DepthStage, Progress, Shortlist
from services.gateway.peers import Peers

# The retriever's limit on query vectors per request.
MAX_INPUT_PAGES = 200


@dataclass
class QueryInput:
    """What the pipeline searches with."""

    kind: str  # "abstract" or "pdf"
    text: str  # the abstract, or the kept pages joined (for the writer)
    vectors: np.ndarray  # unit rows: one for an abstract, one per kept page for a PDF
    page_numbers: list[int] = field(default_factory=list)
    title: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass
class PipelineResult:
    query: QueryInput
    longlist: retriever_pb2.SearchResponse
    shortlist: Shortlist
    seconds: dict[str, float]


async def abstract_input(peers: Peers, abstract: str, timeout_s: float) -> QueryInput:
    text = abstract.strip()
    if not text:
        raise ValueError("the abstract is empty")
    return QueryInput("abstract", text, await peers.embed([text], timeout_s))


@dataclass
class ExtractedPdf:
    pages: list  # fetcher Page messages, in page order, at most MAX_INPUT_PAGES
    title: str
    warnings: list[str]


async def extract_pdf(peers: Peers, pdf: bytes, filename: str, timeout_s: float) -> ExtractedPdf:
    """The PDF's kept pages, extracted and filtered by the fetcher (INVALID_ARGUMENT from it for
    a bad PDF)."""
    extracted = await peers.fetcher.ExtractPdf(
        fetcher_pb2.ExtractPdfRequest(pdf=pdf, filename=filename), timeout=timeout_s
    )
    pages = list(extracted.pages)
    warnings = []
    if len(pages) > MAX_INPUT_PAGES:
        warnings.append(
            f"the PDF has {len(pages)} content pages; the first {MAX_INPUT_PAGES} were searched"
        )
        pages = pages[:MAX_INPUT_PAGES]
    return ExtractedPdf(pages, extracted.title, warnings)


async def pages_input(peers: Peers, extracted: ExtractedPdf, timeout_s: float) -> QueryInput:
    """Every kept page embedded: the query of a whole paper."""
    pages = extracted.pages
    vectors = await peers.embed([p.text[:PAGE_EMBED_CHARS] for p in pages], timeout_s)
    return QueryInput(
        "pdf", "\n\n".join(p.text for p in pages), vectors,
        page_numbers=[p.number for p in pages], title=extracted.title,
        warnings=list(extracted.warnings),
    )


async def pdf_input(peers: Peers, pdf: bytes, filename: str, timeout_s: float) -> QueryInput:
    return await pages_input(peers, await extract_pdf(peers, pdf, filename, timeout_s), timeout_s)


def search_request(
    query: QueryInput, options: DepthOptions, search_filter: retriever_pb2.SearchFilter | None
) -> retriever_pb2.SearchRequest:
    request = retriever_pb2.SearchRequest(
        breadth=options.breadth, diversity=options.diversity, rule=options.rule,
        filter=search_filter, page_aggregation=options.page_aggregation,
        # The writer groups the shortlist into themes by these (3 * breadth x 768 floats).
        include_vectors=True,
    )
    if len(query.vectors) == 1:
        request.query_vector.extend(query.vectors[0].tolist())
    else:
        request.query_vectors.extend(
            retriever_pb2.CandidateVector(values=v.tolist()) for v in query.vectors
        )
    return request


async def run_to_shortlist(
    peers: Peers,
    query: QueryInput,
    options: DepthOptions,
    search_filter: retriever_pb2.SearchFilter | None = None,
    progress: Progress | None = None,
    timeout_s: float = 60.0,
) -> PipelineResult:
    progress = progress or (lambda *args: None)
    start = time.perf_counter()
    longlist = await peers.retriever.Search(
        search_request(query, options, search_filter), timeout=timeout_s
    )
    seconds = {"longlist": time.perf_counter() - start}
    progress("longlist", len(longlist.papers), len(longlist.papers),
             f"longlist of {len(longlist.papers)} papers selected")
    shortlist = await DepthStage(peers, options, progress).run(query.vectors, longlist.papers)
    seconds.update(shortlist.seconds)
    shortlist.warnings[:0] = query.warnings
    return PipelineResult(query, longlist, shortlist, seconds)
