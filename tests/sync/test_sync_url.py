"""Sync from http(s) URLs through the real services, the snapshot served from 127.0.0.1: the same
records as from the file, a 304 that downloads nothing, download progress before reading, and
failures with the right status code, a message naming the URL, and nothing stored lost."""

from __future__ import annotations

import gzip

import grpc
import pytest
from typer.testing import CliRunner

from citeweave.sync.v1 import sync_pb2
from services.cli.main import app
from services.common.corpus import row_from_arxiv, row_sha256
from services.common.launcher import free_port
from services.sync.download import local_name
from sync_support import FileServer, only, run_sync, sync_stack

DOWNLOADING, READING = sync_pb2.SYNC_PHASE_DOWNLOADING, sync_pb2.SYNC_PHASE_READING


@pytest.fixture(scope="module")
def server():
    with FileServer.running() as server:
        yield server


@pytest.fixture(scope="module")
def stack(minilm_embedder, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("url")
    with sync_stack(tmp, minilm_embedder.addr, download_dir=str(tmp / "downloads"),
                    download_connect_timeout_s="2", download_read_timeout_s="1") as stack:
        yield stack


def _downloads(stack) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((stack.tmp / "downloads").iterdir())}


def test_a_url_stores_what_the_file_stores_and_an_unchanged_one_is_not_downloaded_again(
        stack, server, slices):
    server.put("arxiv.jsonl.gz", slices.a.read_bytes())
    url = server.url("arxiv.jsonl.gz")
    size = slices.a.stat().st_size

    first = run_sync(stack.sync_stub, url, batch_size=16)
    assert only(first.counts) == {"read": 60, "new": 60, "embedded": 60, "upserted": 60}
    assert first.summary.downloaded_bytes == size
    assert first.summary.format == sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE
    # The download is reported first, in bytes of the file served; then the reading.
    phases = [p.phase for p in first.progress]
    assert phases == sorted(phases) and phases[0] == DOWNLOADING and phases[-1] == READING
    downloading = [p for p in first.progress if p.phase == DOWNLOADING]
    assert {p.bytes_total for p in downloading} == {size} and downloading[-1].bytes_read == size
    assert all(p.counts.read == 0 for p in downloading)
    assert _downloads(stack)[local_name(url)] == slices.a.read_bytes()

    # The same records as a sync of the file itself: every row's hash is the file's.
    by_path = run_sync(stack.sync_stub, slices.a)
    assert only(by_path.counts) == {"read": 60, "unchanged": 60} and by_path.embed_calls == 0
    rows = stack.rows(list(slices.a_records))
    assert {i: r.paper.sha256 for i, r in rows.items()} == {
        i: row_sha256(row_from_arxiv(record)) for i, record in slices.a_records.items()}

    again = run_sync(stack.sync_stub, url)
    assert server.statuses("arxiv.jsonl.gz") == [200, 304]
    assert again.summary.downloaded_bytes == 0
    assert not [p for p in again.progress if p.phase == DOWNLOADING]
    assert only(again.counts) == {"read": 60, "unchanged": 60} and again.embed_calls == 0

    # A new snapshot at the same URL is downloaded and synced.
    server.put("arxiv.jsonl.gz", gzip.compress(slices.b.read_bytes()))
    changed = run_sync(stack.sync_stub, url, batch_size=16)
    assert server.statuses("arxiv.jsonl.gz") == [200, 304, 200]
    assert only(changed.counts) == {"read": 90, "unchanged": 46, "changed": 14, "new": 30,
                                     "vector_reused": 9, "embedded": 35, "upserted": 44}
    assert stack.count() == 90
    assert not [n for n in _downloads(stack) if n.endswith(".part")]


@pytest.fixture(scope="module")
def stored(stack, slices):
    """The store holding slice B (synced from the file): what failed downloads must not touch."""
    run_sync(stack.sync_stub, slices.b)
    ids = list(slices.b_records)
    return ids, stack.rows(ids)


