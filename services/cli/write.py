"""Writing a section from the running stack and printing it: `citeweave demo` uses it, and so
will `citeweave generate`."""

from __future__ import annotations

import asyncio

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from citeweave.generator.v1 import generator_pb2 as gpb
from citeweave.generator.v1 import generator_pb2_grpc
from services.cli.console import console
from services.common.clients import aio_channel
from services.gateway.depth import Shortlist
from services.gateway.writing import Written, backend_name, write_section

WRITE_TIMEOUT_S = 600.0


async def _write(generator_addr: str, source_text: str, shortlist: Shortlist, style: int) -> Written:
    channel = aio_channel(generator_addr)
    try:
        stub = generator_pb2_grpc.GeneratorServiceStub(channel)
        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                      transient=True) as bar:
            task = bar.add_task("summarizing", total=len(shortlist.papers))

            def progress(stage: str, done: int, total: int, message: str) -> None:
                bar.update(task, description=f"{stage}: {message}"[:100], completed=done,
                           total=total or None)

            return await write_section(stub, source_text, shortlist, style=style,
                                       progress=progress, timeout_s=WRITE_TIMEOUT_S)
    finally:
        await channel.close()


def write(generator_addr: str, source_text: str, shortlist: Shortlist,
          style: int = gpb.CITATION_STYLE_NUMERIC) -> Written:
    """Raises grpc.RpcError for the caller's error handler."""
    return asyncio.run(_write(generator_addr, source_text, shortlist, style))


def print_section(written: Written, title: str = "Related work") -> None:
    result = written.result
    report = result.report
    console.print(f"\n[bold]{title}[/bold]\n")
    console.print(result.text, markup=False, highlight=False)
    console.print("\n[bold]References[/bold]")
    for reference in result.references:
        console.print(f"{reference.marker} {reference.formatted}", markup=False, highlight=False)
    backend = backend_name(report.backend)
    console.print(
        f"\n{report.papers_cited} of {report.papers_shortlisted} shortlisted papers cited; "
        f"written by the {backend} backend ({report.note})", highlight=False,
    )
    if report.fallback_reason:
        console.print(f"[yellow]warning:[/yellow] fell back: {report.fallback_reason}")
    if report.removed_citations:
        console.print(f"{len(report.removed_citations)} citations removed: " + "; ".join(
            f"{r.raw} ({r.reason})" for r in report.removed_citations[:10]), markup=False)
