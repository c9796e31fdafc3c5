"""Shared parts of the sync tests: slices of the real arXiv snapshots, a stack, one Sync call."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from citeweave.sync.v1 import sync_pb2, sync_pb2_grpc
from services.common.clients import sync_channel
from services.common.launcher import ServiceProcess, free_port

REPO = Path(__file__).resolve().parents[2]
ARXIV = REPO.parent / "shared" / "data" / "arxiv"
SNAPSHOT_A = ARXIV / "snapshot-A-upto-2025-12-31.jsonl.gz"
SNAPSHOT_B = ARXIV / "arxiv-cs-74k.jsonl.gz"
CHANGED_IDS = (ARXIV / "changed-ids-A-to-B.txt").read_text().split()
# Of the 14, these changed their title or abstract beyond whitespace; the other 9 changed
# categories, authors or only the line wrapping of the abstract, so their embedded text is the same.
TEXT_CHANGED_IDS = ["2504.11101", "2504.21023", "2506.12433", "2508.01302", "2509.22151"]


@dataclass
class Slices:
    a: Path
    b: Path
    unchanged_ids: list[str]
    new_ids: list[str]
    b_records: dict[str, dict] = field(repr=False)
    a_records: dict[str, dict] = field(repr=False)


def _records(path: Path) -> Iterator[tuple[bytes, dict]]:
    with gzip.open(path, "rb") as lines:
        for line in lines:
            yield line, orjson.loads(line)


def make_slices(directory: Path, unchanged: int = 46, new: int = 30) -> Slices:
    """A: `unchanged` ids that stay the same plus the 14 changed ids, as snapshot A has them.
    B: the same ids as the full file has them, plus `new` ids that only B has."""
    a_lines, a_records, kept = {}, {}, 0
    for line, record in _records(SNAPSHOT_A):
        is_changed = record["id"] in CHANGED_IDS
        if is_changed or kept < unchanged:
            a_lines[record["id"]], a_records[record["id"]] = line, record
            kept += not is_changed
    assert set(CHANGED_IDS) <= set(a_lines)
    b_lines, b_records, new_ids = {}, {}, []
    for line, record in _records(SNAPSHOT_B):
        paper_id = record["id"]
        if paper_id in a_lines:
            b_lines[paper_id], b_records[paper_id] = line, record
        elif len(new_ids) < new and paper_id not in a_records:
            b_lines[paper_id], b_records[paper_id] = line, record
            new_ids.append(paper_id)
    a_path, b_path = directory / "slice-a.jsonl.gz", directory / "slice-b.jsonl"
    with gzip.open(a_path, "wb") as out:
        out.writelines(a_lines.values())
    b_path.write_bytes(b"".join(b_lines.values()))
    return Slices(
        a=a_path, b=b_path,
        unchanged_ids=[i for i in a_lines if i not in CHANGED_IDS],
        new_ids=new_ids, b_records=b_records, a_records=a_records,
    )


@dataclass
class Stack:
    retriever: ServiceProcess
    sync: ServiceProcess
    tmp: Path

    @property
    def sync_stub(self) -> sync_pb2_grpc.SyncServiceStub:
        return sync_pb2_grpc.SyncServiceStub(sync_channel(self.sync.addr))

    @property
    def retriever_stub(self) -> retriever_pb2_grpc.RetrieverServiceStub:
        return retriever_pb2_grpc.RetrieverServiceStub(sync_channel(self.retriever.addr))

    def count(self) -> int:
        return self.retriever_stub.Stats(retriever_pb2.StatsRequest()).paper_count

    def rows(self, ids: list[str]) -> dict[str, retriever_pb2.PaperRecord]:
        reply = self.retriever_stub.Get(retriever_pb2.GetRequest(ids=ids, include_vectors=True))
        return {r.paper.id: r for r in reply.records}

    def start_sync(self, embedder_addrs: str, **settings: str) -> ServiceProcess:
        self.sync = ServiceProcess(
            name="sync", port=free_port(), log_path=self.tmp / "sync.log",
            settings={
                "embedder_addrs": embedder_addrs,
                "retriever_addr": self.retriever.addr,
                "state_dir": str(self.tmp / "sync-state"),
                "topic_model_dir": str(self.tmp / "topics"),
                "progress_interval_s": "0.05",
                **settings,
            },
        ).start()
        self.sync.wait_serving(120)
        return self.sync


@contextmanager
def sync_stack(
    tmp: Path, embedder_addrs: str, retriever_settings: dict[str, str] | None = None,
    **sync_settings: str,
) -> Iterator[Stack]:
    """A retriever on its own store and a sync service, against running embedder(s)."""
    first_embedder = embedder_addrs.split(",")[0]
    retriever = ServiceProcess(
        name="retriever", port=free_port(), log_path=tmp / "retriever.log",
        settings={"milvus_uri": str(tmp / "store.db"), "embedder_addr": first_embedder,
                  **(retriever_settings or {})},
    ).start()
    stack = Stack(retriever=retriever, sync=None, tmp=tmp)  # type: ignore[arg-type]
    try:
        retriever.wait_serving(180)
        stack.start_sync(embedder_addrs, **sync_settings)
        yield stack
    finally:
        if stack.sync is not None:
            stack.sync.stop()
        retriever.stop()


@dataclass
class SyncResult:
    summary: sync_pb2.SyncSummary
    failures: list[sync_pb2.SyncFailure]
    progress: list[sync_pb2.SyncProgress]

    @property
    def counts(self) -> dict[str, int]:
        c = self.summary.counts
        return {f.name: getattr(c, f.name) for f in c.DESCRIPTOR.fields}

    @property
    def embed_calls(self) -> int:
        return sum(e.calls for e in self.summary.embedders)


def run_sync(stub: sync_pb2_grpc.SyncServiceStub, source: Path, **options) -> SyncResult:
    snapshot = options.pop("snapshot_path", "")
    fmt = options.pop("format", sync_pb2.SOURCE_FORMAT_UNSPECIFIED)
    request = sync_pb2.SyncRequest(
        source_path=str(source), format=fmt,
        options=sync_pb2.SyncOptions(snapshot_path=str(snapshot), **options),
    )
    failures, progress, summary = [], [], None
    for event in stub.Sync(request, timeout=600):
        kind = event.WhichOneof("event")
        if kind == "failure":
            failures.append(event.failure)
        elif kind == "progress":
            progress.append(event.progress)
        else:
            summary = event.summary
    assert summary is not None
    return SyncResult(summary, failures, progress)


def only(counts: dict[str, int], **expected: int) -> dict[str, int]:
    """The counts named in `expected`, plus every other count that is not zero."""
    return {k: v for k, v in counts.items() if k in expected or v}
