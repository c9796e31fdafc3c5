"""`citeweave eval ...`: measurements on data nobody here wrote (docs/evaluation.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from services.cli.console import console, fail
from services.cli.stack import unwind_on_sigterm
from services.evaluation import beir
from services.evaluation.retrieval_eval import (
    DEFAULT_METHODS, METHOD_HELP, EvalOptions, default_embedding_cache, evaluate, parse_methods,
)

eval_app = typer.Typer(no_args_is_help=True, help=__doc__)


def _table(results: dict[str, dict[str, float]]) -> Table:
    columns = list(next(iter(results.values())))
    table = Table("method", *columns)
    for name, figures in results.items():
        table.add_row(name, *(f"{figures[c]:.4f}" if "latency" not in c else f"{figures[c]:.1f}"
                              for c in columns))
    return table


@eval_app.command("retrieval")
def retrieval(
    dataset_dir: Annotated[Path, typer.Argument(help="BEIR-style folder: corpus.jsonl, "
                                                     "queries.jsonl, qrels.tsv.")],
    k: Annotated[int, typer.Option("--k", min=1, max=200, help="Cut-off of recall@K and mrr@K.")] = 20,
    methods: Annotated[str, typer.Option(help=f"Comma-separated: {METHOD_HELP}.")] = DEFAULT_METHODS,
    diversity: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Diversity of `mmr` (the product default is 0).")] = 0.0,
    model: Annotated[Optional[str], typer.Option(
        help="Embedding model (all-mpnet-base-v2 or all-MiniLM-L6-v2); default: the "
             "embedder's configured model.")] = None,
    embedding_cache: Annotated[Optional[Path], typer.Option(
        envvar="CITEWEAVE_EMBEDDER_DISK_CACHE",
        help="SQLite embedding cache kept across runs, so a re-run embeds nothing.",
    )] = None,
    no_embedding_cache: Annotated[bool, typer.Option(
        "--no-embedding-cache", help="Embed everything, keep nothing.")] = False,
    log_dir: Annotated[Optional[Path], typer.Option(
        help="Keep the services' logs here (default: a temporary folder).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Recall, nDCG and MRR of each retrieval method on a BEIR-style dataset. Starts its own
    services on free ports and a temporary store; needs nothing running."""
    try:
        chosen = parse_methods(methods, diversity)
    except ValueError as exc:
        fail(str(exc), code=2)
    cache = None if no_embedding_cache else (embedding_cache or default_embedding_cache())
    unwind_on_sigterm()
    options = EvalOptions(k=k, methods=chosen, model=model, embedding_cache=cache, log_dir=log_dir)
    try:
        report = evaluate(dataset_dir, options, console,
                          on_method=lambda name: console.print(f"running {name} ..."))
    except beir.DatasetError as exc:
        fail(str(exc), code=2)
    except (TimeoutError, RuntimeError) as exc:
        fail(str(exc))
    console.print(
        f"{report.queries:,} queries over {report.stored:,} stored of {report.documents:,} "
        f"documents (sync failures: {report.sync_failed}); embedder: "
        f"{report.texts_embedded:,} texts embedded, {report.texts_from_cache:,} from cache"
        + (f" ({cache})" if cache else "")
    )
    if as_json:
        print(json.dumps(report.results))
    else:
        Console().print(_table(report.results))
