"""The web page in headless Chromium (Debian's /usr/bin/chromium driven by playwright-core from
npm) against the gateway and every service as real processes: an abstract in, the references
out with every citation linked, copy, BibTeX; a PDF in; a clear message for a file that is not a
PDF. The browser steps are in web_page.mjs; this test runs it against the shared gateway stack."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gateway.gateway_stack import PDFS, QUERY

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CHROMIUM = Path("/usr/bin/chromium")
PLAYWRIGHT = HERE / "node_modules" / "playwright-core"
# The screenshot in the docs is rewritten only when asked (CITEWEAVE_UPDATE_SCREENSHOT=1), so a
# test run does not leave a changed binary in the working tree.
DOCS_SCREENSHOT = REPO / "docs" / "img" / "web-page.png"
PDF = PDFS / "2301.13298_LongEval_2023.eacl-main.121.pdf"


def _missing() -> str | None:
    if not CHROMIUM.is_file():
        return f"needs Chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    if shutil.which("node") is None:
        return "needs Node.js (node) to drive the browser"
    if not PLAYWRIGHT.is_dir():
        return "needs playwright-core: npm ci --prefix tests/browser"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def test_web_page(gateway_stack, tmp_path):
    screenshot = (DOCS_SCREENSHOT if os.environ.get("CITEWEAVE_UPDATE_SCREENSHOT") == "1"
                  else tmp_path / "web-page.png")
    not_a_pdf = tmp_path / "notes.txt"
    not_a_pdf.write_text("Notes for the paper, not the paper.\n")
    run = subprocess.run(
        ["node", str(HERE / "web_page.mjs"), "--url", gateway_stack.http_url, "--abstract", QUERY,
         "--pdf", str(PDF), "--not-pdf", str(not_a_pdf), "--screenshot", str(screenshot),
         "--chromium", str(CHROMIUM)],
        cwd=HERE, capture_output=True, text=True, timeout=400,
    )
    assert run.returncode == 0, f"{run.stderr}\n{run.stdout}\n{gateway_stack.log('gateway')[-3000:]}"
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["steps"][-1] == "a file that is not a PDF"
    assert seen["references"] >= 3 and seen["bibtexEntries"] == seen["references"]
    assert seen["citationLinks"] >= seen["references"] and seen["pdfCitationLinks"] > 0
    percents = seen["abstractRun"]["percents"]
    assert percents == sorted(percents) and percents[-1] == 100 and len(set(percents)) >= 5
    assert screenshot.stat().st_size > 20_000
