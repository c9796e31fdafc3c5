"""The page filter on hand-made lines: which lines are back-matter headings, and what a document's
pages become around them."""

from __future__ import annotations

import pytest

from services.fetcher.filtering import Line, body_size, detect_heading, filter_pages, page_text
from services.fetcher.pages import DropReason

BODY = 10.0


def body(text: str, block: int = 0) -> Line:
    return Line(text=text, size=BODY, block=block)


def heading(text: str, size: float = 12.0, bold: bool = True, block: int = 0) -> Line:
    return Line(text=text, size=size, bold=bold, block=block)


def layout(pages: list[list[Line]]) -> dict[int, str]:
    """page -> "kept" | "part <reasons...>" | "<reasons...>", the shape the fixture tests use."""
    kept, dropped = filter_pages(pages)
    table: dict[int, list[str]] = {}
    for page in kept:
        table.setdefault(page.number, []).append("part" if page.partial else "kept")
    for part in dropped:
        table.setdefault(part.number, []).append(part.reason.value)
    return {number: " ".join(parts) for number, parts in sorted(table.items())}


@pytest.mark.parametrize(("text", "reason"), [
    ("References", DropReason.REFERENCES),
    ("REFERENCES", DropReason.REFERENCES),
    ("7 References", DropReason.REFERENCES),
    ("7. References", DropReason.REFERENCES),
    ("VII. REFERENCES", DropReason.REFERENCES),
    ("Bibliography", DropReason.REFERENCES),
    ("Literature Cited", DropReason.REFERENCES),
    ("Works Cited", DropReason.REFERENCES),
    ("Acknowledgements", DropReason.ACKNOWLEDGEMENTS),
    ("Acknowledgments", DropReason.ACKNOWLEDGEMENTS),
    ("Acknowledgement", DropReason.ACKNOWLEDGEMENTS),
    ("ACKNOWLEDGMENTS", DropReason.ACKNOWLEDGEMENTS),
    ("8 Acknowledgment", DropReason.ACKNOWLEDGEMENTS),
    ("Acknowledgments and Disclosure of Funding", DropReason.ACKNOWLEDGEMENTS),
    ("Appendix", DropReason.APPENDIX),
    ("Appendices", DropReason.APPENDIX),
    ("APPENDIX", DropReason.APPENDIX),
    ("Appendix A: Proofs", DropReason.APPENDIX),
    ("Appendix A. Proofs of Lemmas 1 and 2", DropReason.APPENDIX),
    ("A Appendix", DropReason.APPENDIX),
    ("A. Appendix", DropReason.APPENDIX),
    ("A Appendix A - Baseline Details", DropReason.APPENDIX),
    ("APPENDIX A PROOFS", DropReason.APPENDIX),
    ("Supplementary Material", DropReason.SUPPLEMENTARY),
    ("Supplementary Materials", DropReason.SUPPLEMENTARY),
    ("Supplemental Material", DropReason.SUPPLEMENTARY),
    ("Supplementary Information", DropReason.SUPPLEMENTARY),
    ("References:", DropReason.REFERENCES),
])
def test_bold_heading_lines_start_their_part(text, reason) -> None:
    found = detect_heading(heading(text), BODY)
    assert found is not None and found.reason == reason and found.text == text


@pytest.mark.parametrize("text", [
    "see the references in [3] for the full proofs",
    "as listed in Appendix A of the technical report,",
    "Appendix B shows the results for every dataset.",
    "References to tables and figures are linked to their captions.",
    "the acknowledgements section of the paper",
    "Supplementary material is available online.",
    "A model is trained on the references",
    "2 Related Work",
    "Reference",
])
def test_running_text_is_no_heading_even_in_bold(text) -> None:
    assert detect_heading(body(text), BODY) is None
    assert detect_heading(heading(text), BODY) is None


def test_a_heading_must_look_like_one() -> None:
    # A paragraph's last line can be the one word: only a heading's look makes it a heading.
    assert detect_heading(body("references."), BODY) is None
    assert detect_heading(body("Appendix."), BODY) is None
    assert detect_heading(body("References"), BODY) is None
    assert detect_heading(Line("References", size=12.0), BODY).reason == DropReason.REFERENCES
    assert detect_heading(body("REFERENCES"), BODY).reason == DropReason.REFERENCES
    assert detect_heading(body("7 References"), BODY).reason == DropReason.REFERENCES
    assert detect_heading(body("ACKNOWLEDGMENTS"), BODY).reason == DropReason.ACKNOWLEDGEMENTS


def test_figure_labels_are_no_headings() -> None:
    # HyperPhraseQueries p1: a Wikidata screenshot labels facts "2 references" in 4.9 pt.
    assert detect_heading(Line("2 references", size=4.9), BODY) is None
    assert detect_heading(Line("REFERENCES", size=6.0, bold=True), BODY) is None
    assert detect_heading(body("3 references"), BODY) is None


