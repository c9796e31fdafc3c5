"""Synthetic PDFs for the fetcher tests, built with pymupdf: papers laid out line by line (so a
test decides where a heading falls and how a line starts), and the inputs extraction must refuse.

Body text is Times-Roman 10 pt, headings Times-Bold 12 pt unless a test says otherwise.
"""

from __future__ import annotations

import textwrap
import zlib
from dataclasses import dataclass

import pymupdf

PAGE_WIDTH, PAGE_HEIGHT = 612, 792  # US Letter
MARGIN = 72
BODY_PT = 10.0
WRAP_CHARS = 95  # about a 468 pt line of 10 pt Times


@dataclass(frozen=True)
class Heading:
    text: str
    size: float = 12.0
    bold: bool = True


@dataclass(frozen=True)
class Para:
    """A paragraph: `text` wrapped to the page width, or `lines` exactly as given."""

    text: str = ""
    lines: tuple[str, ...] = ()
    bold: bool = False
    size: float = BODY_PT

    def printed_lines(self) -> list[str]:
        return list(self.lines) or textwrap.wrap(self.text, WRAP_CHARS)


Item = Heading | Para | str  # a str is a Para of that text


def filler(topic: str, sentences: int = 6) -> str:
    """Running text about `topic`, for pages that need words but no particular ones."""
    return " ".join(
        f"Sentence {i} of the part on {topic} describes the method and its evaluation in "
        "plain words."
        for i in range(1, sentences + 1)
    )


def paper_pdf(pages: list[list[Item]], metadata_title: str = "") -> bytes:
    """A PDF with one page per entry of `pages`, each item set top to bottom."""
    doc = pymupdf.open()
    for items in pages:
        page = doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
        y = MARGIN
        for item in items:
            for text, size, bold, advance in _printed(item):
                y += advance
                if y > PAGE_HEIGHT - MARGIN:
                    raise ValueError(f"page overflows at {text!r}; put less on it")
                _print(page, y, text, size, bold)
    return _save(doc, metadata_title)


def sections_pdf(sections: list[tuple[str, str]], title: str = "",
                 metadata_title: str = "") -> bytes:
    """A paper of (heading, body text) sections that flows from page to page, as LaTeX sets it:
    a heading lands wherever the section before it ends, often mid-page."""
    items: list[Item] = [Heading(title, size=16)] if title else []
    for heading, text in sections:
        items += [Heading(heading), Para(text)]
    doc = pymupdf.open()
    page, y = None, PAGE_HEIGHT
    for item in items:
        for text, size, bold, advance in _printed(item):
            y += advance
            if page is None or y > PAGE_HEIGHT - MARGIN:
                page = doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
                y = MARGIN + size * 1.25
            _print(page, y, text, size, bold)
    return _save(doc, metadata_title)


def _printed(item: Item) -> list[tuple[str, float, bool, float]]:
    """(text, size, bold, how far below the previous line) for each line of `item`."""
    if isinstance(item, str):
        item = Para(item)
    if isinstance(item, Heading):
        # Space above a heading and a gap after it, as in a paper.
        return [(item.text, item.size, item.bold, item.size * 2.05)]
    lines = item.printed_lines()
    advance = [item.size * 1.25] * len(lines)
    if advance:
        advance[0] += item.size * 0.6
    return [(text, item.size, item.bold, step) for text, step in zip(lines, advance)]


def _print(page: pymupdf.Page, y: float, text: str, size: float, bold: bool) -> None:
    page.insert_text((MARGIN, y), text, fontsize=size,
                     fontname="Times-Bold" if bold else "Times-Roman")


def _save(doc: pymupdf.Document, metadata_title: str) -> bytes:
    doc.set_metadata({"title": metadata_title})
    data = doc.tobytes(garbage=3, deflate=True)
    doc.close()
    return data


# A small paper with every kind of part, and strings tests look for in each.
SAMPLE_TITLE = "Weaving Citations Into Related Work"
SAMPLE_INTRO = "We study how related work sections are written from a corpus of papers."
SAMPLE_RELATED = (
    "Prior work on citation recommendation [1, 2, 3] and summarization [4, 5] uses citation "
    "graphs [6, 7]; retrieval-augmented generation [8, 9, 10, 11] grounds text in sources [12]."
)
SAMPLE_BEFORE_REFS = "In conclusion, the method keeps every related work page of a paper."
SAMPLE_REFERENCE = "Ada Lovelace. 1843. Notes on the analytical engine. Scientific Memoirs 3."
SAMPLE_APPENDIX = "The proofs of the two lemmas follow here in full detail."


