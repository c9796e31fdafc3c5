"""Generation metrics and judge prompts against values computed by hand on tiny texts."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from services.evaluation.generation_metrics import (
    AVERAGE_FIELDS,
    Citation,
    OutputScores,
    average,
    citation_validity,
    citing_pairs,
    coverage,
    graph_metrics,
    parse_author_year_citations,
    parse_citations,
    parse_numeric_citations,
    score_output,
    split_sentences,
    support,
    support_random,
)
from services.evaluation.judge_prompts import (
    JUDGE_METRICS,
    JUDGE_PROMPTS,
    JudgePromptError,
    JudgeReplyError,
    check_judge_prompts,
    format_cited_papers,
    parse_judge_score,
    placeholders,
    render_judge_prompt,
)

VOCAB = ("graph", "neural", "retrieval", "dense", "protein", "folding")


def bow_embed(texts: list[str]) -> np.ndarray:
    """Bag of words over VOCAB, L2-normalized; every test text holds a VOCAB word."""
    rows = []
    for text in texts:
        words = re.findall(r"[a-z]+", text.lower())
        row = np.array([words.count(word) for word in VOCAB], dtype=float)
        rows.append(row / np.linalg.norm(row))
    return np.vstack(rows)


def summary(citations: list[Citation]) -> list[tuple[str, str, int, str | None]]:
    return [(c.raw, c.key, c.sentence, c.corpus_id) for c in citations]


# --- sentences ---------------------------------------------------------------------------------


def test_sentences_do_not_split_at_abbreviations_decimals_or_inside_brackets():
    text = (
        "Transformers gained 3.5 points (e.g., Smith et al., 2024). As Fig. 2 shows, i.e. the "
        "left panel, gains grow [Ref. A. Smith]. Chen et al. (2021) disagree. It works! Really? "
        "Yes.\n\nA heading without a period\nand its line"
    )
    assert split_sentences(text) == [
        "Transformers gained 3.5 points (e.g., Smith et al., 2024).",
        "As Fig. 2 shows, i.e. the left panel, gains grow [Ref. A. Smith].",
        "Chen et al. (2021) disagree.",
        "It works!",
        "Really?",
        "Yes.",
        "A heading without a period\nand its line",
    ]


def test_an_unclosed_bracket_does_not_glue_the_rest_together():
    text = "One (unclosed. Two [Ref. A. Smith]. Three."
    assert split_sentences(text) == ["One (unclosed.", "Two [Ref. A. Smith].", "Three."]


# --- parsing -----------------------------------------------------------------------------------


def test_numeric_citations_with_groups_ranges_and_unknown_keys():
    refs = {1: "A", 2: "B", 3: "C", 5: "E"}
    text = "A [1]. B [1, 3] and [1-3], [1–3] or [2; 5]. C [9] and [3-1]."
    assert summary(parse_numeric_citations(text, refs)) == [
        ("[1]", "1", 0, "A"),
        ("[1, 3]", "1", 1, "A"),
        ("[1, 3]", "3", 1, "C"),
        ("[1-3]", "1", 1, "A"),
        ("[1-3]", "2", 1, "B"),
        ("[1-3]", "3", 1, "C"),
        ("[1–3]", "1", 1, "A"),
        ("[1–3]", "2", 1, "B"),
        ("[1–3]", "3", 1, "C"),
        ("[2; 5]", "2", 1, "B"),
        ("[2; 5]", "5", 1, "E"),
        ("[9]", "9", 2, None),
        ("[3-1]", "3", 2, "C"),  # a reversed range cites its two ends
        ("[3-1]", "1", 2, "A"),
    ]


def test_author_year_citations_parenthetical_and_narrative():
    refs = [
        ("S24", "Smith", 2024),
        ("S23", "Smith", 2023),
        ("C21", "chen", 2021),  # case-insensitive
        ("M20", "Muller", 2020),  # diacritics-insensitive: cited as Müller
        ("U19", "Ünal", "2019"),
        ("B22", "van der Berg", 2022),
    ]
    text = (
        "Retrieval helps (Smith et al., 2024; Chen, 2021). Smith and Lee (2023) disagree. "
        "Müller (2020a) is cited; unal et al. (2019) is not a name, Ünal et al. (2019) is "
        "(Garcia, 2018; see Section 2). Berg (2022) and (e.g., van der Berg et al. 2022) agree."
    )
    assert summary(parse_author_year_citations(text, refs)) == [
        ("(Smith et al., 2024; Chen, 2021)", "Smith et al., 2024", 0, "S24"),
        ("(Smith et al., 2024; Chen, 2021)", "Chen, 2021", 0, "C21"),
        ("Smith and Lee (2023)", "Smith and Lee (2023)", 1, "S23"),
        ("Müller (2020a)", "Müller (2020a)", 2, "M20"),
        ("Ünal et al. (2019)", "Ünal et al. (2019)", 2, "U19"),
        ("(Garcia, 2018; see Section 2)", "Garcia, 2018", 2, None),  # not in the list
        ("Berg (2022)", "Berg (2022)", 3, "B22"),
        ("(e.g., van der Berg et al. 2022)", "van der Berg et al., 2022", 3, "B22"),
    ]


def test_year_suffixes_pick_among_papers_of_one_author_and_year():
    refs = [("first", "Smith", 2022), ("second", "Smith", 2022), ("lee", "Lee", "2021b")]
    text = "A (Smith, 2022a). B (Smith, 2022b; Smith, 2022c). C (Smith, 2022). D (Lee, 2021b)."
    assert [c.corpus_id for c in parse_author_year_citations(text, refs)] == [
        "first", "second", None, None, "lee",  # 2022c: no third paper; 2022 alone: ambiguous
    ]


def test_parse_citations_picks_the_style_from_the_reference_list():
    text = "Both [1] and (Smith, 2024) appear."
    assert [c.key for c in parse_citations(text, {1: "A"})] == ["1"]
    assert [c.key for c in parse_citations(text, [("S", "Smith", 2024)])] == ["Smith, 2024"]


# --- validity, coverage ------------------------------------------------------------------------


def test_validity_counts_unknown_and_unshortlisted_keys_invalid():
    refs = {1: "A", 2: "B", 4: "D"}
    citations = parse_numeric_citations("X [1]. Y [2, 4]. Z [7].", refs)
    shortlist = ["A", "B", "C"]
    # 4 citations: 1->A ok, 2->B ok, 4->D not shortlisted, 7 unknown: 2/4.
    assert citation_validity(citations, shortlist) == 0.5
    # Distinct shortlisted papers cited: {A, B} of 3.
    assert coverage(citations, shortlist) == pytest.approx(2 / 3)


def test_a_text_without_citations_has_no_validity_and_zero_coverage():
    assert citation_validity([], ["A"]) is None
    assert coverage([], ["A", "B"]) == 0.0
    assert coverage([], []) is None
    assert graph_metrics([]) == graph_metrics(parse_numeric_citations("Nothing cited.", {}))
    assert (graph_metrics([]).edges, graph_metrics([]).avg_node_degree) == (0, 0.0)


# --- co-citation graph -------------------------------------------------------------------------

GRAPH_REFS = {1: "A", 2: "B", 3: "C", 4: "D", 5: "E"}
GRAPH_TEXT = (
    "Early systems used rules [1]. Later models combined retrieval and generation [1, 2, 3]. "
    "Retrieval alone was studied too [3; 4]. Surveys exist [5, 9]. "
    "Rules and generation were compared again [1, 2]."
)


def test_graph_metrics_by_hand():
    # Sentence id sets: {A}, {A,B,C}, {C,D}, {E} (9 is unresolved: no node), {A,B}.
    # Nodes A,B,C,D,E (5). Edges AB, AC, BC, CD = 4 (AB again in the last sentence: one edge).
    # Degrees A2 B2 C3 D1 E0 -> average 8/5 = 1.6.
    # Local clustering: A: B-C linked -> 1; B: A-C linked -> 1; C: of AB, AD, BD only AB -> 1/3;
    # D, E: degree < 2 -> 0. Mean (1 + 1 + 1/3 + 0 + 0) / 5 = 7/15 (transitivity would be 3/5).
    metrics = graph_metrics(parse_numeric_citations(GRAPH_TEXT, GRAPH_REFS))
    assert metrics.edges == 4
    assert metrics.avg_node_degree == pytest.approx(1.6)
    assert metrics.clustering_coefficient == pytest.approx(7 / 15)


def test_a_triangle_has_clustering_one():
    # One sentence citing three papers: 3 edges, every degree 2, every local coefficient 1.
    metrics = graph_metrics(parse_numeric_citations("All three [1-3].", GRAPH_REFS))
    assert (metrics.edges, metrics.avg_node_degree, metrics.clustering_coefficient) == (3, 2.0, 1.0)


# --- support -----------------------------------------------------------------------------------

SUPPORT_TEXT = "Graph neural networks [1]. Dense retrieval [2]."
SUPPORT_SHORTLIST = {"A": "graph neural", "B": "retrieval"}


def test_support_by_hand():
    citations = parse_numeric_citations(SUPPORT_TEXT, {1: "A", 2: "B"})
    pairs = citing_pairs(SUPPORT_TEXT, citations, SUPPORT_SHORTLIST)
    assert pairs == [
        ("Graph neural networks [1].", "graph neural"),
        ("Dense retrieval [2].", "retrieval"),
    ]
    # (graph+neural)/√2 · (graph+neural)/√2 = 1; (dense+retrieval)/√2 · retrieval = 1/√2.
    assert support(pairs, bow_embed) == pytest.approx((1 + 1 / math.sqrt(2)) / 2)
    assert support([], bow_embed) is None


def test_support_random_by_hand_with_one_abstract():
    sentences = ["Graph neural networks [1].", "Dense retrieval [2]."]
    # Only one abstract to draw: (graph+retrieval)/√2; each sentence shares one word: 1/2.
    value = support_random(sentences, ["graph retrieval"], bow_embed, np.random.default_rng(3))
    assert value == pytest.approx(0.5)


def test_support_random_is_seeded_and_below_true_support():
    sentences = ["graph", "dense", "protein"]
    abstracts = ["graph", "dense", "protein"]  # orthogonal: a draw scores 1 if right, else 0
    true_support = support(list(zip(sentences, abstracts, strict=True)), bow_embed)
    baseline = support_random(sentences, abstracts, bow_embed, np.random.default_rng(7))
    # Documented draw: one rng.integers(3, size=3) call, in sentence order.
    picks = np.random.default_rng(7).integers(3, size=3)
    assert baseline == pytest.approx(np.mean(picks == [0, 1, 2]))
    assert true_support == 1.0 and baseline < true_support
    again = support_random(sentences, abstracts, bow_embed, np.random.default_rng(7))
    assert again == baseline
    assert support_random([], abstracts, bow_embed, np.random.default_rng(7)) is None


def test_support_rejects_unnormalized_embeddings():
    with pytest.raises(ValueError, match="L2-normalized"):
        support([("graph", "graph graph")], lambda texts: 2 * bow_embed(texts))


# --- per output, averages ----------------------------------------------------------------------


def test_score_output_on_the_graph_text():
    shortlist = {i: "graph" for i in ("A", "B", "C", "D", "F", "G")}
    scores = score_output(GRAPH_TEXT, GRAPH_REFS, shortlist)
    # 10 citations; E is not shortlisted and 9 is unknown: 8/10 valid; {A,B,C,D} of 6 covered.
    assert (scores.n_sentences, scores.n_citations) == (5, 10)
    assert scores.citation_validity == pytest.approx(0.8)
    assert scores.coverage == pytest.approx(4 / 6)
    assert (scores.edges, scores.avg_node_degree) == (4, pytest.approx(1.6))
    assert scores.clustering_coefficient == pytest.approx(7 / 15)
    assert scores.support is None and scores.support_random is None  # no embed given


def test_score_output_support_figures():
    scores = score_output(SUPPORT_TEXT, {1: "A", 2: "B"}, SUPPORT_SHORTLIST, embed=bow_embed)
    assert scores.support == pytest.approx((1 + 1 / math.sqrt(2)) / 2)
    expected = support_random(
        ["Graph neural networks [1].", "Dense retrieval [2]."],
        ["graph neural", "retrieval"],
        bow_embed,
        np.random.default_rng(0),
    )
    assert scores.support_random == expected


def test_average_skips_missing_values():
    first = OutputScores(5, 4, 0.5, 1.0, 4, 1.6, 0.2, 0.8, 0.4)
    empty = OutputScores(1, 0, None, 0.0, 0, 0.0, 0.0, None, None)
    assert average([first, empty]) == {
        "citation_validity": 0.5,
        "coverage": 0.5,
        "avg_edges": 2.0,
        "avg_node_degree": 0.8,
        "clustering_coefficient": 0.1,
        "support": 0.8,
        "support_random": 0.4,
    }
    assert average([empty])["citation_validity"] is None
    assert set(average([])) == set(AVERAGE_FIELDS) and all(v is None for v in average([]).values())


# --- judge prompts -----------------------------------------------------------------------------


def test_judge_prompts_have_exactly_their_placeholders():
    check_judge_prompts()
    for metric in JUDGE_METRICS:
        assert sorted(placeholders(JUDGE_PROMPTS[metric])) == [
            "cited_papers", "citing_abstract", "related_work",
        ]


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ("{cited_papers} {citing_abstract}", "related_work"),  # missing
        ("{cited_papers} {citing_abstract} {related_work} {related_work}", "exactly once"),
        ("{cited_papers} {citing_abstract} {related_work} {score}", "score"),  # extra
        ('{cited_papers} {citing_abstract} {related_work} {"score": 1}', "placeholders"),
        ("{cited_papers} {citing_abstract} {related_work} }", "malformed"),
    ],
)
def test_a_broken_judge_prompt_is_refused(broken, message):
    prompts = dict(JUDGE_PROMPTS, logic=broken)
    with pytest.raises(JudgePromptError, match=message):
        check_judge_prompts(prompts)


def test_a_missing_judge_metric_is_refused():
    with pytest.raises(JudgePromptError, match="relevance"):
        check_judge_prompts({m: JUDGE_PROMPTS[m] for m in ("coverage", "logic")})


def test_rendered_prompt_keeps_the_paper_wording_and_the_inputs():
    prompt = render_judge_prompt(
        "coverage",
        cited_papers=format_cited_papers({"2401.00001": "An abstract."}),
        citing_abstract="THE CITING ABSTRACT",
        related_work="THE RELATED WORK",
    )
    assert prompt.startswith("Please evaluate the 'Coverage' of the Related Work section")
    assert (
        "- Score 5: The 'Related Work' comprehensively covers all key and peripheral topics, "
        "providing detailed discussions and information." in prompt
    )
    assert '[{"id": "2401.00001", "abstract": "An abstract."}]' in prompt
    assert "THE CITING ABSTRACT" in prompt and "THE RELATED WORK" in prompt
    json_example = '{"reason": "The reason for your score", "score": "The final given score"}'
    assert f"like: {json_example}" in prompt
    with pytest.raises(KeyError):
        render_judge_prompt("fluency", cited_papers="", citing_abstract="", related_work="")


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"reason": "Covers most areas.", "score": "4"}', 4),
        ('```json\n{"reason": "Clear.", "score": 3}\n```', 3),
        ('{"reason": "Fine", "score": "5/5"}', 5),
        ('{"reason": "Fine", "score": 2.0}', 2),
        ("{'reason': 'It says score: 2 first', 'score': '1'}", 1),  # not JSON: the last one
    ],
)
def test_judge_scores_are_parsed(reply, score):
    assert parse_judge_score(reply) == score


@pytest.mark.parametrize(
    "reply",
    [
        "The related work is good.",
        '{"reason": "no score here"}',
        '{"reason": "x", "score": "7"}',
        '{"reason": "x", "score": "3.5"}',
        '{"reason": "x", "score": true}',
        '{"reason": "x", "score": "high"}',
    ],
)
def test_a_judge_reply_without_a_valid_score_is_an_error(reply):
    with pytest.raises(JudgeReplyError):
        parse_judge_score(reply)
