"""Sources given as http(s) URLs: downloaded into the download directory, then read as a file.

One file per URL, named from a hash of the URL plus the URL's suffix (`.json.gz`). A download
streams into a temporary file beside it and is renamed into place only when complete, so a crash
never leaves a half file under the final name. The response's ETag and Last-Modified are kept
beside the file; the next download of the URL is a conditional GET, and 304 Not Modified reuses
the file, so an unchanged 1.3 GB snapshot is not fetched again. A failed download changes
nothing: the previous copy, if any, stays.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import httpx

from services.common.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from services.sync.peers import Cancelled

SCHEMES = ("http", "https")
CHUNK_BYTES = 1024 * 1024
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,8}$")

Progress = Callable[[int, int], None]  # (bytes received, Content-Length or 0)


def is_url(source: str) -> bool:
    """True for an http(s) URL, False for a path; INVALID_ARGUMENT for any other scheme."""
    match = _SCHEME.match(source)
    if match is None:
        return False
    if match.group(1).lower() not in SCHEMES:
        raise InvalidArgument(
            f"source {shown(source)!r} uses {match.group(1)}://, which the sync service cannot "
            "read; give an http:// or https:// URL, or an absolute path on the sync service's "
            "filesystem"
        )
    return True


def shown(source: str) -> str:
    """A source for messages and logs: a URL without user:password and query (signed URLs carry
    secrets there); a path as it is."""
    if "://" not in source:
        return source
    parts = urlsplit(source)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}" + ("?..." if parts.query else "")


def local_name(url: str) -> str:
    suffixes = [s for s in PurePosixPath(urlsplit(url).path).suffixes[-2:] if _SUFFIX.match(s)]
    return hashlib.sha256(url.encode()).hexdigest()[:24] + "".join(suffixes)


@dataclass(frozen=True)
class Downloaded:
    path: Path
    downloaded_bytes: int  # 0 when the copy already here was reused (304)


class Downloader:
    def __init__(self, directory: Path, connect_timeout_s: float, read_timeout_s: float):
        self.directory = directory
        self.timeouts_s = (connect_timeout_s, read_timeout_s)
        self.timeout = httpx.Timeout(connect_timeout_s, read=read_timeout_s)

    def fetch(self, url: str, on_progress: Progress, cancelled: threading.Event) -> Downloaded:
        path = self.directory / local_name(url)
        meta_path = path.with_name(path.name + ".meta.json")
        headers = {"Accept-Encoding": "identity"}  # the bytes as served: .gz stays gzip
        if path.is_file():
            headers |= _conditional(meta_path)
        try:
            with httpx.Client(timeout=self.timeout, follow_redirects=True) as client, \
                    client.stream("GET", url, headers=headers) as response:
                if response.status_code == 304 and path.is_file():
                    return Downloaded(path, 0)
                _check_status(url, response)
                size = self._save(response, path, meta_path, on_progress, cancelled)
        except httpx.TimeoutException as exc:
            raise Unavailable(
                f"downloading {shown(url)} timed out ({type(exc).__name__}; limits: "
                f"{self.timeouts_s[0]:g} s to connect, {self.timeouts_s[1]:g} s between two "
                "reads); check that the sync service can reach the host, or raise "
                "CITEWEAVE_SYNC_DOWNLOAD_CONNECT_TIMEOUT_S / _READ_TIMEOUT_S. Nothing stored "
                "was changed."
            ) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise InvalidArgument(f"source URL {shown(url)} cannot be downloaded: {exc}") from None
        except httpx.HTTPError as exc:
            raise Unavailable(
                f"could not download {shown(url)}: {str(exc) or type(exc).__name__}; check that the "
                "sync service can reach the host. Nothing stored was changed."
            ) from None
        except OSError as exc:  # the download directory, not the network (httpx wraps those)
            raise FailedPrecondition(
                f"cannot write the download of {shown(url)} into {self.directory}: {exc}; set "
                "CITEWEAVE_SYNC_DOWNLOAD_DIR to a writable directory with room for the file"
            ) from None
        return Downloaded(path, size)

    def _save(self, response: httpx.Response, path: Path, meta_path: Path,
              on_progress: Progress, cancelled: threading.Event) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        total = int(response.headers.get("content-length", 0) or 0)
        fd, tmp_name = tempfile.mkstemp(dir=self.directory, prefix=f".{path.name}.", suffix=".part")
        tmp = Path(tmp_name)
        try:
            received = 0
            with os.fdopen(fd, "wb") as out:
                on_progress(0, total)
                for chunk in response.iter_raw(CHUNK_BYTES):
                    if cancelled.is_set():
                        raise Cancelled()
                    out.write(chunk)
                    received += len(chunk)
                    on_progress(received, total)
                out.flush()
                os.fsync(out.fileno())
            # Validators of the old copy must never describe the new one, even for an instant.
            meta_path.unlink(missing_ok=True)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        validators = {"etag": response.headers.get("etag"),
                      "last_modified": response.headers.get("last-modified")}
        meta_tmp = meta_path.with_name(meta_path.name + ".tmp")
        meta_tmp.write_text(json.dumps(validators))
        os.replace(meta_tmp, meta_path)
        return received


def _conditional(meta_path: Path) -> dict[str, str]:
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return {}  # no validators: an unconditional GET, which is always correct
    headers = {}
    if meta.get("etag"):
        headers["If-None-Match"] = meta["etag"]
    if meta.get("last_modified"):
        headers["If-Modified-Since"] = meta["last_modified"]
    return headers


def _check_status(url: str, response: httpx.Response) -> None:
    code = response.status_code
    if response.is_success:
        return
    answered = f"{shown(url)} answered {code} {response.reason_phrase}"
    if code in (404, 410):
        raise NotFound(f"{answered}: there is no file at this URL; check the URL")
    if code >= 500 or code in (408, 429):
        raise Unavailable(f"{answered}; the server is failing or overloaded, retry later. "
                          "Nothing stored was changed.")
    raise FailedPrecondition(
        f"{answered}; the sync service may not download it (check the URL and the server's "
        "access rules)"
    )
