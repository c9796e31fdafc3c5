"""Which parts of a paper's pages to keep: everything up to the references, appendix,
acknowledgements or supplementary material, found by their section headings anywhere on a page.

Pure functions over per-page lines (extraction.py builds the lines from pymupdf), so every rule
can be tested without a PDF.

The rule. A line starts a dropped part when
  1. its whole text is a back-matter heading: optional numbering ("7", "7.", "VII.", "A."), then
     References / Bibliography / Literature Cited / Works Cited, Acknowledg(e)ment(s),
     Appendix / Appendices / "Appendix A: title", Supplementary Material(s) / Supplemental
     Material / Supplementary Information, and an optional "." or ":"; case-insensitive, and
  2. it looks like a heading: not smaller than the page's body text, and bold, or larger than
     the body text, or all caps / numbered with the keyword capitalized. A line "references."
     that wraps out of running text matches 1 but not 2; "see the references in [3]" or
     "Appendix B shows ..." match neither.
  Also a run-in heading: a line that opens with bold "Acknowledgments." and goes on in regular
  type (ACM's \\paragraph style), and, once inside the references, a bold line of a single
  capital letter and a title ("A  Implementation details"): ACL appendices carry no "Appendix".
Text before the heading on that page is kept (the page is partial); from the heading on, every
later page is dropped. A later heading only switches the reason (references -> appendix);
content never resumes, since whatever follows the references is back matter.
Citation density plays no part: a related-work page full of citations is kept.
A page without text is EMPTY before any dropped part and belongs to the part after one (a
blank page in the appendix is appendix, with 0 characters).

Calibrated on the seven fixture papers (tests/fixtures/pdfs, ACL/NAACL/EACL 2018-2023 and ACM
ICTIR/SIGIR 2020). What they showed:
- Every back-matter heading is set bold (NimbusRomNo9L-Medi in ACL, LinLibertineTB in ACM, span
  flag 16 set in both) and ACL's are 12 pt against 10.9 pt body text; ACM's are all caps
  ("ACKNOWLEDGMENTS", "REFERENCES") at 10.9 pt against 9 pt body.
- pymupdf splits a numbered heading into two lines on one baseline ("1" | "Introduction",
  "A" | "Background & Terminology"); extraction.py joins lines that share a baseline, which also
  joins the word-by-word pieces of justified lines.
- Acknowledgements often sit mid-page with the references right after them (S2ORC p9, SPECTER
  p9, LongEval p10, both ACM 4-pagers p4), so one page can hold a kept part and two dropped ones.
- DeepCT's "Acknowledgments." is a run-in bold heading at 9.1 pt, the size of its body text.
- The ACL appendices start with bold 12 pt "A" + title after the references (S2ORC p13,
  LongEval p14 under a bold "Appendix", SPECTER p12 "A Appendix A - Baseline Details").
- ACL reference lists are 10 pt under 10.9 pt body, so a references page's median size is the
  reference text; no reference entry is bold in any fixture.
- The per-page reading order of pymupdf (content-stream order) is column order in all seven,
  so "before the heading" is correct for two-column pages. pdfTeX writes the footer's page
  number first, though ("4981" before "A Background & Terminology", S2ORC p13): a part with no
  word in it goes with the part after it, so such a page is not "kept in part".
- HyperPhraseQueries p1 has a screenshot whose 4.9 pt labels read "2 references": hence "not
  smaller than the body text" and "capitalized" for the weak cues. The same paper's "2 PROBLEM
  DEFINITION" style shows that ACM numbers its all-caps headings on the same line.
- pymupdf's TEXT_DEHYPHENATE does not change "dict" output, so page_text joins "aug-" +
  "mented" itself (keeping the hyphen of "state-of-the-" + "art").
Result: each paper's first dropped page is the one where its references (or acknowledgements)
begin, and its appendix is recognised: LiteratureGraph keeps 1-7, drops 8 (references);
S2ORC keeps 1-8 and part of 9 (acknowledgements, references), drops 10-12 (references) and
13-15 (appendix); SPECTER keeps 1-8 and part of 9, drops 10-11 and 12-13 (appendix); LongEval
keeps 1-9 and part of 10, drops 11-14 (references) and from mid-14 to 20 (appendix); the ACM
papers keep all but the end of their last page (BERTRankers p4 and DeepCT p4: acknowledgements
and references; HyperPhraseQueries p8: references).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.fetcher.pages import DropReason, DroppedPart, KeptPage


@dataclass(frozen=True, slots=True)
class Line:
    """One visual line of a page, in reading order."""

    text: str  # whitespace already collapsed
    size: float = 10.0  # largest font size on the line, pt
    bold: bool = False  # every span with letters is bold
    lead: str = ""  # the bold text a line opens with when it goes on in regular type
    block: int = 0  # pymupdf block (about a paragraph): a new block is a paragraph break


# A size counts as larger than the body text only past this margin: pdfTeX sets 10.9 and 11.0 pt
# side by side in one paragraph.
SIZE_MARGIN_PT = 0.5
MAX_TITLE_CHARS = 80

_NUMBER = r"(?P<num>(?:\d{1,2}(?:\.\d{1,2})*|[IVXL]{1,6}|[A-Z])[.)]?\s+)?"
_TAIL = rf"(?:\s*[:.\-–—]\s*\S.{{0,{MAX_TITLE_CHARS}}})?"
_KINDS: list[tuple[DropReason, str]] = [
    (DropReason.REFERENCES, r"references|bibliography|literature\s+cited|works\s+cited"),
    (DropReason.ACKNOWLEDGEMENTS, r"acknowledge?ments?(?:\s+and\s+disclosure\s+of\s+funding)?"),
    (DropReason.APPENDIX, rf"appendices|appendix(?:\s+[A-Z0-9]{{1,2}}(?:\.\d{{1,2}})*)?{_TAIL}"),
    (DropReason.SUPPLEMENTARY,
     rf"supplementa(?:ry|l)\s+(?:materials?|information){_TAIL}"),
]
_HEADING = re.compile(
    rf"{_NUMBER}(?:{'|'.join(f'(?P<{r.name}>{p})' for r, p in _KINDS)})\s*[.:]?",
    re.IGNORECASE,
)
# "APPENDIX A PROOFS": all-caps appendix headings carry a title without a separator.
_CAPS_APPENDIX = re.compile(r"(?:[A-Z0-9.]{1,4}\s+)?APPENDIX\s+[A-Z0-9]{1,2}\s+[A-Z][^a-z]{0,80}")
# After the references: "A  Implementation details", "B. Proofs" (not "A model is ...").
_LETTER_SECTION = re.compile(r"[A-Z][.:]?\s+[A-Z0-9(\"'“][^\n]{0,118}")
# A kept part made only of page numbers, running heads' digits and punctuation is not text.
_WORD = re.compile(r"[^\W\d_]{2,}")


@dataclass(frozen=True, slots=True)
class Heading:
    reason: DropReason
    text: str


def body_size(lines: list[Line]) -> float:
    """The font size most of the page's characters are set in (median weighted by characters)."""
    sized = sorted((line.size, len(line.text)) for line in lines if line.text)
    total = sum(n for _, n in sized)
    seen = 0
    for size, n in sized:
        seen += n
        if seen * 2 >= total:
            return size
    return 0.0


