"""The doc writer and the plots of `make bench`, on a small hand-made results object."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from bench_fixtures import results

from bench import plots, report, run_all

NARRATIVE_TOP = "# Performance\n\nHand-written introduction that must survive.\n\n"
NARRATIVE_BOTTOM = "\n\n## Analysis\n\nHand-written analysis, also kept.\n"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _doc(tmp_path: Path, middle: str = "old generated text 12345") -> Path:
    doc = tmp_path / "performance.md"
    doc.write_text(f"{NARRATIVE_TOP}{report.BEGIN}\n{middle}\n{report.END}{NARRATIVE_BOTTOM}")
    return doc


def test_publish_writes_json_plots_and_section_keeping_the_narrative(tmp_path):
    doc = _doc(tmp_path)
    published = run_all.publish(results(), tmp_path)

    text = doc.read_text()
    assert text.startswith(NARRATIVE_TOP)
    assert text.endswith(NARRATIVE_BOTTOM)
    assert "old generated text 12345" not in text
    assert text.count(report.BEGIN) == 1 and text.count(report.END) == 1
    section = text[text.index(report.BEGIN):text.index(report.END)]
    # the machine and the date
    assert "Test CPU 9000, 2 cores (avx2), 23.4 GiB" in section
    assert "2026-01-02 03:04 UTC" in section
    assert "25.9 min" in section
    assert "0.42 / 0.50 / 0.60" in section
    # the figures of each benchmark
    assert "| 2.585 | 1.423 | **1.82×** |" in section  # embedder, mpnet
    assert "**all-MiniLM-L6-v2**" in section
    assert "| 4 | 31.75 | 17.50 | **1.81×** |" in section  # batch sweep row
    assert "| milvus-lite 9.9.9 | 100,000 | 777 | **181 ms** |" in section
    assert "| milvus-server 9.9.9 | 10,000 | 777 | **21.0 ms** |" in section
    assert "**30,380**" in section and "2,724" in section and "**11.2×**" in section
    assert "| 2.314 |" in section and "| 2.188 |" in section
    # images linked relative to the document, files valid PNGs
    for name in ("bench-search-latency.png", "bench-embedder-batch.png", "bench-sync-rates.png"):
        assert f"](img/{name})" in section
        width, height = _png_size(tmp_path / "img" / name)
        assert width >= 600 and height >= 400
    saved = json.loads((tmp_path / "bench" / "latest.json").read_text())
    assert saved["benchmarks"]["sync"]["result"]["nochange_records_per_s"] == 30380.0
    assert published["written"]["doc"] == str(doc)


def test_second_publish_replaces_the_section_instead_of_adding_one(tmp_path):
    doc = _doc(tmp_path)
    run_all.publish(results(), tmp_path)
    changed = results()
    changed["benchmarks"]["embedder"]["result"]["texts_per_s"] = 9.876
    run_all.publish(changed, tmp_path)
    text = doc.read_text()
    assert text.count(report.BEGIN) == 1
    assert "| 9.876 |" in text and "| 2.585 |" not in text
    assert text.startswith(NARRATIVE_TOP) and text.endswith(NARRATIVE_BOTTOM)


def test_section_goes_before_the_first_heading_when_there_are_no_markers():
    text = "# Performance\n\nIntro.\n\n## Embedder\n\nOld table.\n"
    updated = report.replace_section(text, "GENERATED")
    assert updated.index("Intro.") < updated.index("GENERATED") < updated.index("## Embedder")
    assert updated.endswith("## Embedder\n\nOld table.\n")
    assert report.replace_section(updated, "AGAIN").count(report.BEGIN) == 1


@pytest.mark.parametrize("broken", [
    f"{report.BEGIN}\nonly the start\n",
    f"{report.END}\n{report.BEGIN}\n",
    f"{report.BEGIN}\n{report.END}\n{report.BEGIN}\n{report.END}\n",
])
def test_broken_markers_are_refused_rather_than_guessed(broken):
    with pytest.raises(report.MarkerError):
        report.replace_section(broken, "GENERATED")


def test_carried_over_retriever_points_are_marked_in_table_and_plot(tmp_path):
    data = results()
    point = data["benchmarks"]["retriever"]["result"]["points"][-1]
    point.update(n_vectors=1_000_000, carried_over=True, measured_at="2025-12-31T23:00:00+00:00")
    doc = _doc(tmp_path)
    run_all.publish(data, tmp_path)
    assert "| milvus-server 9.9.9 | 1,000,000 |" in doc.read_text()
    assert "2025-12-31 23:00 UTC, carried over" in doc.read_text()


def test_plots_skip_what_the_results_lack(tmp_path):
    data = results()
    del data["benchmarks"]["embedder"]["result"]["batch_sweep"]
    del data["benchmarks"]["sync"]
    drawn = plots.draw_all(data, tmp_path)
    assert set(drawn) == {"search_latency"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench-search-latency.png"]
