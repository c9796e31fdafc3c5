"""`citeweave pages FILE.pdf`: what the fetcher keeps of a PDF and what it drops, page by page."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from services.cli.console import console, fail


def pages_command(
    file: Annotated[Path, typer.Argument(help="The PDF to read.")],
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON object (kept and dropped pages) instead of a table.")
    ] = False,
    max_pages: Annotated[int, typer.Option(min=1, help="Refuse PDFs with more pages.")] = 300,
    timeout_s: Annotated[float, typer.Option(
        min=0.001, help="Give up on a PDF that takes longer to read (seconds).")] = 30.0,
) -> None:
    """Extract the page text of a PDF as the fetcher does: show which pages are kept and which
    parts are dropped (references, appendix, acknowledgements, empty pages)."""
    if not file.is_file():
        fail(f"{file} does not exist or is not a file")
    # Imported here: pymupdf takes about a second to import, which no other command should pay.
    from services.fetcher.extraction import Extractor
    from services.fetcher.pages import PdfProblem

    extractor = Extractor(timeout_s=timeout_s, workers=1, max_pages=max_pages)
    try:
        extraction = asyncio.run(extractor.extract(file.read_bytes()))
    except PdfProblem as exc:
        fail(f"{file}: {exc.message}")
    finally:
        extractor.close()
    if as_json:
        print(json.dumps(extraction.summary(), indent=2))
        return
    Console().print(_table(extraction))
    kept_chars = sum(len(p.text) for p in extraction.pages)
    console.print(
        f"{extraction.title or file.name}: {len(extraction.pages)} of {extraction.page_count} "
        f"pages kept ({sum(p.partial for p in extraction.pages)} in part), {kept_chars:,} "
        f"characters, read in {extraction.extract_ms:.0f} ms"
    )


def _table(extraction) -> Table:
    table = Table(title=f"Pages of {extraction.title}" if extraction.title else "Pages")
    for column, justify in (("page", "right"), ("part", "left"), ("chars", "right"),
                            ("heading", "left")):
        table.add_column(column, justify=justify)
    rows = [(p.number, 0, "kept in part" if p.partial else "kept", len(p.text), "")
            for p in extraction.pages]
    rows += [(d.number, 1, f"dropped: {d.reason.value}", d.chars, d.heading)
             for d in extraction.dropped]
    for number, _, what, chars, heading in sorted(rows, key=lambda row: row[:2]):
        style = None if what.startswith("kept") else "dim"
        table.add_row(str(number), what, f"{chars:,}", heading, style=style)
    return table
