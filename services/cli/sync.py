"""`citeweave sync` and `citeweave topics`: clients of the sync service with live progress."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
)
from rich.table import Table

from citeweave.sync.v1 import sync_pb2, sync_pb2_grpc
from services.common.clients import sync_channel
from services.sync.sources import FORMAT_CHOICES as FORMATS

COUNT_FIELDS = ("read", "unchanged", "changed", "new", "embedded", "vector_reused",
                "from_snapshot", "upserted", "failed", "missing", "deleted")
FAILURES_SHOWN = 20


def snapshot_beside(source: Path) -> Path:
    """The prebuilt embedding snapshot shipped next to a source (embeddings-<model>.npz)."""
    found = sorted(source.parent.glob("embeddings-*.npz"))
    if not found:
        raise FileNotFoundError(f"no embeddings-*.npz snapshot beside {source}")
    return found[0]


def counts_dict(counts: sync_pb2.SyncCounts) -> dict[str, int]:
    return {name: int(getattr(counts, name)) for name in COUNT_FIELDS}


def _progress_line(progress: sync_pb2.SyncProgress) -> str:
    if progress.phase == sync_pb2.SYNC_PHASE_DOWNLOADING:
        total = f" of {progress.bytes_total / 1e6:,.1f}" if progress.bytes_total else ""
        return f"downloading the source: {progress.bytes_read / 1e6:,.1f}{total} MB"
    c = progress.counts
    return (f"read {c.read:,} · unchanged {c.unchanged:,} · changed {c.changed:,} · new {c.new:,}"
            f" · embedded {c.embedded:,} · upserted {c.upserted:,} · failed {c.failed:,}"
            f" · {progress.rate_per_s:,.0f} records/s")


def run_sync(
    addr: str,
    request: sync_pb2.SyncRequest,
    console: Console,
    show_progress: bool = True,
    timeout_s: float | None = None,
) -> tuple[sync_pb2.SyncSummary, list[sync_pb2.SyncFailure]]:
    """Streams one Sync, drawing a live progress line; returns the summary and the failures."""
    failures: list[sync_pb2.SyncFailure] = []
    summary = None
    with sync_channel(addr) as channel, Progress(
        SpinnerColumn(), BarColumn(bar_width=24), TimeElapsedColumn(), TimeRemainingColumn(),
        TextColumn("{task.description}"),
        console=console, disable=not show_progress, transient=False,
    ) as bar:
        task = bar.add_task("starting", total=None)
        phase = sync_pb2.SYNC_PHASE_UNSPECIFIED
        stub = sync_pb2_grpc.SyncServiceStub(channel)
        for event in stub.Sync(request, timeout=timeout_s):
            kind = event.WhichOneof("event")
            if kind == "progress":
                p = event.progress
                if p.phase != phase:  # the download's rate must not skew the reading's ETA
                    phase = p.phase
                    bar.reset(task)
                # The fraction of the file downloaded, then read: the one measure of "done"
                # known in advance.
                bar.update(task, description=_progress_line(p),
                           total=p.bytes_total or None, completed=p.bytes_read)
            elif kind == "failure":
                failures.append(event.failure)
                if show_progress and len(failures) <= FAILURES_SHOWN:
                    f = event.failure
                    bar.console.print(f"[yellow]line {f.line_number}[/yellow]"
                                      f"{' (' + f.record_id + ')' if f.record_id else ''}: {f.reason}")
            elif kind == "summary":
                summary = event.summary
        if summary is not None:
            bar.update(task, description="done", total=1, completed=1)
    if summary is None:
        raise RuntimeError("the sync service closed the stream without a summary")
    return summary, failures


def summary_dict(summary: sync_pb2.SyncSummary, failures: Iterable[sync_pb2.SyncFailure]) -> dict:
    return {
        "counts": counts_dict(summary.counts),
        "elapsed_s": round(summary.elapsed_ms / 1000, 3),
        "records_per_s": round(summary.counts.read / max(summary.elapsed_ms / 1000, 1e-9), 1),
        "format": sync_pb2.SourceFormat.Name(summary.format),
        "resumed": summary.resumed,
        "missing_ids_sample": list(summary.missing_ids_sample),
        "warnings": list(summary.warnings),
        "embedders": [{"addr": e.addr, "calls": e.calls, "texts": e.texts} for e in summary.embedders],
        "failures": [
            {"line": f.line_number, "id": f.record_id, "reason": f.reason} for f in failures
        ],
    }


def print_summary(summary: sync_pb2.SyncSummary, failures: list, console: Console) -> None:
    table = Table(title="sync summary", show_header=False)
    for name, value in counts_dict(summary.counts).items():
        table.add_row(name, f"{value:,}")
    table.add_row("elapsed", f"{summary.elapsed_ms / 1000:.1f} s")
    if summary.resumed:
        table.add_row("resumed", "yes: continued an interrupted sync of this source")
    console.print(table)
    if len(failures) > FAILURES_SHOWN:
        console.print(f"... and {len(failures) - FAILURES_SHOWN} more failed lines (--json lists them)")
    for warning in summary.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if summary.missing_ids_sample:
        console.print("not in the source: " + ", ".join(summary.missing_ids_sample[:10])
                      + (" ..." if summary.counts.missing > 10 else ""))


def fit_topics(addr: str, min_topic_size: int, on_stage: Callable[[str, int], None]) -> sync_pb2.FitTopicsResult:
    with sync_channel(addr) as channel:
        stub = sync_pb2_grpc.SyncServiceStub(channel)
        for event in stub.FitTopics(sync_pb2.FitTopicsRequest(min_topic_size=min_topic_size)):
            if event.WhichOneof("event") == "progress":
                on_stage(event.progress.stage, event.progress.percent)
            else:
                return event.result
    raise RuntimeError("the sync service closed the stream without a result")


def list_topics(addr: str) -> list[sync_pb2.Topic]:
    with sync_channel(addr) as channel:
        return list(sync_pb2_grpc.SyncServiceStub(channel).ListTopics(
            sync_pb2.ListTopicsRequest(), timeout=60
        ).topics)


def topics_table(topics: list[sync_pb2.Topic]) -> Table:
    table = Table(title=f"{len(topics)} topics")
    for column in ("topic", "papers", "top words"):
        table.add_column(column)
    for topic in topics:
        name = "outliers" if topic.id == -1 else str(topic.id)
        table.add_row(name, f"{topic.size:,}", ", ".join(topic.top_words))
    return table
