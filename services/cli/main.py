"""`citeweave` command line: run the local stack, load a corpus, search, benchmark."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import grpc
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from services.cli.loader import DEMO_CORPUS, REPO, load
from services.cli.search import search_longlist
from services.cli.stack import LocalStack

os.environ.setdefault("HF_HUB_OFFLINE", "1")
app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
console = Console(stderr=True)
DEFAULT_LOG_DIR = REPO / "var" / "logs"
SAMPLE_ABSTRACT = REPO / "data" / "demo" / "sample-abstract.txt"

EmbedderAddr = Annotated[
    str, typer.Option(envvar="CITEWEAVE_EMBEDDER_ADDR", help="Embedder host:port.")
]
RetrieverAddr = Annotated[
    str, typer.Option(envvar="CITEWEAVE_RETRIEVER_ADDR", help="Retriever host:port.")
]


def _fail(message: str) -> None:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(1)


def _rpc_errors(func):
    """Turns gRPC errors into one line a person can act on instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except grpc.RpcError as exc:
            code = exc.code()
            hint = ""
            if code == grpc.StatusCode.UNAVAILABLE:
                hint = " (is the stack running? start it with `citeweave up`)"
            _fail(f"{code.name}: {exc.details()}{hint}")

    return wrapper


@app.command()
def up(
    log_dir: Annotated[Path, typer.Option(help="Where each service writes its log.")] = DEFAULT_LOG_DIR,
    timeout_s: Annotated[float, typer.Option(help="Seconds to wait for each service.")] = 600,
) -> None:
    """Start every service on 127.0.0.1 and keep them running until Ctrl-C or SIGTERM.

    Ports and settings come from each service's CITEWEAVE_<SVC>_* environment variables."""
    stack = LocalStack(log_dir=log_dir)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stack.start(timeout_s, log=console.print)
    except (TimeoutError, RuntimeError, ValueError) as exc:
        _fail(str(exc))
    console.print("[green]all services serving[/green]; Ctrl-C stops them")
    print("ready", flush=True)
    stop.wait()
    console.print("stopping")
    stack.stop()


@app.command("load")
@_rpc_errors
def load_command(
    source: Annotated[Path, typer.Argument(help="arXiv metadata JSON lines (.jsonl or .jsonl.gz).")] = DEMO_CORPUS,
    limit: Annotated[int, typer.Option(help="Load at most this many records; 0 = all.")] = 0,
    batch_size: Annotated[int, typer.Option(min=1, max=1024)] = 128,
    prebuilt_only: Annotated[bool, typer.Option(help="Skip papers without a prebuilt embedding.")] = False,
    embedder_addr: EmbedderAddr = "127.0.0.1:50051",
    retriever_addr: RetrieverAddr = "127.0.0.1:50052",
) -> None:
    """Fill the store from an arXiv metadata file (interim loader until `citeweave sync`)."""
    if not source.exists():
        _fail(f"{source} does not exist")
    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console,
    ) as progress:
        task = progress.add_task("loading", total=limit or None)
        counts = load(
            source, embedder_addr, retriever_addr, limit=limit, batch_size=batch_size,
            prebuilt_only=prebuilt_only, on_batch=lambda done, embedded: progress.update(task, completed=done),
        )
    console.print(
        f"loaded {counts['loaded']} papers ({counts['prebuilt']} with prebuilt embeddings, "
        f"{counts['embedded']} embedded now)"
    )


def _print_longlist(reply, as_json: bool) -> None:
    papers = [
        {
            "rank": p.rank,
            "id": p.paper.id,
            "title": p.paper.title,
            "score": round(p.similarity, 4),
            "selection_score": round(p.selection_score, 4),
            "reason": p.reason,
        }
        for p in reply.papers
    ]
    if as_json:
        print(json.dumps({"breadth": reply.breadth, "diversity": round(reply.diversity, 4),
                          "candidates": reply.candidates_considered, "longlist": papers}, indent=2))
        return
    table = Table(title=f"Longlist: {len(papers)} of {reply.candidates_considered} candidates "
                        f"(breadth {reply.breadth}, diversity {reply.diversity:g})")
    for column in ("#", "id", "title", "score"):
        table.add_column(column)
    for p in papers:
        table.add_row(str(p["rank"]), p["id"], p["title"], f"{p['score']:.3f}")
    Console().print(table)


@app.command()
@_rpc_errors
def search(
    abstract_file: Annotated[Path, typer.Option(help="File holding the abstract to search with.")],
    breadth: Annotated[int, typer.Option(help="5..20; the longlist has 3*breadth papers.")] = 10,
    diversity: Annotated[float, typer.Option(help="0..1; 0 is plain similarity.")] = 0.0,
    rule: Annotated[str, typer.Option(help="mmr (default) or citegeist-min.")] = "mmr",
    category: Annotated[list[str], typer.Option(help="Only papers in this arXiv category.")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    embedder_addr: EmbedderAddr = "127.0.0.1:50051",
    retriever_addr: RetrieverAddr = "127.0.0.1:50052",
) -> None:
    """Print the longlist (id, title, score) for an abstract, through the running services."""
    if not abstract_file.exists():
        _fail(f"{abstract_file} does not exist")
    text = abstract_file.read_text().strip()
    if not text:
        _fail(f"{abstract_file} is empty")
    reply = search_longlist(text, embedder_addr, retriever_addr, breadth, diversity, rule, category)
    _print_longlist(reply, as_json)


@app.command()
@_rpc_errors
def demo(
    abstract_file: Annotated[Path, typer.Option(help="Abstract to search with.")] = SAMPLE_ABSTRACT,
    log_dir: Annotated[Path, typer.Option(help="Where each service writes its log.")] = DEFAULT_LOG_DIR,
) -> None:
    """Start the stack, load the demo corpus, print the longlist for the sample abstract, stop."""
    stack = LocalStack(log_dir=log_dir)
    try:
        stack.start(log=console.print)
        # Embedding on this CPU runs at ~2.6 abstracts/s, so the demo loads only the papers
        # whose embeddings ship prebuilt in data/demo.
        load_command(DEMO_CORPUS, 0, 256, True, stack.addr("embedder"), stack.addr("retriever"))
        console.print(f"\n[bold]Abstract[/bold] ({abstract_file}):\n{abstract_file.read_text().strip()}\n")
        reply = search_longlist(
            abstract_file.read_text().strip(), stack.addr("embedder"), stack.addr("retriever"),
            10, 0.0, "mmr", [],
        )
        _print_longlist(reply, as_json=False)
    except (TimeoutError, RuntimeError) as exc:
        _fail(str(exc))
    finally:
        stack.stop()


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="embedder or retriever.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run a benchmark against its baseline in one run and print the ratio."""
    if name == "embedder":
        from bench.embedder_bench import run
    elif name == "retriever":
        from bench.retriever_bench import run
    else:
        _fail(f"unknown benchmark {name!r}; choose embedder or retriever")
    result = run()
    if as_json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
