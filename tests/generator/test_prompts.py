"""Prompt templates, their start-up check, and fitting texts into the token budget."""

from __future__ import annotations

import pytest

from services.common.templates import TemplateError, check_template
from services.generator import prompts
from services.generator.papers import Page, Paper, with_keys


def test_the_shipped_prompts_pass_their_check():
    prompts.check_prompts()


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (prompts.SYNTHESIS_RELATED_WORK.replace("{papers}", ""), "expected each of"),
        (prompts.SYNTHESIS_RELATED_WORK + " {papers}", "expected each of"),
        (prompts.SUMMARY_RELATED_WORK + " {", "malformed template"),
    ],
    ids=["missing", "twice", "lone-brace"],
)
def test_a_broken_template_fails_the_check(template, message):
    expected = (prompts.SYNTHESIS_PLACEHOLDERS if "{count}" in template
                else prompts.SUMMARY_PLACEHOLDERS)
    with pytest.raises(TemplateError, match=message):
        check_template("edited prompt", template, expected)


def test_fit_keeps_short_texts_whole_and_shares_the_rest():
    texts = ["short", "a" * 1000, "word " * 400]
    fitted = prompts.fit(texts, 905)
    assert fitted[0] == "short"
    assert sum(len(t) for t in fitted) <= 905
    assert abs(len(fitted[1]) - len(fitted[2])) <= 5
    assert fitted[1].endswith("…") and fitted[2].endswith("…")
    assert prompts.fit(texts, 10_000) == texts


def _paper(**changes) -> Paper:
    paper = Paper("2401.00001", "Graph Networks", "We study graphs. " * 20, ("Ann Lee", "Bo Kim"),
                  2024, pages=(Page(3, "Page three text. " * 500), Page(5, "Page five. " * 50)))
    return with_keys([paper])[0]


def test_summary_prompt_fits_its_budget_and_names_pages():
    paper = _paper()
    pages = [(p.number, p.text) for p in paper.pages]
    messages = prompts.summary_messages(prompts.SUMMARY_RELATED_WORK, "My abstract.", paper, pages,
                                        max_chars=4000)
    user = messages[-1]["content"]
    assert len(messages[0]["content"]) + len(user) <= 4000 + 200  # headers of the page blocks
    assert "[page 3]" in user and "[page 5]" in user and "Page five." in user
    assert "My abstract." in user and paper.title in user
    without_pages = prompts.summary_messages(prompts.SUMMARY_ANSWER, "Why?", paper, [], 4000)
    assert prompts.NO_PAGES in without_pages[-1]["content"]


def test_synthesis_prompt_shows_keys_not_authors_or_years():
    papers = with_keys([
        Paper("2401.00001", "Graph Networks", "Graphs.", ("Ann Lee",), 2024, summary="Sums up graphs."),
        Paper("2301.00002", "Deep Sets", "Sets.", ("Cy Park",), 2023, summary="Sums up sets."),
    ])
    user = prompts.synthesis_messages(prompts.SYNTHESIS_RELATED_WORK, "My abstract.", papers, 1,
                                      max_chars=20_000)[-1]["content"]
    assert '[lee2024graph] "Graph Networks"\nSums up graphs.' in user
    assert "[lee2024graph; park2023deep]" in user
    assert "at most 1 paragraphs" in user
    assert "Ann" not in user and "2023" not in user.replace("park2023deep", "")