def sample_paper(metadata_title: str = SAMPLE_TITLE) -> bytes:
    """Four pages: introduction; a citation-dense related work page; conclusion with the
    references heading mid-page; references continued, then a bold "A  Proofs" appendix."""
    return paper_pdf(
        [
            [Heading(SAMPLE_TITLE, size=16), Heading("1 Introduction"), SAMPLE_INTRO,
             filler("motivation")],
            [Heading("2 Related Work"), " ".join([SAMPLE_RELATED] * 3), filler("prior systems")],
            [Heading("3 Conclusion"), filler("results"), SAMPLE_BEFORE_REFS,
             Heading("References"), SAMPLE_REFERENCE,
             "Charles Babbage. 1864. Passages from the life of a philosopher. Longman."],
            ["Alan Turing. 1950. Computing machinery and intelligence. Mind 59.",
             Heading("A Proofs"), SAMPLE_APPENDIX],
        ],
        metadata_title=metadata_title,
    )


def pages_pdf(count: int, words_per_page: int = 60) -> bytes:
    """`count` pages of plain running text, no back matter."""
    return paper_pdf([[Para(filler(f"page {n}", max(1, words_per_page // 15)))]
                      for n in range(1, count + 1)])


def encrypted_pdf(user_password: str = "reader", owner_password: str = "owner") -> bytes:
    """The sample paper, AES-256 encrypted: it cannot be opened without the user password."""
    doc = pymupdf.open(stream=sample_paper(), filetype="pdf")
    data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256,
                       user_pw=user_password, owner_pw=owner_password)
    doc.close()
    return data


def scanned_pdf(pages: int = 2) -> bytes:
    """Pages that are only a picture of text, as a scanner makes them: no text layer at all."""
    source = pymupdf.open(stream=pages_pdf(pages), filetype="pdf")
    doc = pymupdf.open()
    for page in source:
        picture = page.get_pixmap(dpi=50)
        scan = doc.new_page(width=page.rect.width, height=page.rect.height)
        scan.insert_image(scan.rect, pixmap=picture)
    data = doc.tobytes(garbage=3, deflate=True)
    doc.close()
    source.close()
    return data


def with_blank_page(pdf: bytes, after: int) -> bytes:
    """`pdf` with an empty page inserted after page `after` (1-based; 0 puts it first)."""
    doc = pymupdf.open(stream=pdf, filetype="pdf")
    doc.new_page(pno=after, width=PAGE_WIDTH, height=PAGE_HEIGHT)
    data = doc.tobytes()
    doc.close()
    return data


def with_image_page(pdf: bytes, after: int) -> bytes:
    """`pdf` with an image-only page (a scanned figure) inserted after page `after`."""
    picture = pymupdf.open(stream=scanned_pdf(1), filetype="pdf")
    doc = pymupdf.open(stream=pdf, filetype="pdf")
    doc.insert_pdf(picture, start_at=after)
    data = doc.tobytes()
    doc.close()
    picture.close()
    return data


def not_pdf() -> bytes:
    return b"<!DOCTYPE html><html><head><title>Just a moment...</title></head></html>\n"


def truncated_pdf() -> bytes:
    """The sample paper cut off where its first content stream begins, as a broken download
    is: MuPDF repairs its way to the four pages but finds nothing on them."""
    data = sample_paper()
    return data[: data.index(b"stream")]


def garbage_pdf() -> bytes:
    """A PDF header followed by bytes with no PDF object in them: MuPDF cannot open it."""
    return b"%PDF-1.7\n" + bytes(range(256)) * 4


def zero_page_pdf() -> bytes:
    """A well-formed PDF whose page tree is empty (pymupdf refuses to save one)."""
    return _hand_written_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count 0 /Kids [] >>",
    ])


def slow_pdf(pages: int = 300, glyphs_per_page: int = 100_000) -> bytes:
    """A small file that takes MuPDF ~18 s to read (~0.06 s a page): every page shares one
    content stream of `glyphs_per_page` one-letter text runs, which compresses to a few kB."""
    content = zlib.compress(
        b"BT /F1 2 Tf 72 72 Td " + b"(x) Tj 0.004 0.006 Td " * glyphs_per_page + b"ET"
    )
    page = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 4 0 R >> >> /Contents 3 0 R >>")
    kids = b" ".join(b"%d 0 R" % (5 + n) for n in range(pages))
    return _hand_written_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [%s] >>" % (pages, kids),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        *[page] * pages,
    ])


def _hand_written_pdf(objects: list[bytes]) -> bytes:
    """Objects 1..n (object 1 the catalog), a cross-reference table and a trailer."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)
