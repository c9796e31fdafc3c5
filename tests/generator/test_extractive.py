"""The extractive writer on a real shortlist: the 10 demo papers nearest to a demo abstract."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from services.common.corpus import read_jsonl, row_from_arxiv
from services.common.sentences import split_sentences
from services.generator import extractive
from services.generator.extractive import ANSWER_OPENER, excerpts, traceable, write
from services.generator.papers import Page, Paper, with_keys

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
SOURCE_ID = "1812.06145"  # dynamic hand-gesture recognition with multimodal training
MARKER = re.compile(r"\[([^\[\]]+)\]")


@pytest.fixture(scope="module")
def demo() -> tuple[str, list[Paper]]:
    """(source abstract, shortlist): the 10 papers nearest to the source by cosine, with their
    mpnet vectors and cosines as relevance, keyed."""
    rows = {r["id"]: row_from_arxiv(r) for r in read_jsonl(DEMO / "sample-10k.jsonl.gz")}
    data = np.load(DEMO / "embeddings-all-mpnet-base-v2.npz")
    ids = data["ids"].tolist()
    vectors = data["vectors"].astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    source = ids.index(SOURCE_ID)
    cosines = vectors @ vectors[source]
    cosines[source] = -np.inf
    shortlist = []
    for i in np.argsort(-cosines, kind="stable")[:10]:
        row = rows[ids[i]]
        shortlist.append(Paper(
            id=row.id, title=row.title, abstract=row.abstract, authors=tuple(row.authors),
            year=row.year, relevance=float(cosines[i]), vector=vectors[i],
        ))
    return rows[SOURCE_ID].abstract, with_keys(shortlist)


def paragraphs(text: str) -> list[list[str]]:
    return [split_sentences(p) for p in text.split("\n\n")]


def assert_grounded(text: str, papers: list[Paper], openers: int = 1) -> None:
    """Every sentence with a marker is its paper's own; the others only open paragraphs."""
    by_key = {p.key: p for p in papers}
    for number, sentences in enumerate(paragraphs(text)):
        uncited = openers + 1 if number == 0 and text.startswith(ANSWER_OPENER) else openers
        for position, sentence in enumerate(sentences):
            keys = MARKER.findall(sentence)
            if position < uncited:
                assert not keys, sentence
                continue
            assert len(keys) == 1, sentence
            assert traceable(sentence, by_key[keys[0]]), sentence


def cited_keys(text: str) -> set[str]:
    return set(MARKER.findall(text))


def test_every_cited_sentence_is_quoted_from_the_paper_it_cites(demo) -> None:
    source, papers = demo
    draft = write(source, papers)
    assert_grounded(draft.text, papers)
    assert draft.note.startswith("extractive")
    # traceable is no rubber stamp: the same sentence is not another paper's, nor altered.
    sentence = paragraphs(draft.text)[0][1]
    key = MARKER.findall(sentence)[0]
    paper = next(p for p in papers if p.key == key)
    other = next(p for p in papers if p.key != key)
    assert not traceable(sentence.replace(f"[{key}]", f"[{other.key}]"), other)
    altered = re.sub(r"\b(\w{4,})\b", "banana", sentence, count=1)
    assert not traceable(altered, paper)


def test_every_shortlisted_paper_is_cited_in_few_substantial_paragraphs(demo) -> None:
    source, papers = demo
    draft = write(source, papers)
    assert cited_keys(draft.text) == {p.key for p in papers}
    found = paragraphs(draft.text)
    assert draft.paragraphs == len(found) <= math.ceil(len(papers) / 2)
    assert min(len(p) for p in found) >= extractive.MIN_PARAGRAPH_SENTENCES
    assert len(write(source, papers, max_paragraphs=2).text.split("\n\n")) <= 2
    one = write(source, papers, max_paragraphs=1)
    assert one.paragraphs == 1 and cited_keys(one.text) == {p.key for p in papers}


def test_output_is_deterministic_and_independent_of_shortlist_order(demo) -> None:
    source, papers = demo
    draft = write(source, papers)
    assert write(source, papers) == draft
    assert write(source, papers[::-1]) == draft
    # Without retrieval scores the TF-IDF relevance orders papers, also independently.
    unscored = [replace(p, relevance=0.0) for p in papers]
    assert write(source, unscored).text == write(source, unscored[::-1]).text


