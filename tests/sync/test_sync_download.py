"""Downloading URL sources, without services: names, validators, 304s, atomic files, failures.

The server is a real HTTP server on 127.0.0.1 (sync_support.FileServer)."""

from __future__ import annotations

import threading

import pytest

from services.common.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from services.common.launcher import free_port
from services.sync.download import Downloader, is_url, local_name, shown
from services.sync.peers import Cancelled
from sync_support import FileServer

DATA = b"".join(b'{"id": "%d", "title": "t", "abstract": "a"}\n' % i for i in range(80_000))


@pytest.fixture
def server():
    with FileServer.running() as server:
        server.put("corpus.jsonl.gz", DATA)
        yield server


def _fetch(downloader: Downloader, url: str, cancelled: threading.Event | None = None):
    seen: list[tuple[int, int]] = []
    result = downloader.fetch(url, lambda done, total: seen.append((done, total)),
                              cancelled or threading.Event())
    return result, seen


def _leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.glob("*.part")) if directory.exists() else []


def test_only_http_and_https_are_urls():
    assert is_url("http://mirror.example/arxiv.json.gz") and is_url("HTTPS://m.example/x")
    assert not is_url("/data/arxiv.json.gz") and not is_url("relative/x.jsonl")
    for other in ("ftp://mirror.example/arxiv.json.gz", "file:///data/arxiv.json.gz"):
        with pytest.raises(InvalidArgument, match="give an http:// or https:// URL"):
            is_url(other)


def test_names_keep_the_suffix_and_messages_hide_secrets():
    name = local_name("https://m.example/kaggle/arxiv-metadata-oai-snapshot.json.gz")
    assert name.endswith(".json.gz") and len(name) == 24 + len(".json.gz")
    assert local_name("https://m.example/a.json.gz") != local_name("https://m.example/b.json.gz")
    assert "." not in local_name("https://m.example/download?file=x.gz")
    assert shown("https://user:secret@m.example:8443/a.gz?sig=abc") == "https://m.example:8443/a.gz?..."
    assert shown("/data/arxiv.json.gz") == "/data/arxiv.json.gz"


def test_a_second_download_is_conditional_and_a_304_reuses_the_file(server, tmp_path):
    downloader = Downloader(tmp_path / "dl", 5, 5)
    url = server.url("corpus.jsonl.gz")
    first, seen = _fetch(downloader, url)
    assert first.downloaded_bytes == len(DATA) and first.path.read_bytes() == DATA
    assert first.path.name == local_name(url) and first.path.parent == tmp_path / "dl"
    assert seen[0] == (0, len(DATA)) and seen[-1] == (len(DATA), len(DATA))
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    modified = first.path.stat().st_mtime_ns

    again, seen = _fetch(downloader, url)
    assert (again.path, again.downloaded_bytes, seen) == (first.path, 0, [])
    assert again.path.stat().st_mtime_ns == modified
    assert server.statuses("corpus.jsonl.gz") == [200, 304]
    assert server.requests[-1][2] is not None, "If-None-Match was sent"

    server.put("corpus.jsonl.gz", DATA + DATA[:1000])
    changed, _ = _fetch(downloader, url)
    assert changed.downloaded_bytes == len(DATA) + 1000 and changed.path.read_bytes() == DATA + DATA[:1000]
    assert server.statuses("corpus.jsonl.gz") == [200, 304, 200]
    assert _leftovers(tmp_path / "dl") == []


def test_last_modified_alone_is_enough_for_a_304(server, tmp_path):
    downloader = Downloader(tmp_path, 5, 5)
    url = server.url("corpus.jsonl.gz", route="lm")
    assert _fetch(downloader, url)[0].downloaded_bytes == len(DATA)
    assert _fetch(downloader, url)[0].downloaded_bytes == 0
    (_, _, _, first_since), (_, status, etag, since) = server.requests
    assert (first_since, status, etag) == (None, 304, None) and since


@pytest.mark.parametrize(("trouble", "error", "words"), [
    (404, NotFound, "answered 404 Not Found"),
    (410, NotFound, "answered 410 Gone"),
    (403, FailedPrecondition, "answered 403 Forbidden"),
    (401, FailedPrecondition, "answered 401 Unauthorized"),
    (503, Unavailable, "answered 503 Service Unavailable"),
    (500, Unavailable, "answered 500 Internal Server Error"),
    ("truncate", Unavailable, "could not download"),
    ("stall", Unavailable, "timed out"),
])
def test_a_failed_download_keeps_the_previous_copy(server, tmp_path, trouble, error, words):
    downloader = Downloader(tmp_path, 5, 0.5)
    url = server.url("corpus.jsonl.gz")
    first, _ = _fetch(downloader, url)
    meta = first.path.with_name(first.path.name + ".meta.json").read_bytes()
    server.put("corpus.jsonl.gz", b"a newer version\n" * 1000)
    server.misbehave["corpus.jsonl.gz"] = trouble
    with pytest.raises(error) as raised:
        _fetch(downloader, url)
    assert words in raised.value.message and url in raised.value.message
    assert first.path.read_bytes() == DATA, "the earlier copy is intact"
    assert first.path.with_name(first.path.name + ".meta.json").read_bytes() == meta
    assert _leftovers(tmp_path) == []


def test_an_unreachable_host_is_unavailable_naming_the_url(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/arxiv.json.gz"
    with pytest.raises(Unavailable) as raised:
        _fetch(Downloader(tmp_path, 2, 2), url)
    assert raised.value.message.startswith(f"could not download {url}: ")
    assert not list(tmp_path.iterdir())


def test_a_cancelled_download_leaves_no_file(server, tmp_path):
    server.put("big.jsonl", DATA * 4)
    cancelled = threading.Event()
    downloader = Downloader(tmp_path, 5, 5)
    with pytest.raises(Cancelled):
        downloader.fetch(server.url("big.jsonl"),
                         lambda done, _: cancelled.set() if done else None, cancelled)
    assert not list(tmp_path.iterdir())


def test_an_unwritable_download_directory_says_which_setting(server, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with pytest.raises(FailedPrecondition, match="CITEWEAVE_SYNC_DOWNLOAD_DIR"):
        _fetch(Downloader(blocker / "dl", 5, 5), server.url("corpus.jsonl.gz"))
