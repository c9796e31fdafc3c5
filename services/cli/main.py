"""`citeweave` command line: run the local stack, sync a corpus, topics, search, shortlist,
generate a related-work section or answer a question through the gateway, PDF pages, evaluate,
benchmark."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Optional

import grpc
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TimeElapsedColumn
from rich.table import Table

from citeweave.retriever.v1 import retriever_pb2
from citeweave.client import CiteweaveClientError, Client
from citeweave.sync.v1 import sync_pb2
from services.gateway.depth import DEPTH_MAX, DEPTH_MIN, DepthOptions
from services.cli import sync as sync_client
from services.cli.console import console
from services.cli.console import fail as _fail
from services.cli.evaluate import eval_app
from services.cli.generate import (
    answer_command,
    error_line,
    follow,
    generate_command,
    print_shortlist,
    show,
)
from services.cli.pages import pages_command
from services.cli.search import RULES, search_longlist
from services.cli.shortlist import AGGREGATIONS, run_shortlist
from services.cli.stack import (
    MAX_REPLICAS,
    REPLICABLE,
    LocalStack,
    offline_fetcher_settings,
    parse_replicas,
    settings_class,
    unwind_on_sigterm,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
topics_app = typer.Typer(no_args_is_help=True, help="BERTopic topics of the stored papers.")
app.add_typer(topics_app, name="topics")
app.add_typer(eval_app, name="eval")
app.command("pages")(pages_command)
app.command("generate")(generate_command)
app.command("answer")(answer_command)
REPO = Path(__file__).resolve().parents[2]
DEMO_CORPUS = REPO / "data" / "demo" / "sample-10k.jsonl.gz"
DEFAULT_LOG_DIR = REPO / "var" / "logs"
# Empty: the demo corpus ships no PDFs (see `citeweave demo --online`).
DEMO_PDF_DIR = REPO / "var" / "demo-pdfs"
SAMPLE_ABSTRACT = REPO / "data" / "demo" / "sample-abstract.txt"

EmbedderAddr = Annotated[
    str, typer.Option(envvar="CITEWEAVE_EMBEDDER_ADDR", help="Embedder host:port.")
]
RetrieverAddr = Annotated[
    str, typer.Option(envvar="CITEWEAVE_RETRIEVER_ADDR", help="Retriever host:port.")
]
SyncAddr = Annotated[str, typer.Option(envvar="CITEWEAVE_SYNC_ADDR", help="Sync service host:port.")]
FetcherAddr = Annotated[
    str, typer.Option(envvar="CITEWEAVE_FETCHER_ADDR", help="Fetcher host:port.")
]


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
    replicas: Annotated[
        Optional[list[str]],
        typer.Option("--replicas", metavar="NAME=N",
                     help=f"Run N processes of a service, each on its own port with its own "
                     f"log (repeatable; N from 1 to {MAX_REPLICAS}). Only "
                     f"{', '.join(REPLICABLE)}: the sync service and the gateway spread their "
                     "calls over every replica."),
    ] = None,
) -> None:
    """Start every service on 127.0.0.1 and keep them running until Ctrl-C or SIGTERM.

    Ports and settings come from each service's CITEWEAVE_<SVC>_* environment variables.

    A replica after the first takes a free port (and a free metrics port when metrics are on)."""
    try:
        counts = parse_replicas(replicas or [])
    except ValueError as exc:
        _fail(str(exc), code=2)
    stack = LocalStack(log_dir=log_dir, replicas=counts)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        stack.start(timeout_s, log=console.print)
    except (TimeoutError, RuntimeError, ValueError) as exc:
        _fail(str(exc))
    http_port = settings_class("gateway")().http_port
    console.print(f"[green]all services serving[/green]: the web page is on "
                  f"http://127.0.0.1:{http_port}/ , the gRPC API on {stack.addr('gateway')}; "
                  "Ctrl-C stops them")
    for line in stack.endpoints():
        console.print(f"  {line}", highlight=False)
    print("ready", flush=True)
    stop.wait()
    console.print("stopping")
    stack.stop()


@app.command("sync")
@_rpc_errors
def sync_command(
    source: Annotated[str, typer.Argument(
        help="Kaggle arXiv snapshot or generic JSON lines (.jsonl or .jsonl.gz): a path, or an "
        "http(s) URL the sync service downloads.")] = str(DEMO_CORPUS),
    snapshot: Annotated[bool, typer.Option(
        "--snapshot", help="Take vectors from the embeddings-*.npz snapshot beside SOURCE "
        "where id and hash match; embed the rest.")] = False,
    snapshot_file: Annotated[Optional[Path], typer.Option(help="An explicit snapshot .npz.")] = None,
    source_format: Annotated[str, typer.Option("--format", help="auto, arxiv or jsonl.")] = "auto",
    delete_missing: Annotated[bool, typer.Option(
        help="Delete stored papers whose id is not in SOURCE (a full snapshot).")] = False,
    dry_run: Annotated[bool, typer.Option(help="Report the diff, write nothing.")] = False,
    batch_size: Annotated[int, typer.Option(min=0, max=4096, help="0 = the service's default.")] = 0,
    limit: Annotated[int, typer.Option(min=0, help="Stop after this many records; 0 = all.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    sync_addr: SyncAddr = "127.0.0.1:50055",
) -> None:
    """Bring the store in step with SOURCE: embed new and changed records, skip unchanged ones."""
    if source_format not in sync_client.FORMATS:
        _fail(f"--format must be one of {', '.join(sync_client.FORMATS)}, got {source_format!r}")
    # A URL is the sync service's to check and download; a path is checked here, where a typo
    # is cheapest to report.
    if "://" not in source:
        local = Path(source).resolve()
        if not local.exists():
            _fail(f"{local} does not exist")
        source = str(local)
    if snapshot and snapshot_file is None:
        if "://" in source:
            _fail("--snapshot looks beside a local SOURCE; for a URL, give --snapshot-file")
        try:
            snapshot_file = sync_client.snapshot_beside(Path(source))
        except FileNotFoundError as exc:
            _fail(str(exc))
    request = sync_pb2.SyncRequest(
        source_path=source,
        format=sync_client.FORMATS[source_format],
        options=sync_pb2.SyncOptions(
            delete_missing=delete_missing, dry_run=dry_run, batch_size=batch_size, limit=limit,
            snapshot_path=str(snapshot_file.resolve()) if snapshot_file else "",
        ),
    )
    summary, failures = sync_client.run_sync(sync_addr, request, console)
    if as_json:
        print(json.dumps(sync_client.summary_dict(summary, failures), indent=2))
    else:
        sync_client.print_summary(summary, failures, console)


@topics_app.command("fit")
@_rpc_errors
def topics_fit(
    min_topic_size: Annotated[int, typer.Option(min=0, help="0 = the default.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    sync_addr: SyncAddr = "127.0.0.1:50055",
) -> None:
    """Fit BERTopic on the stored embeddings, save it, and write every paper's topic."""
    with Progress("[progress.description]{task.description}", BarColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("fitting topics", total=100)
        result = sync_client.fit_topics(
            sync_addr, min_topic_size,
            lambda stage, pct: progress.update(task, description=stage, completed=pct),
        )
    if as_json:
        print(json.dumps({"papers_assigned": result.papers_assigned,
                          "topics": [_topic_dict(t) for t in result.topics]}, indent=2))
        return
    Console().print(sync_client.topics_table(list(result.topics)))
    console.print(f"topics written to {result.papers_assigned:,} papers")


def _topic_dict(topic) -> dict:
    return {"id": topic.id, "size": topic.size, "top_words": list(topic.top_words)}


@topics_app.command("list")
@_rpc_errors
def topics_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    sync_addr: SyncAddr = "127.0.0.1:50055",
) -> None:
    """Show the fitted topics with their top words and sizes."""
    topics = sync_client.list_topics(sync_addr)
    if as_json:
        print(json.dumps([_topic_dict(t) for t in topics], indent=2))
    else:
        Console().print(sync_client.topics_table(topics))


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
    mode: Annotated[str, typer.Option(
        help="dense (embedding similarity, default), lexical (BM25) or hybrid (both fused; "
             "better on ACM-CR, see docs/evaluation.md).")] = "dense",
    category: Annotated[list[str], typer.Option(help="Only papers in this arXiv category.")] = [],
    topic: Annotated[list[int], typer.Option(help="Only papers in this topic (see `topics list`).")] = [],
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
    try:
        reply = search_longlist(
            text, embedder_addr, retriever_addr, breadth, diversity, rule, category, topic, mode
        )
    except ValueError as exc:
        _fail(str(exc))
    _print_longlist(reply, as_json)