def match_heading(text: str) -> tuple[DropReason, bool, bool] | None:
    """(reason, numbered, capitalized) when the whole text is a back-matter heading."""
    m = _HEADING.fullmatch(text)
    if m is None:
        if _CAPS_APPENDIX.fullmatch(text):
            return DropReason.APPENDIX, True, True
        return None
    reason = next(r for r, _ in _KINDS if m.group(r.name) is not None)
    return reason, m.group("num") is not None, m.group(reason.name)[0].isupper()


def _all_caps(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 4 and all(c.isupper() for c in letters)


def detect_heading(line: Line, body: float, in_references: bool = False) -> Heading | None:
    """The dropped part `line` starts, if it is one of the headings described above."""
    found = match_heading(line.text)
    # Headings are never set smaller than the body text; figure labels are ("2 references" in a
    # screenshot of Wikidata, HyperPhraseQueries p1).
    if found is not None and line.size >= body - SIZE_MARGIN_PT:
        reason, numbered, capitalized = found
        styled = line.bold or line.size > body + SIZE_MARGIN_PT
        if styled or (capitalized and (numbered or _all_caps(line.text))):
            return Heading(reason, line.text)
    # Run-in: "Acknowledgments. This work was ..." with only the first words bold.
    if line.lead and line.lead[-1] in ".:—" and (found := match_heading(line.lead)):
        return Heading(found[0], line.lead)
    if in_references and line.bold and _LETTER_SECTION.fullmatch(line.text):
        return Heading(DropReason.APPENDIX, line.text)
    return None


def page_text(lines: list[Line]) -> str:
    """Lines of one paragraph joined by spaces, paragraphs (blocks) by a blank line; a word
    hyphenated across a line, column or block break is joined back ("aug-" + "mented")."""
    paragraphs: list[str] = []
    current = ""
    block = None
    for line in lines:
        if not line.text:
            continue
        if current and _hyphenated(current, line.text):
            # "aug-" + "mented", but "state-of-the-" + "art" keeps its hyphen.
            word = current.rsplit(" ", 1)[-1]
            current = (current if "-" in word[:-1] else current[:-1]) + line.text
        elif line.block != block and current:
            paragraphs.append(current)
            current = line.text
        else:
            current = f"{current} {line.text}" if current else line.text
        block = line.block
    if current:
        paragraphs.append(current)
    return "\n\n".join(paragraphs)


def _hyphenated(text: str, following: str) -> bool:
    return text[-1] == "-" and len(text) > 1 and text[-2].isalpha() and following[0].islower()


def _fold_page_numbers(
    segments: list[tuple[Heading | None, list[Line]]],
) -> list[tuple[Heading | None, list[Line]]]:
    """A segment with no words before a heading is a page number or running head that the
    content stream put first: it goes with the part the heading opens, so the page is not kept
    "in part" for the sake of "4981"."""
    folded: list[tuple[Heading | None, list[Line]]] = []
    carried: list[Line] = []
    for index, (heading, lines) in enumerate(segments):
        lines = carried + lines
        carried = []
        last = index == len(segments) - 1
        if not last and not _WORD.search(" ".join(line.text for line in lines)):
            carried = lines
            continue
        folded.append((heading, lines))
    return folded


def filter_pages(pages: list[list[Line]]) -> tuple[list[KeptPage], list[DroppedPart]]:
    """Kept pages and dropped parts of a document given as per-page lines (page 1 first)."""
    kept: list[KeptPage] = []
    dropped: list[DroppedPart] = []
    part: Heading | None = None  # the dropped part under way
    for number, lines in enumerate(pages, start=1):
        lines = [line for line in lines if line.text]
        if not lines:
            # A blank page inside back matter belongs to it; elsewhere it is just empty.
            if part is None:
                dropped.append(DroppedPart(number, DropReason.EMPTY, "", 0))
            else:
                dropped.append(DroppedPart(number, part.reason, part.text, 0))
            continue
        body = body_size(lines)
        # Segments of this page: (heading that opened it or None for kept text, its lines).
        segments: list[tuple[Heading | None, list[Line]]] = [(part, [])]
        for line in lines:
            heading = detect_heading(line, body, in_references=part is not None
                                     and part.reason == DropReason.REFERENCES)
            if heading is not None and (part is None or heading.reason != part.reason):
                part = heading
                segments.append((part, []))
            segments[-1][1].append(line)
        for heading, part_lines in _fold_page_numbers(segments):
            if not part_lines:
                continue
            text = page_text(part_lines)
            if heading is None:
                kept.append(KeptPage(number, text, partial=len(segments) > 1))
            else:
                dropped.append(DroppedPart(number, heading.reason, heading.text, len(text)))
    return kept, dropped
