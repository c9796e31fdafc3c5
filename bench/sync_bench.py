"""Sync benchmark: no-change resync and changed-record throughput of the corpus sync service.

`run()` starts real processes on free 127.0.0.1 ports in a temporary directory: an embedder
(all-mpnet-base-v2 by default, its CPU/GPU backend chosen as in production, embedding cache off
so every text is inferred), a retriever on a fresh Milvus Lite store in that directory (its
dimension taken from the embedder) and `python -m services.sync` wired to both. Everything is
driven over gRPC from this process, as `citeweave sync` would; every wall time is taken at the
client, from sending the request to receiving the summary (the server's own elapsed time is
reported beside it).

The source is the arXiv file at `SOURCE` (74,728 real cs records, Kaggle format), read by path.

1. Import. Embedding 74k abstracts is impossible on a 2-core CPU (mpnet: ~2.6 texts/s), so the
   store is seeded through the real sync path with a snapshot .npz (services/sync/snapshot.py)
   written to the temporary directory: the true ids and row_sha256 of every record and RANDOM
   unit vectors under the embedder's model name. The vectors are random because nothing below
   reads them except as opaque payload (the no-change path compares hashes only; the changed
   records are re-embedded). The first Sync imports everything from the snapshot
   (from_snapshot == read, embedded == 0); its rate (`import_records_per_s`) is the `make demo`
   path and, since nothing is embedded, the store's end-to-end write rate through sync.
2. No-change resync (`nochange_*`). The same file synced again without a snapshot, `repeats`
   times: every record must be unchanged and the embedders must get 0 calls (the per-address
   call counts of the summary). records/s = records read / client wall time; the median is
   reported. These runs use the line cache the import wrote (docs/sync.md); one more run with
   the cache deleted gives `nochange_uncached_records_per_s`, the parse-every-line rate. Baseline (`nochange_baseline_*`): what a sync must do without ListHashes, done
   from this process over real gRPC: the same file read and hashed with the same parser, and for
   each batch of `batch_size` records a retriever `Get(ids)` (no vectors) whose stored sha256
   are compared with the file's. Same file, same store, same run; the ratio is printed.
3. Changed records (`changed_*`). `n_changed` records spread evenly over the file get a
   sentence appended to their abstract, in `rounds` turns: each round writes a copy of the
   source in which this round's records (and the earlier rounds', already stored changed) differ
   and syncs it; the sync must find exactly this round's records changed and embed exactly
   those. `changed_records_per_s` = changed / client wall time of those whole syncs (end to end,
   each including a scan of all the unchanged rest); `changed_marginal_records_per_s` = changed /
   (that wall time - rounds x the median no-change wall time), the rate of the embed + upsert
   pipeline alone. Baseline (`changed_baseline_*`): Citegeist's way for changed records, one
   `Embed` call and one `Upsert` call per record, from this process, on another `n_changed`
   changed records (other ids and texts: nothing is cached; the embedder's cache is off anyway),
   same services, run after each round's sync on its own share, so load that comes and goes hits
   both alike. The ratio is batched (marginal) / per-record.

`projections` turns the measured rates into hours for the arXiv two-week update (`UPDATE_RECORDS`
new or changed records found by a scan of the full `FULL_CORPUS` snapshot) and for a full build
of `FULL_CORPUS` records, on this machine. Machine load is logged with each step.
`citeweave bench sync --json` prints the dict `run()` returns as the last line of stdout; the
rates are its `*_records_per_s` keys (import, no-change with and without the line cache and its
baseline, changed end to end and marginal and their per-record baseline).
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from bench.output import emit
from bench.services import START_TIMEOUT_S, start_service
from citeweave.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from citeweave.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from citeweave.sync.v1 import sync_pb2, sync_pb2_grpc
from services.common.clients import sync_channel
from services.common.corpus import embedding_text, row_from_arxiv, row_sha256
from services.common.launcher import REPO, ServiceProcess
from services.embedder.models import MPNET
from services.sync.job import to_record
from services.sync.sources import Parsed, Source

# The shared data directory beside the checkout; read by path, never copied into the repo.
# The 74k-record arXiv file beside the repository (not committed: 47 MB); another path by
# CITEWEAVE_BENCH_SYNC_SOURCE or --source.
SOURCE = Path(os.environ.get(
    "CITEWEAVE_BENCH_SYNC_SOURCE", REPO.parent / "shared" / "data" / "arxiv" / "arxiv-cs-74k.jsonl.gz"
))
BATCH_SIZE = 128  # the sync service's default batch_size
N_CHANGED = 200
REPEATS = 3
ROUNDS = 2  # the changed records are synced in turns with the per-record baseline
FULL_CORPUS = 2_600_000  # arXiv, all categories (Kaggle arxiv-metadata-oai-snapshot)
UPDATE_RECORDS = 40_000  # new or changed records of a two-week arXiv update
CHANGED_SENTENCE = " We further release our code and data to support future research."
BASELINE_SENTENCE = " Additional experiments are reported in the appendix of this version."

STOP_TIMEOUT_S = 1800  # closing Milvus Lite waits for index builds in progress
RPC_TIMEOUT_S = 3600


def _log(message: str) -> None:
    print(f"[sync-bench] {message} (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


# -- the source and its derivatives -----------------------------------------------------------


def _parsed(path: Path) -> list[Parsed]:
    records = []
    for item in Source.open(path).records():
        if not isinstance(item, Parsed):
            raise RuntimeError(f"{path}: line {item.line} does not parse: {item.reason}")
        records.append(item)
    return records


def _write_prefix(source: Path, target: Path, n: int) -> Path:
    """The first n lines of source (development runs on a smaller corpus)."""
    with gzip.open(source, "rb") as lines, gzip.open(target, "wb", compresslevel=6) as out:
        for number, line in enumerate(lines):
            if number >= n:
                break
            out.write(line)
    return target


def _write_snapshot(path: Path, records: list[Parsed], model: str, dimension: int) -> None:
    """True ids and hashes, random unit vectors (fp16, as the demo snapshot stores them)."""
    rng = np.random.default_rng(0)
    vectors = np.empty((len(records), dimension), dtype=np.float16)
    for start in range(0, len(records), 8192):
        chunk = rng.standard_normal((min(8192, len(records) - start), dimension), dtype=np.float32)
        vectors[start:start + len(chunk)] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
    np.savez(
        path,
        ids=np.array([r.row.id for r in records]),
        sha256=np.array([r.sha256 for r in records]),
        vectors=vectors,
        model=np.array(model),
    )


def _spread(n_records: int, n: int, phase: float) -> list[int]:
    """n line indices spread evenly over the file, offset by phase (0..1) of the stride."""
    stride = n_records / n
    return [int(i * stride + phase * stride) for i in range(n)]


def _write_changed(source: Path, target: Path, changed: dict[int, str]) -> None:
    """A copy of source in which the record at each line index gets its sentence appended."""
    with gzip.open(source, "rb") as lines, gzip.open(target, "wb", compresslevel=1) as out:
        for number, line in enumerate(lines):
            if number in changed:
                record = orjson.loads(line)
                record["abstract"] = record["abstract"].rstrip() + changed[number]
                line = orjson.dumps(record) + b"\n"
            out.write(line)


def _changed_records(source: Path, lines: list[int], sentence: str) -> list[Parsed]:
    """The records at these line indices with the sentence appended, as sync would parse them."""
    wanted, found = set(lines), {}
    with gzip.open(source, "rb") as raw:
        for number, line in enumerate(raw):
            if number in wanted:
                record = orjson.loads(line)
                record["abstract"] = record["abstract"].rstrip() + sentence
                row = row_from_arxiv(record)
                found[number] = Parsed(number + 1, row, row_sha256(row))
    return [found[i] for i in lines]


# -- the services -----------------------------------------------------------------------------


def _start(name: str, settings: dict[str, str], tmp: Path) -> ServiceProcess:
    return start_service(name, settings, tmp / f"{name}.log", START_TIMEOUT_S)


def _sync(
    stub, source: Path, snapshot: Path | None = None
) -> tuple[sync_pb2.SyncSummary, float, int]:
    """One Sync streamed to its end: (summary, client wall seconds, progress events)."""
    request = sync_pb2.SyncRequest(
        source_path=str(source),
        options=sync_pb2.SyncOptions(
            batch_size=BATCH_SIZE, snapshot_path=str(snapshot) if snapshot else ""
        ),
    )
    summary, events = None, 0
    start = time.perf_counter()
    for event in stub.Sync(request, timeout=RPC_TIMEOUT_S):
        kind = event.WhichOneof("event")
        if kind == "summary":
            summary = event.summary
        elif kind == "failure":
            raise RuntimeError(f"sync failure: line {event.failure.line_number} "
                               f"{event.failure.record_id}: {event.failure.reason}")
        else:
            events += 1
    wall = time.perf_counter() - start
    if summary is None:
        raise RuntimeError("the sync stream ended without a summary")
    return summary, wall, events


def _embed_calls(summary: sync_pb2.SyncSummary) -> tuple[int, int]:
    return sum(e.calls for e in summary.embedders), sum(e.texts for e in summary.embedders)


def _check(what: str, summary: sync_pb2.SyncSummary, **expected: int) -> None:
    c = summary.counts
    wrong = {k: (getattr(c, k), v) for k, v in expected.items() if getattr(c, k) != v}
    if wrong:
        raise AssertionError(f"{what}: counts (got, expected) {wrong}; summary: {summary}")


def _summary_fields(summary: sync_pb2.SyncSummary, wall: float, events: int) -> dict:
    calls, texts = _embed_calls(summary)
    c = summary.counts
    return {
        "wall_s": round(wall, 3),
        "server_elapsed_s": round(summary.elapsed_ms / 1000, 3),
        "records_per_s": round(c.read / wall, 1),
        "counts": {f.name: getattr(c, f.name) for f in c.DESCRIPTOR.fields},
        "embed_calls": calls,
        "embed_texts": texts,
        "progress_events": events,
        "warnings": list(summary.warnings),
        "load_avg_1m_after": _load(),
    }


# -- the baselines ----------------------------------------------------------------------------


def nochange_baseline(retriever, source: Path, batch_size: int) -> tuple[int, int, float]:
    """A sync without ListHashes: each batch of the file is looked up with Get and compared by
    hash. Returns (records read, unchanged, wall seconds)."""
    read = unchanged = 0
    batch: list[Parsed] = []

    def compare(batch: list[Parsed]) -> int:
        reply = retriever.Get(
            retriever_pb2.GetRequest(ids=[p.row.id for p in batch], include_vectors=False),
            timeout=RPC_TIMEOUT_S,
        )
        stored = {r.paper.id: r.paper.sha256 for r in reply.records}
        return sum(stored.get(p.row.id) == p.sha256 for p in batch)

    start = time.perf_counter()
    for item in Source.open(source).records():
        read += 1
        if isinstance(item, Parsed):
            batch.append(item)
            if len(batch) >= batch_size:
                unchanged += compare(batch)
                batch = []
    if batch:
        unchanged += compare(batch)
    return read, unchanged, time.perf_counter() - start


def per_record_baseline(embedder, retriever, records: list[Parsed]) -> float:
    """Citegeist's way for changed records: one Embed and one Upsert call per record."""
    start = time.perf_counter()
    for p in records:
        reply = embedder.Embed(
            embedder_pb2.EmbedRequest(texts=[embedding_text(p.row.title, p.row.abstract)]),
            timeout=RPC_TIMEOUT_S,
        )
        vector = np.asarray(reply.vectors[0].values, dtype=np.float32)
        written = retriever.Upsert(
            retriever_pb2.UpsertRequest(records=[to_record(p.row, p.sha256, vector, -1)]),
            timeout=RPC_TIMEOUT_S,
        ).upserted_count
        if written != 1:
            raise AssertionError(f"Upsert of {p.row.id} wrote {written} rows")
    return time.perf_counter() - start


