"""Reading a corpus source line by line: format detection, bad lines reported, never loaded whole.

Only a block of a few MB is held in memory, so a multi-GB snapshot streams through in constant
space. A line that cannot become a row is reported with its 1-based line number and the rest of
the file goes on; a .gz that ends early stops the read and marks the source incomplete, which
turns off everything that needs the whole file (missing ids, deletions).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from citeweave.sync.v1 import sync_pb2
from services.common.corpus import BadRecord, PaperRow, row_from_arxiv, row_from_jsonl, row_sha256
from services.common.errors import InvalidArgument, NotFound

GZIP_MAGIC = b"\x1f\x8b"
MAX_LINE_BYTES = 4 * 1024 * 1024
READ_BYTES = 256 * 1024  # file bytes per read
BLOCK_BYTES = 2 * 1024 * 1024  # most decompressed bytes per block
# Keys only the Kaggle arXiv snapshot has; one of them on the first record picks that format.
_KAGGLE_KEYS = frozenset({"authors_parsed", "versions", "update_date", "submitter", "journal-ref"})
_DETECT_LINES = 100

FORMAT_NAMES = {
    sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE: "arxiv-kaggle",
    sync_pb2.SOURCE_FORMAT_JSONL: "jsonl",
}
# The names a person gives a format (CLI, worker).
FORMAT_CHOICES = {
    "auto": sync_pb2.SOURCE_FORMAT_UNSPECIFIED,
    "arxiv": sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE,
    "jsonl": sync_pb2.SOURCE_FORMAT_JSONL,
}
_PARSERS = {
    sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE: row_from_arxiv,
    sync_pb2.SOURCE_FORMAT_JSONL: row_from_jsonl,
}


def line_digest(line: bytes) -> int:
    """64-bit digest of a raw line: the key of the line cache."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")


def sha_prefix(sha256_hex: str) -> int:
    """The first 64 bits of a row hash, as the line cache keeps them."""
    return int(sha256_hex[:16], 16)


def check_format(fmt: int) -> None:
    if fmt not in (sync_pb2.SOURCE_FORMAT_UNSPECIFIED, *FORMAT_NAMES):
        raise InvalidArgument(f"format {fmt} is unknown; use ARXIV_KAGGLE (1) or JSONL (2)")


@dataclass(frozen=True)
class Parsed:
    line: int
    row: PaperRow
    sha256: str
    digest: int = 0


@dataclass(frozen=True)
class Known:
    """A line byte-identical to one the last full sync stored: its id and row hash prefix are
    known without parsing it."""

    line: int
    record_id: str
    sha_prefix: int
    digest: int
    raw: bytes


@dataclass(frozen=True)
class Failure:
    line: int
    record_id: str  # "" when the id could not be read
    reason: str


_GZIP_ERRORS = (EOFError, zlib.error, OSError)


def _bad_line_reason(line: bytes, error: Exception) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 (byte 0x{line[exc.start]:02x} at position {exc.start})"
    return f"not valid JSON: {error}"


