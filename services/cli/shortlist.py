"""`citeweave shortlist`: longlist, full text and page choice for an abstract or a whole PDF,
through the running embedder, retriever and fetcher."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from citeweave.retriever.v1 import retriever_pb2
from services.cli.console import console
from services.gateway.depth import FULL_TEXT, DepthOptions
from services.gateway.peers import Peers
from services.gateway.pipeline import PipelineResult, abstract_input, pdf_input, run_to_shortlist

AGGREGATIONS = {
    "sum": retriever_pb2.PAGE_AGGREGATION_SUM,
    "max": retriever_pb2.PAGE_AGGREGATION_MAX,
}
INPUT_TIMEOUT_S = 300.0


async def _run(
    addrs: tuple[str, str, str], abstract: str | None, pdf: Path | None, options: DepthOptions,
    search_filter: retriever_pb2.SearchFilter,
) -> PipelineResult:
    peers = Peers.connect(*addrs)
    try:
        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                      transient=True) as bar:
            task = bar.add_task("embedding the input", total=None)
            if pdf is not None:
                query = await pdf_input(peers, pdf.read_bytes(), pdf.name, INPUT_TIMEOUT_S)
            else:
                query = await abstract_input(peers, abstract, INPUT_TIMEOUT_S)

            def progress(stage: str, done: int, total: int, message: str) -> None:
                bar.update(task, description=f"{stage}: {message}"[:100], completed=done,
                           total=total)

            return await run_to_shortlist(peers, query, options, search_filter, progress)
    finally:
        await peers.close()


def shortlist_dict(result: PipelineResult) -> dict:
    return {
        "input": {"kind": result.query.kind, "pages": result.query.page_numbers,
                  "title": result.query.title},
        "longlist_size": len(result.longlist.papers),
        "shortlist": [
            {
                "rank": rank,
                "id": p.id,
                "title": p.scored.paper.title,
                "score": round(p.score, 4),
                "abstract_similarity": round(p.scored.similarity, 4),
                "longlist_rank": p.scored.rank,
                "text_source": p.text_source,
                "fallback_reason": p.fallback_reason,
                "pages": [{"page": c.number, "similarity": round(c.similarity, 4),
                           "reason": c.reason, "text_chars": len(c.text)} for c in p.pages],
            }
            for rank, p in enumerate(result.shortlist.papers, start=1)
        ],
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        "warnings": result.shortlist.warnings,
    }


def print_shortlist(result: PipelineResult) -> None:
    papers = result.shortlist.papers
    full = sum(p.text_source == FULL_TEXT for p in result.shortlist.longlist)
    table = Table(
        title=f"Shortlist: {len(papers)} of {len(result.longlist.papers)} longlist papers "
              f"({full} with full text) in {sum(result.seconds.values()):.1f} s"
    )
    for column in ("#", "id", "title", "score", "pages chosen"):
        table.add_column(column)
    for rank, p in enumerate(papers, start=1):
        chosen = (", ".join(f"p{c.number} ({c.similarity:.2f})" for c in p.pages)
                  if p.text_source == FULL_TEXT else f"abstract only: {p.fallback_reason}")
        table.add_row(str(rank), p.id, p.scored.paper.title, f"{p.score:.3f}", chosen)
    Console().print(table)
    for warning in result.query.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")


def shortlist_for(
    addrs: tuple[str, str, str], abstract: str | None, pdf: Path | None, options: DepthOptions,
    search_filter: retriever_pb2.SearchFilter,
) -> PipelineResult:
    """Raises grpc.RpcError for the caller's error handler."""
    return asyncio.run(_run(addrs, abstract, pdf, options, search_filter))


def run_shortlist(
    addrs: tuple[str, str, str], abstract: str | None, pdf: Path | None, options: DepthOptions,
    search_filter: retriever_pb2.SearchFilter, as_json: bool,
) -> None:
    """Raises grpc.RpcError for the caller's error handler."""
    result = shortlist_for(addrs, abstract, pdf, options, search_filter)
    if as_json:
        print(json.dumps(shortlist_dict(result), indent=2))
    else:
        print_shortlist(result)

