"""Citation keys, resolution, rendering, reference entries and BibTeX; the streaming filter."""

from __future__ import annotations

import re

import pytest

from services.generator.citations import CitationResolver, Reason, Style, bibtex_entry
from services.generator.llm import FaultKind, LlmFault
from services.generator.output import OutputFilter
from services.generator.papers import Paper, assign_keys, attribution, surname, with_keys

GESTURES = Paper(
    "1812.06145", "Improving the Performance of Unimodal Dynamic Hand-Gesture Recognition",
    "We present an approach.", ("Mahdi Abavisani", "Hamid Reza Vaezi Joze", "Vishal M. Patel"),
    2018, "", ("cs.CV", "cs.AI"),
)
GRAPHS = Paper("2001.00001", "Graph Networks at Scale", "Graphs.", ("Ann Lee",), 2020)
WORKSHOP = Paper(
    "W123", "On Some Thing & Other_Things", "Things.", ("Bob Smith", "Carl Jones"), 2019,
    "https://example.org/w123",
)


@pytest.fixture
def papers() -> list[Paper]:
    return with_keys([GESTURES, GRAPHS, WORKSHOP])


def test_keys_are_stable_unique_and_independent_of_order():
    twin = Paper("2001.00002", "Graph Networks Again", "x", ("Ann Lee",), 2020)
    forward = assign_keys([GESTURES, GRAPHS, twin])
    backward = assign_keys([twin, GRAPHS, GESTURES])
    assert forward == backward
    assert forward["1812.06145"] == "abavisani2018improving"
    assert {forward["2001.00001"], forward["2001.00002"]} == {"lee2020grapha", "lee2020graphb"}


def test_names_come_from_the_record():
    assert surname("Martin Luther King Jr.") == "King"
    assert attribution(GESTURES) == "Abavisani et al."
    assert attribution(WORKSHOP) == "Smith and Jones"
    assert attribution(GRAPHS) == "Lee"


def test_numeric_rendering_numbers_by_first_citation(papers):
    resolver = CitationResolver(papers, Style.NUMERIC)
    text = resolver.render(
        "Graphs [lee2020graph] and gestures [abavisani2018improving; lee2020graph] differ."
    )
    assert text == "Graphs [1] and gestures [1, 2] differ."
    assert resolver.numbers == {"2001.00001": 1, "1812.06145": 2}
    spans = {(c.paper_id, text[c.start:c.end]) for c in resolver.citations}
    assert spans == {("2001.00001", "[1]"), ("1812.06145", "[1, 2]"), ("2001.00001", "[1, 2]")}
    assert [r.marker for r in resolver.references()] == ["[1]", "[2]"]


def test_author_year_rendering_uses_the_corpus_names_and_years(papers):
    resolver = CitationResolver(papers, Style.AUTHOR_YEAR)
    text = resolver.render("Both [abavisani2018improving, smith2019some] study it.")
    assert text == "Both (Abavisani et al., 2018; Smith and Jones, 2019) study it."
    assert [r.marker for r in resolver.references()] == [
        "(Abavisani et al., 2018)", "(Smith and Jones, 2019)"
    ]


def test_same_authors_and_year_get_letters():
    twins = with_keys([GRAPHS, Paper("2001.00002", "Graph Networks Again", "x", ("Ann Lee",), 2020)])
    resolver = CitationResolver(twins, Style.AUTHOR_YEAR)
    text = resolver.render("See [lee2020grapha] and [lee2020graphb].")
    assert text == "See (Lee, 2020a) and (Lee, 2020b)."


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("[smith2021invented]", Reason.UNKNOWN_KEY),
        ("[3]", Reason.NUMBERED),
        ("[2105.00001]", Reason.NOT_IN_SHORTLIST),
        ("arXiv:2105.00001v2", Reason.NOT_IN_SHORTLIST),
        ("(Vaswani et al., 2017)", Reason.NOT_IN_SHORTLIST),
        ("(Smith and Jones, 2031)", Reason.YEAR_MISMATCH),
        ("[Lee, 2021]", Reason.YEAR_MISMATCH),
    ],
)
def test_citations_outside_the_shortlist_are_removed(papers, raw, reason):
    resolver = CitationResolver(papers, Style.NUMERIC)
    text = resolver.render(f"A claim {raw}. Another claim.")
    assert text == "A claim. Another claim."
    assert [r.reason for r in resolver.removed] == [reason]
    assert resolver.citations == []


