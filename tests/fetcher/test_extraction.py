"""extract_pdf on the seven real papers, page by page, and on synthetic edge cases; Extractor's
worker pool and its time limit."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import pymupdf
import pytest

import pdf_factory as factory
from pdf_factory import Heading, Para
from services.fetcher.extraction import Extractor, extract_pdf
from services.fetcher.pages import DropReason, Extraction, PdfProblem, Problem

PDFS = Path(__file__).resolve().parents[1] / "fixtures" / "pdfs"


def pages(numbers: range, state: str) -> dict[int, str]:
    return dict.fromkeys(numbers, state)


def layout(extraction: Extraction) -> dict[int, str]:
    """page -> "kept" (in full) | "part <reasons of the parts dropped on it>" | "<reasons>"."""
    table: dict[int, list[str]] = {}
    for page in extraction.pages:
        table.setdefault(page.number, []).append("part" if page.partial else "kept")
    for part in extraction.dropped:
        table.setdefault(part.number, []).append(part.reason.value)
    return {number: " ".join(parts) for number, parts in sorted(table.items())}


@dataclass(frozen=True)
class Paper:
    file: str
    title: str
    layout: dict[int, str]
    # (page, text) on a page that is kept: the related-work section (or its stand-in), which is
    # dense with citations and was what cut papers short before.
    related_work: tuple[int, str]
    # The last words before the first dropped heading (on the last kept page): kept.
    before_heading: str
    # (page, text) in each dropped part: present on the page, absent from every kept text.
    dropped_text: tuple[tuple[int, str], ...]


# Read off each page's pymupdf text (see tests/fixtures/pdfs/SOURCE.txt).
PAPERS = [
    Paper(
        "1805.02262_LiteratureGraph_N18-3011.pdf",
        "Construction of the Literature Graph in Semantic Scholar",
        {**pages(range(1, 8), "kept"), 8: "references"},
        (7, "Understanding and predicting citations."),
        "among other resources.",
        ((8, "The ai2 system at semeval-2017 task 10"),),
    ),
    Paper(
        "1911.02782_S2ORC_2020.acl-main.447.pdf",
        "S2ORC: The Semantic Scholar Open Research Corpus",
        {**pages(range(1, 9), "kept"), 9: "part acknowledgements references",
         **pages(range(10, 13), "references"), **pages(range(13, 16), "appendix")},
        (8, "7 Related work"),
        "beyond periods of global crisis.",
        ((9, "supported in part by ONR grant N00014-18-1-2193"),
         (9, "Cad: an algorithm for citation-anchors detection"),
         (13, "we distinguish between bibliography entries and inline citations")),
    ),
    Paper(
        "2004.07180_SPECTER_2020.acl-main.207.pdf",
        "SPECTER: Document-level Representation Learning using Citation-informed Transformers",
        {**pages(range(1, 9), "kept"), 9: "part acknowledgements references",
         **pages(range(10, 12), "references"), **pages(range(12, 14), "appendix")},
        (8, "7 Related Work"),
        "would be yet another area to explore in future.",
        ((9, "Russel Reas for setting up the public API"),
         (9, "Estimating position bias without intrusive"),
         (12, "Zero-mean 25-dimensional vectors")),
    ),
    Paper(
        "2007.11088_BERTRankersDistillation_10.1145-3409256.3409838.pdf",
        "Understanding BERT Rankers Under Distillation",
        {**pages(range(1, 4), "kept"), 4: "part acknowledgements references"},
        (1, "2 BACKGROUND"),
        "consume more training data and longer training time.",
        ((4, "IIS-1815528 and The Boeing Company"),
         (4, "Overview of the TREC 2019 deep learning track")),
    ),
    Paper(
        "2301.13298_LongEval_2023.eacl-main.121.pdf",
        # No metadata title: the largest lines of page 1.
        "LONGEVAL: Guidelines for Human Evaluation of Faithfulness in Long-form Summarization",
        {**pages(range(1, 10), "kept"), 10: "part acknowledgements references",
         **pages(range(11, 14), "references"), 14: "references appendix",
         **pages(range(15, 21), "appendix")},
        (9, "4 Related Work"),
        "rather than a fixed amount per annotation.",
        ((10, "nine Upwork freelancers"),
         (10, "A Dataset and Evaluation Platform for Machine-in-the-Loop Story Generation"),
         (14, "(Tibshirani and Efron, 1993) technique described in")),
    ),
    Paper(
        "noarxiv_DeepCT-SIGIR20_10.1145-3397271.3401204.pdf",
        "Context-Aware Term Weighting For First Stage Passage Retrieval",
        {**pages(range(1, 4), "kept"), 4: "part acknowledgements references"},
        (1, "2 RELATED WORK"),
        "towards building new deep and efficient first stage rankers.",
        ((4, "National Science Foundation (NSF) grant IIS-1815528"),
         (4, "Convolutional Neural Networks for Soft-Matching")),
    ),
    Paper(
        "noarxiv_HyperPhraseQueries_10.1145-3409256.3409827.pdf",
        "Optimizing Hyper-Phrase Queries",
        {**pages(range(1, 8), "kept"), 8: "part references"},
        (8, "8 RELATED WORK"),
        "amounting to more than thirty million documents.",
        ((8, "The GDELT Project. https://www.gdeltproject.org"),),
    ),
]


@pytest.fixture(scope="module")
def extracted() -> dict[str, Extraction]:
    return {paper.file: extract_pdf((PDFS / paper.file).read_bytes(), 300) for paper in PAPERS}


def page_words(file: str, number: int) -> str:
    with pymupdf.open(PDFS / file) as doc:
        return " ".join(doc[number - 1].get_text().split())


def test_every_fixture_is_covered() -> None:
    assert sorted(p.name for p in PDFS.glob("*.pdf")) == sorted(p.file for p in PAPERS)


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.file.split("_")[1])
def test_fixture_pages_kept_and_dropped(paper: Paper, extracted) -> None:
    extraction = extracted[paper.file]
    assert extraction.page_count == len(paper.layout)
    assert layout(extraction) == paper.layout
    assert extraction.title == paper.title
    assert extraction.extract_ms > 0
    for part in extraction.dropped:
        assert part.chars > 0 and part.heading, part


@pytest.mark.parametrize("paper", PAPERS, ids=lambda p: p.file.split("_")[1])
def test_fixture_text_is_cut_at_the_heading(paper: Paper, extracted) -> None:
    extraction = extracted[paper.file]
    kept = {page.number: page.text for page in extraction.pages}
    number, words = paper.related_work
    assert words in kept[number], "the related-work page is kept"
    last_kept = extraction.pages[-1]
    assert paper.before_heading in last_kept.text
    if last_kept.partial:  # cut right at the heading
        assert last_kept.text.endswith(paper.before_heading)
    everything_kept = "\n".join(kept.values())
    for number, words in paper.dropped_text:
        if number in kept:  # a dropped part of a partly kept page
            assert words not in kept[number]
        assert words in page_words(paper.file, number)
        assert words not in everything_kept


def test_kept_text_is_clean(extracted) -> None:
    text = extracted["1911.02782_S2ORC_2020.acl-main.447.pdf"].pages[8].text
    assert "  " not in text and "\n\n\n" not in text
    # Joined across a hyphenated line break, and the fi ligature spelled out.
    assert "Full text is augmented with sections" in text
    assert "ﬁ" not in text and "files. We aggregate" in text
    # A numbered heading pymupdf splits in two ("1" | "Introduction") reads as one line.
    specter = extracted["2004.07180_SPECTER_2020.acl-main.207.pdf"]
    assert "\n\n1 Introduction\n\n" in specter.pages[0].text


def test_sample_paper_heading_mid_page() -> None:
    extraction = extract_pdf(factory.sample_paper(), 300)
    assert layout(extraction) == {1: "kept", 2: "kept", 3: "part references",
                                  4: "references appendix"}
    assert extraction.title == factory.SAMPLE_TITLE
    kept = "\n".join(page.text for page in extraction.pages)
    assert factory.SAMPLE_BEFORE_REFS in extraction.pages[2].text
    assert factory.SAMPLE_RELATED in extraction.pages[1].text
    assert factory.SAMPLE_REFERENCE not in kept and factory.SAMPLE_APPENDIX not in kept
    assert [(d.number, d.reason, d.heading) for d in extraction.dropped] == [
        (3, DropReason.REFERENCES, "References"),
        (4, DropReason.REFERENCES, "References"),
        (4, DropReason.APPENDIX, "A Proofs"),
    ]


def test_flowing_paper_is_cut_where_its_references_begin() -> None:
    pdf = factory.sections_pdf([
        ("1 Introduction", factory.filler("the problem", 30)),
        ("2 Related Work", factory.filler("prior work", 40)),
        ("3 Conclusion", factory.filler("the findings", 10) + " The end of the paper."),
        ("References", factory.filler("cited papers", 20)),
        ("Appendix A: Proofs", factory.filler("the proofs", 30)),
    ], title="A Flowing Paper")
    extraction = extract_pdf(pdf, 300)
    assert layout(extraction) == {1: "kept", 2: "part references", 3: "references appendix"}
    assert extraction.pages[-1].text.endswith("The end of the paper.")
    assert extraction.title == "A Flowing Paper"


@pytest.mark.parametrize("metadata_title", ["", "Microsoft Word - draft7.docx", "paper_final.pdf",
                                            "2004.07180v1"])
def test_title_falls_back_to_the_largest_line(metadata_title) -> None:
    extraction = extract_pdf(factory.sample_paper(metadata_title=metadata_title), 300)
    assert extraction.title == factory.SAMPLE_TITLE


def test_inline_mentions_do_not_cut_the_paper() -> None:
    pdf = factory.paper_pdf([
        [Heading("1 Introduction"),
         Para(lines=("We follow the setup of prior work; see the references in [3] for the",
                     "details, as listed in Appendix A of the technical report. Our results",
                     "Appendix B shows for every dataset, and the full list of our",
                     "references.",
                     "Acknowledgements of funding are not a section here either."))],
        [Heading("2 Method"), factory.filler("the method")],
    ])
    extraction = extract_pdf(pdf, 300)
    assert layout(extraction) == {1: "kept", 2: "kept"}


def test_all_caps_and_numbered_headings_in_regular_type() -> None:
    # Neither bold nor larger: all caps, or numbered with a capital, is heading enough.
    pdf = factory.paper_pdf([
        [Heading("1 Introduction"), factory.filler("the problem"),
         Heading("ACKNOWLEDGMENTS", size=10, bold=False), "We thank our funders."],
        [Heading("7. References", size=10, bold=False), "[1] A. Author. 2020. A paper."],
        [Heading("VII. APPENDIX", size=10, bold=False), "Proofs."],
    ])
    extraction = extract_pdf(pdf, 300)
    assert layout(extraction) == {1: "part acknowledgements", 2: "references", 3: "appendix"}
    assert [d.heading for d in extraction.dropped] == ["ACKNOWLEDGMENTS", "7. References",
                                                       "VII. APPENDIX"]


def test_acknowledgements_references_and_explicit_appendix() -> None:
    pdf = factory.paper_pdf([
        [Heading("5 Conclusion"), "We conclude.", Heading("Acknowledgements"),
         "Funded by a grant.", Heading("References"), "[1] A. Author. 2020."],
        ["[2] B. Author. 2021.", Heading("Appendix A: Proofs"), "Lemma 1 holds."],
        [Heading("Supplementary Material"), "More tables."],
    ])
    extraction = extract_pdf(pdf, 300)
    assert layout(extraction) == {1: "part acknowledgements references",
                                  2: "references appendix", 3: "supplementary"}
    assert extraction.pages[0].text.endswith("We conclude.")


def test_blank_and_image_only_pages_are_dropped_as_empty() -> None:
    pdf = factory.with_image_page(factory.with_blank_page(factory.sample_paper(), 1), 2)
    extraction = extract_pdf(pdf, 300)
    assert layout(extraction) == {1: "kept", 2: "empty", 3: "empty", 4: "kept",
                                  5: "part references", 6: "references appendix"}
    assert extraction.page_count == 6


@pytest.mark.parametrize(("make", "problem", "words"), [
    (factory.not_pdf, Problem.NOT_PDF, ["HTML page, not a PDF"]),
    (lambda: b"", Problem.NOT_PDF, ["empty"]),
    (lambda: b"PK\x03\x04 a zip file", Problem.NOT_PDF, ["not a PDF", "%PDF-"]),
    (factory.garbage_pdf, Problem.NOT_PDF, ["cannot open", "download it again"]),
    (factory.encrypted_pdf, Problem.ENCRYPTED, ["password"]),
    (factory.zero_page_pdf, Problem.UNREADABLE, ["no pages"]),
    (factory.truncated_pdf, Problem.UNREADABLE, ["damaged", "4 pages", "download it again"]),
    (factory.scanned_pdf, Problem.NO_TEXT, ["text layer", "2 pages", "run OCR first"]),
    (lambda: factory.paper_pdf([[Heading("References"), "[1] A. Author. 2020."]]),
     Problem.NO_TEXT, ["references", "page 1"]),
])
def test_bad_inputs_name_their_problem(make, problem, words) -> None:
    with pytest.raises(PdfProblem) as raised:
        extract_pdf(make(), 300)
    assert raised.value.problem == problem
    for word in words:
        assert word in raised.value.message


def test_zero_page_factory_pdf_opens_with_no_pages() -> None:
    with pymupdf.open(stream=factory.zero_page_pdf(), filetype="pdf") as doc:
        assert doc.page_count == 0 and not doc.is_repaired


def test_max_pages() -> None:
    pdf = factory.pages_pdf(5)
    assert extract_pdf(pdf, 5).page_count == 5
    with pytest.raises(PdfProblem) as raised:
        extract_pdf(pdf, 4)
    assert raised.value.problem == Problem.TOO_MANY_PAGES
    assert "5 pages" in raised.value.message and "limit of 4" in raised.value.message


@pytest.fixture(scope="module")
def extractor():
    pool = Extractor(timeout_s=1.0, workers=2, max_pages=300)
    yield pool
    pool.close()


async def test_extractor_matches_extract_pdf(extractor) -> None:
    data = (PDFS / PAPERS[1].file).read_bytes()
    pooled = await extractor.extract(data)
    direct = extract_pdf(data, 300)
    assert pooled.pages == direct.pages and pooled.dropped == direct.dropped
    assert pooled.title == direct.title and pooled.extract_ms > 0


async def test_extractor_passes_problems_back(extractor) -> None:
    with pytest.raises(PdfProblem) as raised:
        await extractor.extract(factory.encrypted_pdf())
    assert raised.value.problem == Problem.ENCRYPTED and "password" in raised.value.message


async def test_extractor_kills_a_slow_pdf_and_goes_on(extractor) -> None:
    # slow_pdf takes ~18 s; the worker is killed at 1 s and the pool replaces it.
    started = time.monotonic()
    with pytest.raises(PdfProblem) as raised:
        await extractor.extract(factory.slow_pdf())
    assert time.monotonic() - started < 10
    assert raised.value.problem == Problem.UNREADABLE
    assert raised.value.message == "extraction took longer than 1 s; the PDF may be malformed"
    for _ in range(3):  # whichever worker takes it, the old or the new
        extraction = await extractor.extract(factory.sample_paper())
        assert layout(extraction)[3] == "part references"


async def test_extractor_time_limit_on_a_real_paper() -> None:
    pool = Extractor(timeout_s=0.001, workers=1, max_pages=300)
    try:
        with pytest.raises(PdfProblem) as raised:
            await pool.extract((PDFS / "2301.13298_LongEval_2023.eacl-main.121.pdf").read_bytes())
        assert raised.value.problem == Problem.UNREADABLE
        assert "longer than 0.001 s" in raised.value.message
    finally:
        pool.close()


async def test_extractor_page_limit() -> None:
    pool = Extractor(timeout_s=30, workers=1, max_pages=3)
    try:
        with pytest.raises(PdfProblem) as raised:
            await pool.extract(factory.pages_pdf(4))
        assert raised.value.problem == Problem.TOO_MANY_PAGES
    finally:
        pool.close()


async def test_cancelling_an_extraction_frees_its_worker() -> None:
    # A caller that gives up (a gRPC deadline) must not leave its worker busy for the full limit.
    pool = Extractor(timeout_s=60, workers=1, max_pages=300)
    try:
        assert (await pool.extract(factory.pages_pdf(1))).page_count == 1  # the worker is up
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(pool.extract(factory.slow_pdf()), 0.5)
        started = time.monotonic()
        assert (await pool.extract(factory.sample_paper())).page_count == 4
        assert time.monotonic() - started < 10, "the slow PDF still held the only worker"
    finally:
        pool.close()