def test_run_in_heading_is_found_by_its_bold_lead() -> None:
    line = Line("Acknowledgments. This work was supported by the NSF.", size=BODY,
                lead="Acknowledgments.")
    found = detect_heading(line, BODY)
    assert found is not None and found.reason == DropReason.ACKNOWLEDGEMENTS
    assert found.text == "Acknowledgments."
    # A bold word that opens a sentence is not a run-in heading.
    assert detect_heading(Line("References to prior work are in bold.", size=BODY,
                               lead="References"), BODY) is None


def test_a_lettered_section_is_an_appendix_only_after_the_references() -> None:
    line = heading("A Implementation details")
    assert detect_heading(line, BODY) is None
    assert detect_heading(line, BODY, in_references=True).reason == DropReason.APPENDIX
    assert detect_heading(heading("B. Proofs"), BODY, in_references=True) is not None
    assert detect_heading(heading("A model of citation"), BODY, in_references=True) is None
    assert detect_heading(body("A Implementation details"), BODY, in_references=True) is None


def test_body_size_is_the_size_most_characters_are_set_in() -> None:
    lines = [heading("Title of a paper", size=16), body("x" * 300), Line("y" * 100, size=8)]
    assert body_size(lines) == BODY


def test_heading_mid_page_keeps_the_text_before_it() -> None:
    pages = [
        [heading("1 Introduction"), body("Intro text.")],
        [body("The conclusion is kept."), heading("References"), body("[1] A. Author. 2020.")],
        [body("[2] B. Author. 2021. A paper.")],
    ]
    kept, dropped = filter_pages(pages)
    assert [(p.number, p.partial) for p in kept] == [(1, False), (2, True)]
    assert kept[1].text == "The conclusion is kept."
    assert [(d.number, d.reason, d.heading) for d in dropped] == [
        (2, DropReason.REFERENCES, "References"), (3, DropReason.REFERENCES, "References"),
    ]
    assert dropped[0].chars == len("References [1] A. Author. 2020.")
    assert dropped[1].chars == len("[2] B. Author. 2021. A paper.")


def test_citation_dense_related_work_is_kept() -> None:
    cites = "Prior work [1, 2, 3, 4] and [5, 6] (Smith et al., 2019; Doe, 2020) [7-12]."
    pages = [[heading("2 Related Work"), *[body(cites) for _ in range(40)]],
             [body("More text."), heading("REFERENCES", bold=False, size=BODY), body("[1] X.")]]
    assert layout(pages) == {1: "kept", 2: "part references"}


def test_acknowledgements_then_references_then_appendix() -> None:
    pages = [
        [body("Conclusion text."), heading("Acknowledgements"), body("We thank the NSF.")],
        [heading("References"), body("[1] A. Author.")],
        [body("[2] B. Author."), heading("A Proofs"), body("Lemma 1 holds.")],
        [heading("B More proofs"), body("Lemma 2 holds.")],
    ]
    kept, dropped = filter_pages(pages)
    assert layout(pages) == {1: "part acknowledgements", 2: "references",
                             3: "references appendix", 4: "appendix"}
    assert [d.heading for d in dropped] == ["Acknowledgements", "References", "References",
                                            "A Proofs", "A Proofs"]


def test_content_never_resumes_after_a_dropped_part() -> None:
    pages = [
        [body("Main text."), heading("References"), body("[1] A. Author.")],
        [heading("5 Results"), body("A section after the references is still back matter.")],
        [heading("Appendix A: Data"), body("Tables.")],
    ]
    assert layout(pages) == {1: "part references", 2: "references", 3: "appendix"}


def test_blank_pages_are_empty_before_back_matter_and_part_of_it_after() -> None:
    pages = [[body("Intro.")], [], [body("Method.")], [heading("References"), body("[1]")], []]
    kept, dropped = filter_pages(pages)
    assert layout(pages) == {1: "kept", 2: "empty", 3: "kept", 4: "references",
                             5: "references"}
    assert dropped[0].heading == "" and dropped[0].chars == 0


def test_a_page_number_before_the_heading_does_not_make_the_page_partial() -> None:
    # pdfTeX often writes the footer's page number first in the content stream.
    pages = [[body("Main text.")],
             [body("4981", block=0), heading("References", block=1), body("[1] X.", block=2)]]
    kept, dropped = filter_pages(pages)
    assert layout(pages) == {1: "kept", 2: "references"}
    assert dropped[0].chars == len("4981\n\nReferences\n\n[1] X.")


def test_page_text_joins_lines_and_hyphenated_words_and_keeps_paragraphs() -> None:
    lines = [body("Full text is aug-", 0), body("mented with sections", 0),
             body("and state-of-the-", 0), body("art models.", 0), body("A new paragraph", 1),
             body("starts here, end-", 1), body("ing in a column break.", 2)]
    assert page_text(lines) == (
        "Full text is augmented with sections and state-of-the-art models."
        "\n\nA new paragraph starts here, ending in a column break."
    )
