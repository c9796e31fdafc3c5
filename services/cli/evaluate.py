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
from services.evaluation.harness import default_embedding_cache
from services.evaluation.retrieval_eval import (
    DEFAULT_METHODS, METHOD_HELP, EvalOptions, evaluate, parse_methods,
)

eval_app = typer.Typer(no_args_is_help=True, help=__doc__)

# Options both eval commands take.
EmbeddingCacheOption = Annotated[Optional[Path], typer.Option(
    envvar="CITEWEAVE_EMBEDDER_DISK_CACHE",
    help="SQLite embedding cache kept across runs, so a re-run embeds only what is new.",
)]
NoEmbeddingCacheOption = Annotated[bool, typer.Option(
    "--no-embedding-cache", help="Embed everything, keep nothing.")]
LogDirOption = Annotated[Optional[Path], typer.Option(
    help="Keep the services' logs here (default: a temporary folder).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _embedding_cache(path: Path | None, disabled: bool) -> Path | None:
    return None if disabled else (path or default_embedding_cache())


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
    embedding_cache: EmbeddingCacheOption = None,
    no_embedding_cache: NoEmbeddingCacheOption = False,
    log_dir: LogDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Recall, nDCG and MRR of each retrieval method on a BEIR-style dataset. Starts its own
    services on free ports and a temporary store; needs nothing running."""
    try:
        chosen = parse_methods(methods, diversity)
    except ValueError as exc:
        fail(str(exc), code=2)
    cache = _embedding_cache(embedding_cache, no_embedding_cache)
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


def _figure(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_figure(v)}" for k, v in value.items()) or "-"
    return str(value)


GENERATION_ROWS = (
    ("outputs", "outputs"),
    ("backend used (outputs)", "backend_used"),
    ("synthesis fallbacks", "synthesis_fallbacks"),
    ("summary backend used", "summary_backend_used"),
    ("summary fallbacks", "summary_fallbacks"),
    ("resets", "resets"),
    ("outputs without citations", "outputs_without_citations"),
    ("citations per output", "citations_mean"),
    ("papers cited per output", "papers_cited_mean"),
    ("shortlist size", "shortlist_size_mean"),
    ("shortlisted on full text", "shortlisted_full_text"),
    ("citations removed per output", "citations_removed_mean"),
    ("citations removed by reason", "citations_removed_by_reason"),
    ("citations repaired", "citations_repaired_total"),
    ("mean seconds per stage", "seconds_mean"),
)


def _generation_table(summary: dict) -> Table:
    table = Table("figure", "value", title=f"generation: {summary['backend_requested']} backend, "
                  f"{summary['style']} citations, breadth {summary['breadth']}, depth "
                  f"{summary['depth']}")
    for name, value in summary["metrics"].items():
        table.add_row(name, _figure(value))
    for label, key in GENERATION_ROWS:
        table.add_row(label, _figure(summary[key]))
    return table


@eval_app.command("generation")
def generation(
    held_out: Annotated[int, typer.Option(
        min=1, max=500, help="Abstracts held out of the store and written for: the demo papers "
        "with an abstract of >= 600 characters whose sha256(id) sorts first.")] = 20,
    backend: Annotated[Optional[str], typer.Option(
        help="extractive or openai; default: openai with an LLM given, else extractive.")] = None,
    local_llm: Annotated[bool, typer.Option(
        "--local-llm", help="Start the local llama.cpp server (make install-llm) and write "
        "with it.")] = False,
    llm_url: Annotated[Optional[str], typer.Option(
        help="Any OpenAI-compatible endpoint (its key from CITEWEAVE_GENERATOR_OPENAI_API_KEY"
        "[_FILE]).")] = None,
    llm_model: Annotated[Optional[str], typer.Option(help="The model --llm-url serves.")] = None,
    breadth: Annotated[int, typer.Option(min=5, max=20, help="Shortlist size.")] = 10,
    depth: Annotated[int, typer.Option(min=1, max=5, help="Pages chosen per paper.")] = 2,
    style: Annotated[str, typer.Option(help="numeric or author-year.")] = "numeric",
    outputs: Annotated[Optional[Path], typer.Option(
        help="Write every generated text with its references and scores here (JSON lines).",
    )] = None,
    llm_timeout_s: Annotated[float, typer.Option(
        min=1, help="The generator's timeout of one LLM request.")] = 300.0,
    embedding_cache: EmbeddingCacheOption = None,
    no_embedding_cache: NoEmbeddingCacheOption = False,
    log_dir: LogDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Citation validity, coverage, co-citation graph and support of the generator on demo
    abstracts held out of a temporary store, through the real services (offline: papers are
    judged on their abstracts). Starts its own services; needs nothing running."""
    from services.evaluation.generation_eval import GenerationOptions, evaluate_generation

    chosen = backend or ("openai" if local_llm or llm_url else "extractive")
    options = GenerationOptions(
        held_out=held_out, backend=chosen, local_llm=local_llm, llm_url=llm_url,
        llm_model=llm_model, breadth=breadth, depth=depth, style=style, outputs=outputs,
        llm_timeout_s=llm_timeout_s, log_dir=log_dir,
        embedding_cache=_embedding_cache(embedding_cache, no_embedding_cache),
    )
    try:
        options.check()
    except ValueError as exc:
        fail(str(exc), code=2)
    unwind_on_sigterm()
    try:
        report = evaluate_generation(options, console)
    except ValueError as exc:
        fail(str(exc), code=2)
    except (TimeoutError, RuntimeError) as exc:
        fail(str(exc))
    summary = report.summary
    store, embedder = summary["store"], summary["embedder"]
    console.print(
        f"{summary['outputs']} held-out abstracts over {store['papers']:,} stored papers (sync "
        f"failures: {store['sync_failed']}); embedder: {embedder['texts_embedded']:,} texts "
        f"embedded, {embedder['texts_from_cache']:,} from cache; {summary['wall_s']:.0f} s"
        + (f"; outputs in {outputs}" if outputs else "")
    )
    if as_json:
        print(json.dumps(summary))
    else:
        Console().print(_generation_table(summary))