def test_without_vectors_themes_come_from_tfidf(demo) -> None:
    source, papers = demo
    plain = [replace(p, vector=None) for p in papers]
    draft = write(source, plain)
    assert_grounded(draft.text, plain)
    assert cited_keys(draft.text) == {p.key for p in plain}
    assert draft.paragraphs <= math.ceil(len(plain) / 2)
    assert min(len(p) for p in paragraphs(draft.text)) >= extractive.MIN_PARAGRAPH_SENTENCES
    assert write(source, plain[::-1]) == draft


def test_answer_mode_opens_with_a_general_sentence(demo) -> None:
    source, papers = demo
    draft = write("How can multimodal training improve gesture recognition?", papers, "answer")
    assert draft.text.startswith(ANSWER_OPENER + " ")
    assert_grounded(draft.text, papers)
    assert cited_keys(draft.text) == {p.key for p in papers}


def test_a_paper_without_usable_sentences_is_still_cited(demo) -> None:
    source, papers = demo
    unusable = Paper(
        id="2501.00001", title="Notes on Gesture Datasets", authors=("Ann Lee", "Bo Chen"),
        year=2025, abstract="See Fig. 3 for the setup. Why do gestures matter? Short one.",
    )
    empty = Paper(id="2501.00002", title="An Untitled Report", abstract="", authors=("Kim Park",))
    shortlist = with_keys([*papers, unusable, empty])
    draft = write(source, shortlist)
    assert cited_keys(draft.text) == {p.key for p in shortlist}
    assert_grounded(draft.text, shortlist)
    assert "See Fig. 3 for the setup" in draft.text  # the fallback: its first sentences
    assert "See also Park, “An Untitled Report”" in draft.text


def test_excerpts_are_verbatim_sentences_in_paper_order(demo) -> None:
    source, papers = demo
    for paper in papers:
        found = excerpts(source, paper, k=3)
        assert 1 <= len(found) <= 3
        positions = [paper.abstract.find(e.text) for e in found]
        assert -1 not in positions, "verbatim sentences of the abstract"
        assert positions == sorted(positions)
        assert all(e.page == 0 and 0.0 <= e.relevance <= 1.0 + 1e-9 for e in found)
    # Pages come after the abstract, by page number whatever their order in the record.
    paper = replace(papers[0], pages=(
        Page(3, "Dynamic hand gesture recognition benefits from multimodal training signals."),
        Page(2, "Unimodal 3D convolutional networks recognize dynamic hand gestures well.\n\n"
                "Table 2 lists the hand gesture recognition accuracy of every network."),
    ))
    found = excerpts(source, paper, k=4)
    pages = [e.page for e in found]
    assert pages == sorted(pages) and {2, 3} <= set(pages)
    assert not any(e.text.startswith("Table 2") for e in found)


def test_unquotable_sentences_are_left_out() -> None:
    sentences = [
        "Graph networks were shown to scale well to large molecules (Smith et al., 2020).",
        "Graph networks scale well to large molecules as reported before [12].",
        "As shown in Fig. 4, graph networks scale well to large molecular datasets.",
        "The code for the graph networks is available at https://example.org/graphs.",
        "Can graph networks scale well to the largest molecules in the dataset?",
        "However, graph networks scale well to large molecules in every experiment.",
        "To this end, we train graph networks on large molecules in every experiment.",
        "Graph nets.",
    ]
    good = "Graph networks scale well to large molecules in all reported experiments."
    paper = with_keys([Paper(id="x1", title="Graphs", abstract=" ".join([*sentences, good]))])[0]
    assert [e.text for e in excerpts("graph networks for large molecules", paper, k=5)] == [good]


def test_first_person_is_rewritten_and_undone_by_traceable() -> None:
    abstract = (
        "We propose a graph network that predicts molecular properties from atom types. "
        "Our experiments on three molecule benchmarks show consistent gains over baselines."
    )
    many = with_keys([Paper(id="m1", title="Molecular Graph Networks", abstract=abstract,
                            authors=("Ann Smith", "Bo Lee", "Cy Chen"), year=2024)])
    solo = with_keys([Paper(id="s1", title="Molecular Graph Networks", abstract=abstract,
                            authors=("Ann Smith",), year=2024)])
    text = write("molecular property prediction with graph networks", many).text
    assert "Smith et al. propose a graph network" in text
    assert "Their experiments on three molecule benchmarks" in text
    assert "We " not in text and "Our " not in text
    assert_grounded(text, many)
    solo_text = write("molecular property prediction with graph networks", solo).text
    assert "They propose a graph network" in solo_text  # "Smith propose" would be ungrammatical
    assert_grounded(solo_text, solo)