class Source:
    """An opened source. `records()` yields Parsed rows and Failures in file order."""

    def __init__(self, path: Path, fmt: int):
        self.path = path
        self.format = fmt
        self.complete = True  # False once the end of the file could not be read
        self.size = path.stat().st_size
        self.position = 0  # bytes of the file consumed so far (compressed bytes for .gz)
        self.unidentified_failures = 0  # failed lines whose id is unknown
        self._parse = _PARSERS[fmt]

    @classmethod
    def open(cls, path: Path, fmt: int = sync_pb2.SOURCE_FORMAT_UNSPECIFIED) -> "Source":
        """Checks the path and the format before anything is written; NOT_FOUND or
        INVALID_ARGUMENT with the reason otherwise."""
        check_format(fmt)
        if not path.is_absolute():
            raise InvalidArgument(
                f"source path {str(path)!r} is relative; give an absolute path the sync "
                "service can read"
            )
        if not path.exists():
            raise NotFound(f"source {path} does not exist (on the sync service's filesystem)")
        if not path.is_file():
            raise InvalidArgument(f"source {path} is not a regular file")
        if not os.access(path, os.R_OK):
            raise InvalidArgument(f"source {path} is not readable by the sync service")
        # A format given still gets the probe: an unreadable gzip is refused before any write.
        detected = cls(path, sync_pb2.SOURCE_FORMAT_JSONL)._detect()
        return cls(path, fmt if fmt != sync_pb2.SOURCE_FORMAT_UNSPECIFIED else detected)

    def _detect(self) -> int:
        """The format of the first JSON object in the first lines, read the way records() reads."""
        for number, line in self._lines():
            if number > _DETECT_LINES:
                break
            if isinstance(line, Failure):
                if not self.complete:
                    raise InvalidArgument(f"source {self.path} cannot be read as gzip: {line.reason}")
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                if _KAGGLE_KEYS & record.keys():
                    return sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE
                return sync_pb2.SOURCE_FORMAT_JSONL
        raise InvalidArgument(
            f"source {self.path} has no JSON object in its first {_DETECT_LINES} lines; it must "
            "be JSON lines (one record per line), plain or .gz"
        )

    def _blocks(self) -> Iterator[bytes]:
        """The file's bytes in large decompressed blocks. Splitting blocks into lines in bulk
        costs a fraction of gzip's per-line readline, which was a fifth of a no-change sync.
        Raises EOFError for a .gz that ends early and zlib.error for a corrupt one."""
        with self.path.open("rb") as raw:
            compressed = raw.read(2) == GZIP_MAGIC
            raw.seek(0)
            inflater = zlib.decompressobj(wbits=31) if compressed else None
            started = False
            while chunk := raw.read(READ_BYTES):
                self.position = raw.tell()
                if inflater is None:
                    yield chunk
                    continue
                while chunk:
                    started = True
                    # Bounded output per call: a small, highly compressed input cannot make one
                    # huge block.
                    yield inflater.decompress(chunk, BLOCK_BYTES)
                    chunk = inflater.unconsumed_tail
                    if inflater.eof:  # the next gzip member, if any, follows
                        chunk = inflater.unused_data
                        inflater, started = zlib.decompressobj(wbits=31), False
            if inflater is not None and started:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")

    def _lines(self) -> Iterator[tuple[int, bytes | Failure]]:
        number = 0
        pending = b""
        skipping = False  # inside a line longer than MAX_LINE_BYTES

        def too_long() -> Failure:
            self.unidentified_failures += 1
            return Failure(number, "", f"line is longer than {MAX_LINE_BYTES} bytes")

        try:
            for block in self._blocks():
                if skipping:
                    cut = block.find(b"\n")
                    if cut < 0:
                        continue
                    block, skipping = block[cut + 1:], False
                    number += 1
                    yield number, too_long()
                pending += block
                lines = pending.split(b"\n")
                pending = lines.pop()
                for line in lines:
                    number += 1
                    yield number, (line if len(line) <= MAX_LINE_BYTES else too_long())
                if len(pending) > MAX_LINE_BYTES:
                    pending, skipping = b"", True
        except _GZIP_ERRORS as exc:
            self.complete = False
            self.unidentified_failures += 1
            yield number + 1, Failure(
                number + 1, "",
                f"the compressed file ends early or is corrupt ({exc}); nothing after line "
                f"{number} can be read",
            )
            return
        if skipping or pending:
            number += 1
            yield number, (too_long() if skipping else pending)
        self.position = self.size

    def records(self, known: dict[int, tuple[str, int]] | None = None) -> Iterator[Parsed | Failure | Known]:
        """Every record in file order. A line whose digest is in `known` (digest -> (id, row
        hash prefix), see services/sync/linecache.py) comes back as Known without being parsed;
        the caller checks it against the store and calls parse_line() when it does not match."""
        known = known if known is not None else {}
        for number, line in self._lines():
            if isinstance(line, Failure):
                yield line
                continue
            if not line.strip():
                continue
            digest = line_digest(line)
            hit = known.pop(digest, None)  # popped: the caller builds the next cache as it goes
            if hit is not None:
                yield Known(number, hit[0], hit[1], digest, line)
                continue
            yield self.parse_line(number, line, digest)

    def parse_line(self, number: int, line: bytes, digest: int) -> Parsed | Failure:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            self.unidentified_failures += 1
            return Failure(number, "", _bad_line_reason(line, exc))
        if not isinstance(record, dict):
            self.unidentified_failures += 1
            return Failure(number, "", f"a record must be a JSON object, got {type(record).__name__}")
        try:
            row = self._parse(record)
        except BadRecord as exc:
            raw_id = record.get("id")
            record_id = str(raw_id).strip() if isinstance(raw_id, str | int) else ""
            if not record_id or str(exc).startswith("id "):
                self.unidentified_failures += 1
                record_id = ""
            return Failure(number, record_id, str(exc))
        except (TypeError, ValueError, AttributeError, IndexError) as exc:
            # A field of an unexpected shape (e.g. authors_parsed not a list of lists).
            raw_id = record.get("id")
            record_id = str(raw_id) if isinstance(raw_id, str) else ""
            if not record_id:
                self.unidentified_failures += 1
            return Failure(number, record_id, f"malformed record: {exc}")
        return Parsed(number, row, row_sha256(row), digest)
