"""PDF bytes -> kept page text, dropped parts and title (pymupdf + filtering.py), and the worker
pool that runs it under a hard time limit.

`extract_pdf` runs in the calling process; the service and the CLI go through `Extractor`, which
runs it in spawned worker processes: MuPDF can loop or crash on a hostile file, and only a
process can be killed. Spawn, not fork: the service runs grpc.aio, whose threads do not survive
a fork.

Text comes from one get_text("dict") per page (spans carry the font size and weight the heading
rule needs); lines are joined into paragraphs and dehyphenated by filtering.page_text.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import multiprocessing
import re
import time

import pymupdf
from pebble import ProcessExpired, ProcessPool

from services.fetcher.filtering import Line, filter_pages
from services.fetcher.pages import Extraction, PdfProblem, Problem

# No TEXT_PRESERVE_IMAGES: image data is the slow part of "dict" and is never used. No
# TEXT_PRESERVE_LIGATURES: "ﬁ" becomes "fi", which is what embedding and search want.
TEXT_FLAGS = pymupdf.TEXT_MEDIABOX_CLIP | pymupdf.TEXT_CID_FOR_UNKNOWN_UNICODE
BOLD_SPAN = 16  # span flag
_BOLD_FONT = re.compile(r"bold|medi", re.IGNORECASE)  # "-Bold", "SemiBold", Nimbus "-Medi"
_LETTER = re.compile(r"[^\W\d_]")
_FILE_NAME = re.compile(r"[\w.\-/\\]+")
_FILE_EXT = re.compile(r"\.(?:pdf|docx?|tex|dvi|ps|rtf|odt)$", re.IGNORECASE)
TITLE_MAX_LINES = 4


def extract_pdf(pdf: bytes, max_pages: int) -> Extraction:
    """Kept and dropped parts of every page of `pdf`. Raises PdfProblem."""
    started = time.perf_counter()
    _check_header(pdf)
    try:
        doc = pymupdf.open(stream=pdf, filetype="pdf")
    except Exception:  # FileDataError, RuntimeError, ...: MuPDF found no PDF structure at all
        raise PdfProblem(
            Problem.NOT_PDF,
            "the file starts like a PDF but MuPDF cannot open it as one; it may be cut off or "
            "damaged: download it again",
        ) from None
    with doc:
        if doc.needs_pass:
            raise PdfProblem(
                Problem.ENCRYPTED,
                "the PDF is password-protected; save an unprotected copy (or get one without a "
                "password) and try again",
            )
        if doc.page_count == 0:
            raise PdfProblem(
                Problem.UNREADABLE,
                "the PDF has no pages; the file is damaged or empty: download it again",
            )
        if doc.page_count > max_pages:
            raise PdfProblem(
                Problem.TOO_MANY_PAGES,
                f"the PDF has {doc.page_count} pages, more than the limit of {max_pages}; "
                "split it or raise the page limit",
            )
        upright: list[Line] = []  # page 1's horizontal lines, for the title
        pages = [_page_lines(page, upright if page.number == 0 else None) for page in doc]
        metadata_title = (doc.metadata or {}).get("title") or ""
        page_count = doc.page_count
        repaired = doc.is_repaired
    if not any(pages) and repaired:
        raise PdfProblem(
            Problem.UNREADABLE,
            f"the PDF is damaged (cut off or corrupted) and none of its {page_count} pages could "
            "be read; download it again",
        )
    if not any(pages):
        raise PdfProblem(
            Problem.NO_TEXT,
            f"none of the PDF's {page_count} pages has a text layer; it looks like a scan: run "
            "OCR first (for example ocrmypdf) and try again",
        )
    kept, dropped = filter_pages(pages)
    if not kept:
        first = dropped[0]
        raise PdfProblem(
            Problem.NO_TEXT,
            f"no text is left after dropping the {first.reason.value} that start on page "
            f"{first.number} (\"{first.heading}\"); the PDF seems to hold only back matter",
        )
    return Extraction(
        pages=kept,
        dropped=dropped,
        page_count=page_count,
        title=_title(metadata_title, upright),
        extract_ms=(time.perf_counter() - started) * 1000,
    )


def _check_header(data: bytes) -> None:
    if b"%PDF-" in data[:1024]:
        return
    head = data[:1024].lstrip().lower()
    if not data:
        message = "the file is empty, not a PDF"
    elif head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        message = ("the file is an HTML page, not a PDF (a login, error or landing page?); "
                   "fetch the PDF link itself")
    else:
        message = "the file is not a PDF: it does not start with %PDF- in its first 1024 bytes"
    raise PdfProblem(Problem.NOT_PDF, message)


def _has_letters(text: str) -> bool:
    return _LETTER.search(text) is not None


@functools.lru_cache(maxsize=1024)
def _bold_font(font: str) -> bool:
    return _BOLD_FONT.search(font) is not None


def _is_bold(span: dict) -> bool:
    return bool(span["flags"] & BOLD_SPAN) or _bold_font(span["font"])


def _page_lines(page: pymupdf.Page, upright: list[Line] | None = None) -> list[Line]:
    """The page's visual lines in reading order. pymupdf cuts a printed line wherever a wide gap
    is ("1" | "Introduction", justified words): pieces of one block that overlap vertically and
    follow left to right are joined again. Horizontal lines also go to `upright` when given."""
    try:
        blocks = page.get_text("dict", flags=TEXT_FLAGS)["blocks"]
    except Exception:  # a broken content stream: the page reads as empty, the rest still counts
        return []
    lines: list[Line] = []
    for number, block in enumerate(blocks):
        pieces: list[tuple[list[str], list[dict], tuple, bool]] = []  # texts, spans, bbox, upright
        for raw in block.get("lines", ()):
            spans = [s for s in raw["spans"] if s["text"] and not s["text"].isspace()]
            if not spans:
                continue
            text = "".join(s["text"] for s in raw["spans"])
            box = raw["bbox"]
            if pieces and _same_line(pieces[-1][2], box):
                texts, styled, _, horizontal = pieces[-1]
                pieces[-1] = (texts + [text], styled + spans, box, horizontal)
            else:
                # An arXiv side stamp is a vertical line in 20 pt: never the title.
                pieces.append(([text], spans, box, raw["dir"][0] > 0.99))
        for texts, spans, _, horizontal in pieces:
            line = _line(" ".join(" ".join(texts).split()), spans, number)
            lines.append(line)
            if upright is not None and horizontal:
                upright.append(line)
    return lines


def _same_line(previous: tuple, box: tuple) -> bool:
    overlap = min(previous[3], box[3]) - max(previous[1], box[1])
    height = min(previous[3] - previous[1], box[3] - box[1])
    return box[0] >= previous[2] - 1 and overlap > 0.5 * height


def _line(text: str, spans: list[dict], block: int) -> Line:
    """`spans`: the line's spans that print something."""
    # Bold when every span with letters is (a bold heading's "1" or "." may be set otherwise).
    bold = not any(not _is_bold(s) and _has_letters(s["text"]) for s in spans)
    if bold and not _has_letters(text):
        bold = all(_is_bold(s) for s in spans)
    lead = ""
    if not bold:
        # The bold words a line opens with, and the punctuation after them whatever its font
        # (DeepCT sets the "." of its bold "Acknowledgments." in italic).
        opening = []
        for s in spans:
            if not _is_bold(s) and (not opening or _has_letters(s["text"])):
                break
            opening.append(s["text"])
        lead = " ".join("".join(opening).split())
    return Line(text=text, size=max(s["size"] for s in spans), bold=bold, lead=lead, block=block)


