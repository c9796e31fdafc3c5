"""The CLI's stderr console and its one way to stop with an error a person can act on."""

from __future__ import annotations

import typer
from rich.console import Console

# soft_wrap: an error message stays one line a person (or grep) can read whole.
console = Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 1) -> None:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)