@pytest.mark.parametrize(("trouble", "code", "words"), [
    (404, grpc.StatusCode.NOT_FOUND, "answered 404 Not Found: there is no file at this URL"),
    (403, grpc.StatusCode.FAILED_PRECONDITION, "answered 403 Forbidden; the sync service may not"),
    (503, grpc.StatusCode.UNAVAILABLE, "answered 503 Service Unavailable; the server is failing"),
    ("truncate", grpc.StatusCode.UNAVAILABLE, "could not download"),
    ("stall", grpc.StatusCode.UNAVAILABLE, "timed out"),
])
def test_a_failed_download_names_the_url_and_loses_nothing(
        stack, server, stored, slices, trouble, code, words):
    ids, before = stored
    name = f"failing-{trouble}.jsonl"
    server.put(name, slices.b.read_bytes())
    server.misbehave[name] = trouble
    url = server.url(name)
    with pytest.raises(grpc.RpcError) as error:
        run_sync(stack.sync_stub, url, delete_missing=True)
    assert error.value.code() == code
    assert url in error.value.details() and words in error.value.details()
    assert stack.count() == 90 and stack.rows(ids) == before
    assert local_name(url) not in _downloads(stack)
    assert not [n for n in _downloads(stack) if n.endswith(".part")]
    assert not (stack.tmp / "sync-state" / "unfinished-sync.json").exists()


@pytest.mark.parametrize(("source", "code", "words"), [
    (lambda: f"http://127.0.0.1:{free_port()}/arxiv.json.gz", grpc.StatusCode.UNAVAILABLE,
     "could not download http://127.0.0.1:"),
    (lambda: "ftp://127.0.0.1/arxiv.json.gz", grpc.StatusCode.INVALID_ARGUMENT,
     "uses ftp://, which the sync service cannot read; give an http:// or https:// URL"),
    (lambda: "file:///etc/hostname", grpc.StatusCode.INVALID_ARGUMENT, "uses file://"),
])
def test_a_closed_port_and_other_schemes_are_refused(stack, stored, source, code, words):
    ids, before = stored
    url = source()
    with pytest.raises(grpc.RpcError) as error:
        run_sync(stack.sync_stub, url, delete_missing=True)
    assert error.value.code() == code and words in error.value.details()
    assert stack.count() == 90 and stack.rows(ids) == before


def test_a_failed_new_download_keeps_the_earlier_copy(stack, server, stored, slices):
    ids, before = stored
    name = "kept.jsonl"
    lines = slices.b.read_bytes().splitlines(keepends=True)
    server.put(name, b"".join(lines))
    url = server.url(name)
    assert run_sync(stack.sync_stub, url).counts["unchanged"] == 90
    copy = _downloads(stack)[local_name(url)]

    server.put(name, b"".join(reversed(lines)))  # the same records, other bytes
    for trouble in (503, "truncate"):
        server.misbehave[name] = trouble
        with pytest.raises(grpc.RpcError):
            run_sync(stack.sync_stub, url)
        assert _downloads(stack)[local_name(url)] == copy
    del server.misbehave[name]
    newer = run_sync(stack.sync_stub, url)
    assert newer.summary.downloaded_bytes == len(copy) and newer.counts["unchanged"] == 90
    assert _downloads(stack)[local_name(url)] == b"".join(reversed(lines))
    assert server.statuses(name) == [200, 503, 200, 200]
    assert stack.rows(ids) == before


def test_the_cli_hands_a_url_to_the_service_untouched(stack, server, stored, slices):
    server.put("cli.jsonl", slices.b.read_bytes())
    runner = CliRunner()
    result = runner.invoke(app, ["sync", server.url("cli.jsonl"), "--json",
                                 "--sync-addr", stack.sync.addr])
    assert result.exit_code == 0, result.output
    assert '"unchanged": 90' in result.output
    refused = runner.invoke(app, ["sync", "ftp://127.0.0.1/x.json.gz", "--sync-addr", stack.sync.addr])
    assert refused.exit_code == 1
    assert "INVALID_ARGUMENT" in refused.output and "uses ftp://" in refused.output
    assert "does not exist" not in refused.output