def _title(metadata_title: str, upright: list[Line]) -> str:
    """The metadata title when it is a real one, else page 1's largest-font lines."""
    title = " ".join(metadata_title.split())
    lowered = title.lower()
    generic = (
        len(title) < 4
        or lowered.startswith(("microsoft word - ", "untitled"))
        or _FILE_EXT.search(title) is not None
        or (_FILE_NAME.fullmatch(title) is not None and re.search(r"[\d_./\\]", title) is not None)
    )
    if not generic:
        return title
    candidates = [line for line in upright if sum(c.isalpha() for c in line.text) >= 2]
    if not candidates:
        return ""
    largest = max(line.size for line in candidates)
    run: list[str] = []
    for line in candidates:
        if line.size >= largest - 0.5:
            run.append(line.text)
            if len(run) == TITLE_MAX_LINES:
                break
        elif run:
            break
    return " ".join(run)


def _start_worker() -> None:
    # MuPDF prints every repair of a damaged file to stderr; the PdfProblem already says it.
    pymupdf.TOOLS.mupdf_display_errors(False)


def _ready() -> bool:
    return True


class Extractor:
    """`extract_pdf` in a pool of spawned worker processes, each PDF with a hard time limit."""

    def __init__(self, *, timeout_s: float = 30.0, workers: int = 2, max_pages: int = 300):
        self.timeout_s = timeout_s
        self.max_pages = max_pages
        self._pool = ProcessPool(
            max_workers=workers,
            # A worker is replaced now and then, so what MuPDF's caches hold is given back.
            max_tasks=200,
            initializer=_start_worker,
            context=multiprocessing.get_context("spawn"),
        )
        # Starts the workers now: each spawn imports pymupdf (~1 s), which the first PDF would
        # otherwise wait for.
        self._pool.schedule(_ready)

    async def extract(self, pdf: bytes) -> Extraction:
        """Raises PdfProblem; a PDF that takes longer than timeout_s has its worker killed (the
        pool starts a new one) and is UNREADABLE. Cancelling the call also ends its worker.
        extract_ms is the worker's time on the PDF, without the wait for a free worker."""
        _check_header(pdf)  # an HTML error page need not travel to a worker
        future = self._pool.schedule(
            extract_pdf, args=(pdf, self.max_pages), timeout=self.timeout_s
        )
        try:
            result = await asyncio.wrap_future(future)
        except concurrent.futures.TimeoutError:
            raise PdfProblem(
                Problem.UNREADABLE,
                f"extraction took longer than {self.timeout_s:g} s; the PDF may be malformed",
            ) from None
        except ProcessExpired as exc:
            raise PdfProblem(
                Problem.UNREADABLE,
                f"the extraction worker died on this PDF (exit code {exc.exitcode}); the PDF "
                "may be malformed",
            ) from None
        return result

    def close(self) -> None:
        """Stops the workers, ending any extraction under way."""
        self._pool.stop()
        self._pool.join()
