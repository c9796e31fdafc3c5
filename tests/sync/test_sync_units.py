"""Source reading, the canonical hash and the settings, without services."""

from __future__ import annotations

import gzip
import tracemalloc

import orjson
import pytest
from pydantic import ValidationError

from citeweave.sync.v1 import sync_pb2
from services.common.corpus import row_from_arxiv, row_from_jsonl, row_sha256
from services.common.errors import InvalidArgument
from services.sync.settings import SyncSettings
from services.sync import linecache
from services.sync.sources import (
    MAX_LINE_BYTES, Failure, Known, Parsed, Source, line_digest, sha_prefix,
)
from sync_support import ARXIV

KAGGLE_HEAD = ARXIV / "kaggle-format-head200.jsonl"


def test_the_real_kaggle_format_is_detected_and_every_record_parses():
    source = Source.open(KAGGLE_HEAD)
    assert source.format == sync_pb2.SOURCE_FORMAT_ARXIV_KAGGLE
    items = list(source.records())
    assert len(items) == 200 and all(isinstance(i, Parsed) for i in items)
    first = items[0].row
    assert first.id == "0704.0001" and first.year == 2007
    assert first.authors[:2] == ["C. Balázs", "E. L. Berger"]
    assert first.categories == ["hep-ph"] and "\n" not in first.abstract
    assert [i.line for i in items[:3]] == [1, 2, 3]


def test_hash_ignores_key_order_wrapping_and_unstored_fields():
    record = orjson.loads(KAGGLE_HEAD.read_bytes().splitlines()[0])
    base = row_sha256(row_from_arxiv(record))
    reordered = dict(reversed(list(record.items())))
    rewrapped = dict(record, abstract=record["abstract"].replace("\n", " ").replace(" ", "\n", 3))
    unstored = dict(record, comments="v2: typo fixed", doi="10.1/x", license="CC-BY")
    recategorized = dict(record, categories=" ".join(reversed(record["categories"].split())))
    for same in (reordered, rewrapped, unstored, recategorized):
        assert row_sha256(row_from_arxiv(same)) == base
    for changed in (dict(record, title=record["title"] + " (extended)"),
                    dict(record, categories=record["categories"] + " cs.LG"),
                    dict(record, update_date="2030-01-01"),
                    dict(record, authors_parsed=record["authors_parsed"][:-1])):
        assert row_sha256(row_from_arxiv(changed)) != base


def test_generic_records_need_id_title_and_abstract():
    row = row_from_jsonl({"id": "doi:10.1/x", "title": " A  title ", "abstract": "Text.",
                          "authors": "A. One, B. Two and C. Three", "year": "2019"})
    assert (row.title, row.authors, row.year) == ("A title", ["A. One", "B. Two", "C. Three"], 2019)
    for bad, reason in [({"title": "t", "abstract": "a"}, "no id"),
                        ({"id": "x", "abstract": "a"}, "no title"),
                        ({"id": "x", "title": "t", "abstract": "   "}, "abstract is blank"),
                        ({"id": "x", "title": "t", "abstract": "a", "year": "soon"}, "year must be"),
                        ({"id": "x", "title": "t", "abstract": "a", "date": "2020/01/01"}, "YYYY-MM-DD"),
                        ({"id": "x", "title": 5, "abstract": "a"}, "title must be a string")]:
        with pytest.raises(ValueError, match=reason):
            row_from_jsonl(bad)


def test_reading_streams_in_constant_memory(tmp_path):
    """20k records (~30 MB uncompressed) read with a bounded heap: a few blocks, not the file."""
    record = orjson.loads(KAGGLE_HEAD.read_bytes().splitlines()[0])
    path = tmp_path / "big.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        for i in range(20_000):
            out.write(orjson.dumps(dict(record, id=f"2401.{i:05d}")) + b"\n")
    tracemalloc.start()
    count = sum(1 for item in Source.open(path).records() if isinstance(item, Parsed))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 20_000
    assert peak < 16 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


def test_the_position_in_the_file_advances_to_its_size(tmp_path):
    lines = KAGGLE_HEAD.read_bytes() * 3  # 860 kB: several reads of the plain file
    for name, data in (("plain.jsonl", lines), ("packed.jsonl.gz", gzip.compress(lines))):
        path = tmp_path / name
        path.write_bytes(data)
        source = Source.open(path)
        positions = [source.position for _ in source.records()]
        assert positions == sorted(positions) and 0 < positions[0]
        if name.endswith(".jsonl"):
            assert positions[0] < len(data), "the plain file is read in several steps"
        assert source.position == source.size == len(data)


def test_an_oversized_line_is_skipped_and_the_next_one_read(tmp_path):
    path = tmp_path / "long.jsonl"
    good = orjson.dumps({"id": "a", "title": "t", "abstract": "x"}) + b"\n"
    path.write_bytes(good + b'{"id": "big", "abstract": "' + b"y" * (MAX_LINE_BYTES + 10) + b'"}\n' + good.replace(b'"a"', b'"b"'))
    items = list(Source.open(path).records())
    assert [type(i) for i in items] == [Parsed, Failure, Parsed]
    assert items[1].line == 2 and "longer than" in items[1].reason and items[2].line == 3


def test_source_paths_are_checked(tmp_path):
    with pytest.raises(InvalidArgument, match="relative"):
        Source.open(tmp_path.relative_to(tmp_path.parent))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InvalidArgument, match="no JSON object"):
        Source.open(empty)


def test_embedder_addresses_are_validated(monkeypatch):
    settings = SyncSettings(embedder_addrs=" a:1 , b:2,")
    assert settings.embedder_addr_list == ["a:1", "b:2"]
    for bad in ("", "a", "a:1;b:2", "http://a:1"):
        with pytest.raises(ValidationError):
            SyncSettings(embedder_addrs=bad)
    monkeypatch.setenv("CITEWEAVE_SYNC_BATCH_SIZE", "0")
    with pytest.raises(ValidationError):
        SyncSettings()


def test_the_line_cache_round_trips_and_a_damaged_one_is_ignored(tmp_path):
    entries = {2**64 - 1: ("10.1145/x", 2**63 + 5), 7: ("2401.00001", 0), 8: ("ünï", 42)}
    path = linecache.cache_path(tmp_path, "jsonl")
    linecache.save(path, entries)
    assert linecache.load(path) == entries
    path.write_bytes(b"garbage")
    assert linecache.load(path) == {}
    assert linecache.load(tmp_path / "absent.npz") == {}


def test_known_lines_are_not_parsed_and_others_are(tmp_path):
    lines = KAGGLE_HEAD.read_bytes().splitlines()[:3]
    path = tmp_path / "three.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    known = {line_digest(lines[1]): ("0704.0002", 99)}
    items = list(Source.open(path).records(known))
    assert [type(i) for i in items] == [Parsed, Known, Parsed]
    assert (items[1].line, items[1].record_id, items[1].sha_prefix) == (2, "0704.0002", 99)
    reparsed = Source.open(path).parse_line(2, items[1].raw, items[1].digest)
    assert reparsed.row.id == "0704.0002" and sha_prefix(reparsed.sha256) != 99