def test_a_real_title_with_a_fake_year_loses_the_year(papers):
    resolver = CitationResolver(papers, Style.NUMERIC)
    text = resolver.render('The study "Graph Networks at Scale" (2031) and Abavisani et al. (2031) agree.')
    assert "2031" not in text
    assert text == 'The study "Graph Networks at Scale" and Abavisani et al. agree.'
    assert {r.reason for r in resolver.removed} == {Reason.STRAY_YEAR, Reason.YEAR_MISMATCH}


def test_correct_author_year_and_ids_are_repaired_to_the_paper(papers):
    resolver = CitationResolver(papers, Style.NUMERIC)
    text = resolver.render(
        "Lee (2020) scales graphs, as do (Smith and Jones, 2019), arXiv:1812.06145 and "
        "\\cite{lee2020graph}; see also abavisani2018improving."
    )
    assert text == "Lee [1] scales graphs, as do [2], [3] and [1]; see also [3]."
    assert resolver.repaired == 2
    assert resolver.removed == []


def test_prose_in_brackets_and_parentheses_is_left_alone(papers):
    resolver = CitationResolver(papers, Style.NUMERIC)
    prose = "Scores (e.g., 2020 numbers) lie in (see Section 2) [as noted above] ranges."
    assert resolver.render(prose) == prose
    assert resolver.removed == []


def test_reference_entries_and_bibtex(papers):
    resolver = CitationResolver(papers, Style.NUMERIC)
    resolver.render("[abavisani2018improving] [smith2019some]")
    refs = resolver.references()
    assert refs[0].formatted == (
        "Abavisani, M., Joze, H. R. V., & Patel, V. M. (2018). Improving the Performance of "
        "Unimodal Dynamic Hand-Gesture Recognition. arXiv:1812.06145. "
        "https://arxiv.org/abs/1812.06145"
    )
    assert refs[0].url == "https://arxiv.org/abs/1812.06145"
    assert refs[1].formatted == (
        "Smith, B., & Jones, C. (2019). On Some Thing & Other_Things. https://example.org/w123"
    )
    bib = resolver.bibtex()
    assert "@misc{abavisani2018improving," in bib
    assert "eprint = {1812.06145}" in bib and "archivePrefix = {arXiv}" in bib
    assert "primaryClass = {cs.CV}" in bib
    assert "author = {Abavisani, Mahdi and Joze, Hamid Reza Vaezi and Patel, Vishal M.}" in bib
    workshop = bibtex_entry(papers[2])
    assert "eprint" not in workshop and r"On Some Thing \& Other\_Things" in workshop


def test_more_than_twenty_authors_are_shortened_apa_style():
    many = with_keys([Paper("2101.00001", "Big", "x", tuple(f"A{i} Person{i}" for i in range(25)), 2021)])
    resolver = CitationResolver(many)
    resolver.render(f"[{many[0].key}]")
    entry = resolver.references()[0].formatted
    assert entry.count("Person") == 20 and ", ... Person24, A." in entry


def _stream(resolver: CitationResolver, raw: str, size: int = 7) -> tuple[list[str], OutputFilter]:
    output = OutputFilter(resolver)
    deltas = []
    for i in range(0, len(raw), size):
        deltas += output.feed(raw[i:i + size])
    deltas += output.finish()
    return deltas, output


def test_stream_filter_never_shows_a_raw_key_and_drops_heading_and_references(papers):
    sentence = (
        "Graph methods [lee2020graph] and gesture models [abavisani2018improving; fake2020x] "
        "are related. "
    )
    raw = (
        "## Related Work\n\n" + sentence * 6
        + "\n\nReferences:\n[1] Lee, A. (2020). Graph Networks.\n[2] Fake, F. (2020). Nothing.\n"
    )
    resolver = CitationResolver(papers, Style.NUMERIC)
    deltas, output = _stream(resolver, raw)
    text = "".join(deltas)
    assert text == output.text
    assert not re.search(r"lee2020graph|abavisani|fake2020x|References|Related Work", text)
    assert text.startswith("Graph methods [1] and gesture models [2] are related.")
    reasons = [r.reason for r in resolver.removed]
    assert reasons.count(Reason.REFERENCE_LIST) == 2 and Reason.UNKNOWN_KEY in reasons
    for citation in resolver.citations:
        assert text[citation.start:citation.end] == citation.marker


def test_stream_filter_detects_refusal_and_empty_answers(papers):
    with pytest.raises(LlmFault) as refusal:
        _stream(CitationResolver(papers), "I'm sorry, but I can't help with writing that section.")
    assert refusal.value.kind is FaultKind.REFUSAL
    with pytest.raises(LlmFault) as empty:
        _stream(CitationResolver(papers), "## Related Work\n\nReferences\n[1] Someone.\n")
    assert empty.value.kind is FaultKind.EMPTY
