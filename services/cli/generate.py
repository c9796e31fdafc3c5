"""`citeweave generate` and `citeweave answer`: the whole pipeline through the running gateway
(citeweave.client), a progress bar while it streams, then the text with its references.

The text and references go to stdout (so `> section.md` keeps them), the progress bar, warnings
and errors to stderr.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TimeElapsedColumn

from citeweave import client as cw
from services.cli.console import console, fail
from services.gateway.depth import BREADTH_MAX, BREADTH_MIN, DEPTH_MAX, DEPTH_MIN

DOWNSTREAM = tuple(f"the {name} " for name in ("embedder", "retriever", "fetcher", "generator"))
Style = Enum("Style", {name: name for name in cw.STYLES}, type=str)
Backend = Enum("Backend", {name: name for name in cw.BACKENDS}, type=str)

Breadth = Annotated[Optional[int], typer.Option(
    min=BREADTH_MIN, max=BREADTH_MAX, show_default=False,
    help=f"{BREADTH_MIN}..{BREADTH_MAX} papers in the shortlist, chosen from a longlist of "
         "3*breadth (default: the gateway's, 10).")]
Depth = Annotated[Optional[int], typer.Option(
    min=DEPTH_MIN, max=DEPTH_MAX, show_default=False,
    help=f"{DEPTH_MIN}..{DEPTH_MAX} pages chosen per paper (default: the gateway's, 2).")]
Diversity = Annotated[Optional[float], typer.Option(
    min=0.0, max=1.0, show_default=False,
    help="0..1; 0 is plain similarity (default: the gateway's, 0).")]
StyleOption = Annotated[Style, typer.Option("--style", help="How citations look in the text.")]
BackendOption = Annotated[Optional[Backend], typer.Option(
    "--backend", show_default=False,
    help="The writer: extractive (offline) or openai (the generator's LLM endpoint) "
         "(default: the gateway decides).")]
Categories = Annotated[list[str], typer.Option(
    "--category", help="Only papers in this arXiv category (repeatable).")]
AsJson = Annotated[bool, typer.Option(
    "--json", help="Print the whole result as one JSON object instead of the text.")]
BibtexOut = Annotated[Optional[Path], typer.Option(
    "--bibtex", dir_okay=False, help="Write the references' BibTeX to this file.")]
GatewayAddr = Annotated[str, typer.Option(
    "--gateway-addr", envvar="CITEWEAVE_GATEWAY_ADDR", help="Gateway gRPC host:port.")]
ApiKey = Annotated[Optional[str], typer.Option(
    "--api-key", envvar="CITEWEAVE_API_KEY", show_default=False,
    help="API key, when the gateway requires one.")]


def generate_command(
    abstract_file: Annotated[Optional[Path], typer.Option(
        exists=True, dir_okay=False, help="File holding the abstract to write for.")] = None,
    pdf: Annotated[Optional[Path], typer.Option(
        exists=True, dir_okay=False, help="Your own paper as a PDF, searched with every page.",
    )] = None,
    breadth: Breadth = None,
    depth: Depth = None,
    diversity: Diversity = None,
    style: StyleOption = Style["numeric"],
    backend: BackendOption = None,
    category: Categories = [],
    as_json: AsJson = False,
    bibtex: BibtexOut = None,
    gateway_addr: GatewayAddr = cw.DEFAULT_ADDR,
    api_key: ApiKey = None,
) -> None:
    """Write a related-work section for an abstract or a whole PDF, through the running gateway,
    and print it with its references. Exits 1 when the text could not be written (the shortlist
    is still printed)."""
    if (abstract_file is None) == (pdf is None):
        raise typer.BadParameter("give exactly one of --abstract-file and --pdf")
    abstract = abstract_file.read_text().strip() if abstract_file else None
    if abstract_file and not abstract:
        raise typer.BadParameter(f"{abstract_file} is empty", param_hint="--abstract-file")
    with _gateway(gateway_addr, api_key) as client:
        stream = client.generate(
            abstract, pdf=pdf, breadth=breadth, depth=depth, diversity=diversity,
            style=style.value, backend=backend.value if backend else None, categories=category,
        )
        result = follow(stream)
    pdf_title = result.proto.input_title
    show(result, f"Related work for “{pdf_title}”" if pdf_title else "Related work", as_json,
          bibtex)


def answer_command(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    breadth: Breadth = None,
    depth: Depth = None,
    diversity: Diversity = None,
    style: StyleOption = Style["numeric"],
    backend: BackendOption = None,
    category: Categories = [],
    as_json: AsJson = False,
    bibtex: BibtexOut = None,
    gateway_addr: GatewayAddr = cw.DEFAULT_ADDR,
    api_key: ApiKey = None,
) -> None:
    """Answer a question citing papers of the corpus, through the running gateway. Exits 1 when
    the text could not be written."""
    if not question.strip():
        raise typer.BadParameter("the question is empty", param_hint="QUESTION")
    with _gateway(gateway_addr, api_key) as client:
        stream = client.answer(
            question.strip(), breadth=breadth, depth=depth, diversity=diversity,
            style=style.value, backend=backend.value if backend else None, categories=category,
        )
        result = follow(stream)
    show(result, "Answer", as_json, bibtex)


def error_line(error: cw.CiteweaveClientError, addr: str) -> str:
    """One line a person can act on."""
    hint = ""
    if error.code == "UNAVAILABLE":
        # The gateway's UNAVAILABLE starts with the service behind it that is down; any other
        # comes from grpc here, when nothing answers at addr.
        if error.message.startswith(DOWNSTREAM):
            hint = " (`citeweave up` starts every service)"
        else:
            hint = f" (is the gateway running at {addr}? start it with `citeweave up`)"
    elif error.code == "UNAUTHENTICATED":
        hint = " (pass a key with --api-key or set CITEWEAVE_API_KEY)"
    elif (error.code == "RESOURCE_EXHAUSTED" and error.retry_after_s is not None
          and "retry" not in error.message):  # the gateway's message usually says it already
        hint = f" (retry after {error.retry_after_s:g} s)"
    elif error.code == "DEADLINE_EXCEEDED":
        hint = " (the gateway took too long; try a smaller --breadth or --depth)"
    return f"{error.code}: {error.message}{hint}"


@contextmanager
def _gateway(addr: str, api_key: str | None) -> Iterator[cw.Client]:
    try:
        with cw.Client(addr, api_key=api_key) as client:
            yield client
    except cw.CiteweaveClientError as error:
        fail(error_line(error, addr))


def follow(stream: cw.Stream) -> cw.Result:
    """The stream's Result, with a progress bar (on stderr) until it comes. Not drawn when stderr
    is no terminal: a log or a pipe would only get a stray blank line."""
    with stream, Progress("[progress.description]{task.description}", BarColumn(),
                          TaskProgressColumn(), TimeElapsedColumn(), console=console,
                          transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("connecting", total=100)

        def show(event: cw.Event) -> None:
            if isinstance(event, cw.Progress):
                text = event.message or event.stage
                if not text.startswith(event.stage):  # "fetching: 2004.07180: 2 pages chosen"
                    text = f"{event.stage}: {text}"
                bar.update(task, completed=event.percent, description=escape(text[:80]))
            elif isinstance(event, cw.TextReset):
                bar.console.print("[yellow]note:[/yellow] starting the text over: "
                                  + escape(event.reason), highlight=False)

        return stream.result(on_event=show)


def show(result: cw.Result, title: str, as_json: bool, bibtex: Path | None) -> None:
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_text(result, title)
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    if bibtex is not None:
        if result.bibtex:
            try:
                bibtex.write_text(result.bibtex)
            except OSError as exc:
                fail(f"cannot write {bibtex}: {exc.strerror}")
            console.print(f"BibTeX of {len(result.references)} references written to {bibtex}",
                          highlight=False)
        else:
            console.print(f"[yellow]warning:[/yellow] no references, {bibtex} not written")
    if result.generation_error:
        fail(f"the text could not be written: {result.generation_error}")


def print_shortlist(result: cw.Result) -> None:
    """The shortlist as a table: what the section was written from, and which pages were read."""
    table = Table(title=f"Shortlist: {len(result.shortlist)} of {len(result.longlist)} longlist "
                        "papers", title_justify="left")
    for column in ("#", "id", "title", "score", "read"):
        table.add_column(column)
    for paper in result.shortlist:
        read = ("abstract only" if paper.abstract_only
                else ", ".join(f"p{number}" for number in paper.chosen_pages))
        table.add_row(str(paper.rank), paper.id, paper.title, f"{paper.score:.3f}", read)
    Console().print(table)


def _print_text(result: cw.Result, title: str) -> None:
    out = Console(soft_wrap=True, highlight=False)
    if result.generation_error:
        out.print("[bold]Shortlist[/bold] (no text was written)")
        for paper in result.shortlist:
            out.print(f"{paper.rank}. {paper.title} ({paper.url or paper.id})", markup=False)
        return
    out.print(f"[bold]{title}[/bold]\n")
    out.print(result.text, markup=False)
    out.print("\n[bold]References[/bold]")
    for number, reference in enumerate(result.references, start=1):
        # Numeric markers number the list; author-year markers repeat what the entry says.
        marker = reference.marker if reference.marker.startswith("[") else f"{number}."
        line = f"{marker} {reference.formatted}"
        if reference.url and reference.url not in line:
            line += f" {reference.url}"
        out.print(line, markup=False)
    report = result.proto.report
    seconds = sum(result.timings.values())
    note = f"\n{report.papers_cited} of {report.papers_shortlisted} shortlisted papers cited; " \
           f"written by the {report.backend or 'default'} backend in {seconds:.1f} s"
    if report.citations_removed:
        note += f"; {report.citations_removed} invalid citations removed"
    console.print(note, highlight=False, markup=False)