@app.command()
@_rpc_errors
def shortlist(
    abstract_file: Annotated[Optional[Path], typer.Option(
        help="File holding the abstract to search with.")] = None,
    pdf: Annotated[Optional[Path], typer.Option(
        help="Your own paper as a PDF: every content page is searched with.")] = None,
    breadth: Annotated[int, typer.Option(help="5..20; the shortlist has breadth papers, "
                                               "chosen from a longlist of 3*breadth.")] = 10,
    depth: Annotated[int, typer.Option(help="1..5 pages chosen per paper.")] = 2,
    diversity: Annotated[float, typer.Option(help="0..1; 0 is plain similarity.")] = 0.0,
    rule: Annotated[str, typer.Option(help="mmr (default) or citegeist-min.")] = "mmr",
    aggregation: Annotated[str, typer.Option(
        help="--pdf: how a paper's similarities to your pages combine: sum (default: related "
             "to the whole paper) or max (one page decides).")] = "sum",
    category: Annotated[list[str], typer.Option(help="Only papers in this arXiv category.")] = [],
    concurrency: Annotated[int, typer.Option(min=1, max=64,
                                             help="Papers fetched at once.")] = 16,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    embedder_addr: EmbedderAddr = "127.0.0.1:50051",
    retriever_addr: RetrieverAddr = "127.0.0.1:50052",
    fetcher_addr: FetcherAddr = "127.0.0.1:50053",
) -> None:
    """Longlist, full text and chosen pages, shortlist: for an abstract or a whole PDF, through
    the running embedder, retriever and fetcher. Papers whose PDF cannot be had are judged on
    their abstract and marked."""
    if (abstract_file is None) == (pdf is None):
        _fail("give exactly one of --abstract-file and --pdf")
    given = abstract_file or pdf
    if not given.is_file():
        _fail(f"{given} does not exist")
    abstract = abstract_file.read_text().strip() if abstract_file else None
    if abstract_file and not abstract:
        _fail(f"{abstract_file} is empty")
    if rule not in RULES:
        _fail(f"--rule must be one of {', '.join(RULES)}, got {rule!r}")
    if aggregation not in AGGREGATIONS:
        _fail(f"--aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
    if not DEPTH_MIN <= depth <= DEPTH_MAX:
        _fail(f"--depth must be between {DEPTH_MIN} and {DEPTH_MAX}, got {depth}")
    options = DepthOptions(
        breadth=breadth, depth=depth, diversity=diversity, rule=RULES[rule],
        page_aggregation=AGGREGATIONS[aggregation], concurrency=concurrency,
    )
    run_shortlist(
        (embedder_addr, retriever_addr, fetcher_addr), abstract, pdf, options,
        retriever_pb2.SearchFilter(categories=category), as_json,
    )


@app.command()
@_rpc_errors
def demo(
    abstract_file: Annotated[Path, typer.Option(help="Abstract to write for.")] = SAMPLE_ABSTRACT,
    log_dir: Annotated[Path, typer.Option(help="Where each service writes its log.")] = DEFAULT_LOG_DIR,
    online: Annotated[
        bool, typer.Option("--online", help="Fetch PDFs from arXiv (or the fetcher's configured "
                           "mirror) instead of judging every paper on its abstract.")
    ] = False,
) -> None:
    """Start the stack, sync the demo corpus, then through the gateway: shortlist papers for the
    sample abstract, write a related-work section with its references, print it; stop."""
    unwind_on_sigterm()
    abstract = abstract_file.read_text().strip()
    stack = LocalStack(log_dir=log_dir)
    # The demo ends when the section is printed: its web page needs no fixed port.
    stack.settings["gateway"] = {"http_port": "0"}
    if not online:
        # The demo corpus ships without PDFs: offline, every paper is judged on its abstract.
        DEMO_PDF_DIR.mkdir(parents=True, exist_ok=True)
        stack.settings["fetcher"] = offline_fetcher_settings(DEMO_PDF_DIR)
    try:
        stack.start(log=console.print)
        # Embedding on this CPU runs at ~2.6 abstracts/s, so the demo takes its vectors from the
        # prebuilt snapshot in data/demo; a record that differs from it is embedded for real.
        request = sync_pb2.SyncRequest(
            source_path=str(DEMO_CORPUS),
            options=sync_pb2.SyncOptions(
                snapshot_path=str(sync_client.snapshot_beside(DEMO_CORPUS))
            ),
        )
        summary, failures = sync_client.run_sync(stack.addr("sync"), request, console)
        sync_client.print_summary(summary, failures, console)
        console.print(f"\n[bold]Abstract[/bold] ({abstract_file}):\n{abstract}\n")
        with Client(stack.addr("gateway")) as client:
            result = follow(client.generate(abstract))
        print_shortlist(result)
        show(result, "Related work", as_json=False, bibtex=None)
    except CiteweaveClientError as exc:
        _fail(error_line(exc, stack.addr("gateway")))
    except grpc.RpcError as exc:
        _fail(f"{exc.code().name}: {exc.details()}")
    except (TimeoutError, RuntimeError) as exc:
        _fail(str(exc))
    finally:
        stack.stop()


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="embedder, retriever, sync, fetcher, pipeline, or all.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object, as the last line of stdout.")
    ] = False,
    quick: Annotated[
        bool,
        typer.Option("--quick", help="Small runs for development (figures not comparable); "
                     "`all` then writes under var/bench/quick/, not docs/."),
    ] = False,
    sizes: Annotated[
        Optional[str],
        typer.Option(help="retriever: corpus sizes, e.g. 10k,100k,1M (default 10k,100k)."),
    ] = None,
    stores: Annotated[
        Optional[str], typer.Option(help="retriever: lite, server or lite,server (default both).")
    ] = None,
    batch_sizes: Annotated[
        Optional[str],
        typer.Option(help="embedder: batch sizes of the sweep, e.g. 1,4,16; 'none' skips it."),
    ] = None,
    only: Annotated[
        Optional[str], typer.Option(help="all: run only these, e.g. embedder,sync.")
    ] = None,
) -> None:
    """Run a benchmark against its baseline in one run and print the ratio; `all` runs every one,
    saves docs/bench/latest.json, draws docs/img/bench-*.png and updates docs/performance.md."""
    from bench import run_all
    from bench.embedder_bench import parse_batch_sizes
    from bench.output import dumps
    from bench.retriever_bench import parse_sizes, parse_stores

    try:
        # Parsed here so a typo fails at once, not after half an hour of other benchmarks.
        size_list = parse_sizes(sizes) if sizes else None
        store_list = parse_stores(stores) if stores else None
        batch_list = parse_batch_sizes(batch_sizes) if batch_sizes is not None else None
        if name == "all":
            names = run_all.parse_only(only)
        else:
            kwargs = run_all.bench_kwargs(name, quick, size_list, store_list, batch_list)
    except ValueError as exc:
        _fail(str(exc))
    if name == "all":
        result = run_all.run(names, quick, sizes, stores, batch_sizes)
    else:
        result = run_all.run_one(name, **kwargs)
    if as_json:
        print(dumps(result), flush=True)
    elif name == "all":
        for kind, path in result["written"].items():
            print(f"{kind:>8}: {path}")
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
