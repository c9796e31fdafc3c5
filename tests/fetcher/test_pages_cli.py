"""`citeweave pages FILE.pdf`, run as a person runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from services.fetcher.extraction import extract_pdf

REPO = Path(__file__).resolve().parents[2]
PDFS = REPO / "tests" / "fixtures" / "pdfs"
SPECTER = PDFS / "2004.07180_SPECTER_2020.acl-main.207.pdf"
CLI = [sys.executable, "-m", "services.cli.main"]


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_json_is_the_extraction_summary() -> None:
    done = run_cli(["pages", str(SPECTER), "--json"])
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)  # the whole of stdout is one JSON object
    assert summary == extract_pdf(SPECTER.read_bytes(), 300).summary()
    assert {"page": 9, "reason": "references"} in summary["dropped"]
    assert [k["page"] for k in summary["kept"]] == list(range(1, 10))


def test_table_shows_kept_pages_and_dropped_reasons() -> None:
    done = run_cli(["pages", str(SPECTER)])
    assert done.returncode == 0, done.stderr
    for words in ("kept in part", "dropped: acknowledgements", "dropped: references",
                  "dropped: appendix", "A Appendix A - Baseline Details"):
        assert words in done.stdout
    assert "9 of 13 pages kept (1 in part)" in done.stderr


def test_a_file_that_is_not_a_pdf_fails_in_one_line(tmp_path) -> None:
    notes = tmp_path / "notes.pdf"
    notes.write_text("these are my notes, not a PDF\n")
    done = run_cli(["pages", str(notes)])
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("error: ") and "not a PDF" in lines[0] and "notes.pdf" in lines[0]


def test_limits_and_missing_files_fail_in_one_line(tmp_path) -> None:
    missing = run_cli(["pages", str(tmp_path / "absent.pdf")])
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    too_long = run_cli(["pages", str(SPECTER), "--max-pages", "5"])
    assert too_long.returncode == 1
    assert "13 pages, more than the limit of 5" in too_long.stderr
    assert "Traceback" not in too_long.stderr