# -- the run ----------------------------------------------------------------------------------


def _projections(nochange_per_s: float, changed_marginal_per_s: float, import_per_s: float) -> dict:
    scan_h = FULL_CORPUS / nochange_per_s / 3600
    return {
        "full_corpus_records": FULL_CORPUS,
        "update_records": UPDATE_RECORDS,
        "nochange_scan_of_full_corpus_h": round(scan_h, 3),
        "two_week_update_this_cpu_h": round(
            scan_h + UPDATE_RECORDS / changed_marginal_per_s / 3600, 2
        ),
        "full_build_this_cpu_h": round(FULL_CORPUS / changed_marginal_per_s / 3600, 1),
        "full_build_store_bound_h": round(FULL_CORPUS / import_per_s / 3600, 2),
        "two_week_update_store_bound_h": round(scan_h + UPDATE_RECORDS / import_per_s / 3600, 3),
    }


def run(
    model: str = MPNET,
    n_changed: int = N_CHANGED,
    repeats: int = REPEATS,
    n_records: int | None = None,
    rounds: int = ROUNDS,
    source: Path = SOURCE,
) -> dict:
    """The benchmark; n_records takes only the first lines of the source (development runs)."""
    if not source.is_file():
        raise SystemExit(
            f"sync benchmark source {source} does not exist: set CITEWEAVE_BENCH_SYNC_SOURCE to a "
            "Kaggle-format arXiv snapshot (.jsonl or .jsonl.gz), ideally ~75k records"
        )
    result: dict = {
        "source": str(source), "cpu_count": os.cpu_count(), "batch_size": BATCH_SIZE,
        "n_changed": n_changed, "repeats": repeats, "rounds": rounds,
        "load_avg_1m_at_start": _load(),
    }
    with tempfile.TemporaryDirectory(prefix="citeweave-sync-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if n_records:
            _log(f"taking the first {n_records:,} records of {source}")
            source = _write_prefix(source, tmp / "source.jsonl.gz", n_records)
        _log(f"parsing {source} for ids and hashes")
        records = _parsed(source)
        n = len(records)
        if 2 * n_changed > n:
            raise ValueError(f"{n_changed} changed records twice over need more than {n} records")
        changed_lines = _spread(n, n_changed, 0.0)
        baseline_lines = _spread(n, n_changed, 0.5)
        assert not set(changed_lines) & set(baseline_lines)
        result["records"] = n

        services: list[ServiceProcess] = []
        try:
            _log(f"starting the embedder ({model})")
            embedder_proc = _start("embedder", {"model": model, "cache_entries": "0"}, tmp)
            services.append(embedder_proc)
            retriever_proc = _start("retriever", {
                "milvus_uri": str(tmp / "store.db"), "embedder_addr": embedder_proc.addr,
            }, tmp)
            services.append(retriever_proc)
            sync_proc = _start("sync", {
                "embedder_addrs": embedder_proc.addr, "retriever_addr": retriever_proc.addr,
                "state_dir": str(tmp / "sync-state"), "topic_model_dir": str(tmp / "topics"),
            }, tmp)
            services.append(sync_proc)
            with (
                sync_channel(embedder_proc.addr) as e_ch,
                sync_channel(retriever_proc.addr) as r_ch,
                sync_channel(sync_proc.addr) as s_ch,
            ):
                embedder = embedder_pb2_grpc.EmbedderServiceStub(e_ch)
                retriever = retriever_pb2_grpc.RetrieverServiceStub(r_ch)
                sync = sync_pb2_grpc.SyncServiceStub(s_ch)
                info = embedder.GetModelInfo(embedder_pb2.GetModelInfoRequest(), timeout=60)
                result.update(model=info.model_name, backend=info.backend, dimension=info.dimension)

                # 1. import through the snapshot
                snapshot = tmp / f"embeddings-{info.model_name}.npz"
                _write_snapshot(snapshot, records, info.model_name, info.dimension)
                _log(f"importing {n:,} records from a snapshot")
                summary, wall, events = _sync(sync, source, snapshot)
                _check("import", summary, read=n, new=n, from_snapshot=n, embedded=0,
                       upserted=n, failed=0)
                imported = _summary_fields(summary, wall, events)
                result["import"] = imported
                result["import_records_per_s"] = imported["records_per_s"]
                _log(f"import: {imported['records_per_s']:,.0f} records/s in {wall:.1f}s")

                # 2. no-change resyncs and the per-batch Get baseline
                runs = []
                for i in range(repeats):
                    summary, wall, events = _sync(sync, source)
                    _check("no-change resync", summary, read=n, unchanged=n, changed=0, new=0,
                           embedded=0, upserted=0, failed=0)
                    runs.append(_summary_fields(summary, wall, events))
                    _log(f"no-change {i + 1}/{repeats}: {runs[-1]['records_per_s']:,.0f} records/s "
                         f"({runs[-1]['embed_calls']} embed calls)")
                median = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
                # The runs above skip parsing through the line cache the import wrote; one run
                # without it shows the parse-everything rate (it rebuilds the cache).
                for cache in (tmp / "sync-state").glob("line-cache-*.npz"):
                    cache.unlink()
                summary, wall, events = _sync(sync, source)
                _check("uncached no-change resync", summary, read=n, unchanged=n, embedded=0,
                       upserted=0, failed=0)
                uncached = _summary_fields(summary, wall, events)
                result["nochange_uncached_records_per_s"] = uncached["records_per_s"]
                _log(f"no-change without the line cache: {uncached['records_per_s']:,.0f} records/s")
                _log("no-change baseline: Get per batch of the file")
                load_before = _load()
                read, unchanged, base_wall = nochange_baseline(retriever, source, BATCH_SIZE)
                if unchanged != n:
                    raise AssertionError(f"baseline found {unchanged} unchanged of {n}")
                base_rate = read / base_wall
                result.update(
                    nochange_records_per_s=median["records_per_s"],
                    nochange_embed_calls=max(r["embed_calls"] for r in runs),
                    nochange_wall_s=median["wall_s"],
                    nochange_server_elapsed_s=median["server_elapsed_s"],
                    nochange_records_per_s_all=[r["records_per_s"] for r in runs],
                    nochange_runs=runs,
                    nochange_baseline_records_per_s=round(base_rate, 1),
                    nochange_baseline_wall_s=round(base_wall, 3),
                    nochange_baseline_get_calls=-(-n // BATCH_SIZE),
                    nochange_baseline_load_avg_1m=[load_before, _load()],
                    nochange_speedup=round(median["records_per_s"] / base_rate, 2),
                )
                _log(f"no-change baseline: {base_rate:,.0f} records/s")

                # 3. changed records: batched through sync and one call per record, taking turns
                per_round = []
                sync_wall = per_record_s = 0.0
                sync_changed = 0
                stored_changed: dict[int, str] = {}  # line index -> the sentence stored with it
                for k in range(rounds):
                    sync_lines, base_lines = changed_lines[k::rounds], baseline_lines[k::rounds]
                    # Earlier rounds' records (both kinds) are stored changed: the file says so.
                    stored_changed.update(dict.fromkeys(sync_lines, CHANGED_SENTENCE))
                    changed_source = tmp / f"changed-{k}.jsonl.gz"
                    _write_changed(source, changed_source, stored_changed)
                    _log(f"round {k + 1}/{rounds}: syncing {len(sync_lines)} changed records")
                    summary, wall, events = _sync(sync, changed_source)
                    changed_source.unlink()
                    m = len(sync_lines)
                    _check("changed sync", summary, read=n, unchanged=n - m, changed=m, new=0,
                           embedded=m, vector_reused=0, upserted=m, failed=0)
                    fields = _summary_fields(summary, wall, events)
                    _log(f"round {k + 1}/{rounds}: {m / wall:.3f} changed records/s end to end; "
                         f"baseline: {len(base_lines)} records, one Embed + one Upsert each")
                    base_records = _changed_records(source, base_lines, BASELINE_SENTENCE)
                    assert all(p.sha256 != records[i].sha256
                               for p, i in zip(base_records, base_lines, strict=True))
                    seconds = per_record_baseline(embedder, retriever, base_records)
                    stored_changed.update(dict.fromkeys(base_lines, BASELINE_SENTENCE))
                    _log(f"round {k + 1}/{rounds}: baseline "
                         f"{len(base_lines) / seconds:.3f} records/s")
                    sync_wall += wall
                    sync_changed += m
                    per_record_s += seconds
                    per_round.append({**fields, "changed_records_per_s": round(m / wall, 3),
                                      "baseline_records": len(base_lines),
                                      "baseline_s": round(seconds, 2),
                                      "baseline_records_per_s": round(len(base_lines) / seconds, 3),
                                      "load_avg_1m_after_baseline": _load()})
                marginal_s = sync_wall - rounds * median["wall_s"]
                marginal = sync_changed / marginal_s
                per_record = n_changed / per_record_s
                result.update(
                    changed_records_per_s=round(sync_changed / sync_wall, 3),
                    changed_marginal_records_per_s=round(marginal, 3),
                    changed_wall_s=round(sync_wall, 2),
                    changed_marginal_s=round(marginal_s, 2),
                    changed_embed_calls=sum(r["embed_calls"] for r in per_round),
                    changed_rounds=per_round,
                    changed_baseline_records_per_s=round(per_record, 3),
                    changed_baseline_wall_s=round(per_record_s, 2),
                    changed_speedup=round(marginal / per_record, 2),
                )
                # Upserts of changed records replace rows: the store holds each id once.
                stats = retriever.Stats(retriever_pb2.StatsRequest(), timeout=600)
                result["store_paper_count"] = stats.paper_count
                if stats.paper_count != n:
                    raise AssertionError(f"the store holds {stats.paper_count} papers, not {n}")
        except BaseException:
            for service in services:
                _log(f"{service.name} log tail:\n{service.log_tail(30)}")
            raise
        finally:
            _log("stopping the services")
            for service in reversed(services):
                service.stop(timeout_s=STOP_TIMEOUT_S)
    result.update(
        projections=_projections(
            result["nochange_records_per_s"], result["changed_marginal_records_per_s"],
            result["import_records_per_s"],
        ),
        targets={
            "nochange_records_per_s_at_least_20000": result["nochange_records_per_s"] >= 20_000,
            "nochange_embed_calls_zero": result["nochange_embed_calls"] == 0,
        },
        load_avg_1m_at_end=_load(),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MPNET)
    parser.add_argument("--n-changed", type=int, default=N_CHANGED)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--records", type=int, default=None,
                        help="use only the first N records of the source (development)")
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    emit(run(model=args.model, n_changed=args.n_changed, repeats=args.repeats,
             n_records=args.records, rounds=args.rounds, source=args.source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
