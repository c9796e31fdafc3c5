"""Metrics for `citeweave eval generation`: citations of a generated text against its shortlist.

A generated text is split into sentences and its in-text citations are parsed in one of two
styles, chosen by the reference list the caller supplies:
- numeric, `[1]`, `[1, 3]`, `[1-3]`, `[1–3]`, `[2; 5]`: a mapping number -> corpus id;
- author-year, `(Smith et al., 2024)`, `(Smith and Lee, 2023; Chen, 2021)`, `Smith et al. (2024)`:
  a list of (corpus id, first-author surname, year); see `resolve_author_year` for the matching.
Every key of a marker is one citation (`[1-3]` is three).

Per output (`score_output`):
- citation validity: share of citations that resolve to a shortlisted paper. None when the text
  has no citation at all: 1.0 would reward a text that cites nothing, 0.0 would mix "cites
  nothing" with "cites wrongly"; `average` skips None, and `n_citations` shows the case.
- coverage: distinct shortlisted papers cited / shortlist size (None for an empty shortlist).
- co-citation graph metrics (Select-Read-Write §5.2, see `graph_metrics`).
- support: mean cosine between each citing sentence and the abstract of the paper it cites, and
  the same with a random shortlisted paper in place of the cited one, as the baseline.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import NamedTuple

import numpy as np

from services.common.sentences import sentence_spans, split_sentences

Embed = Callable[[list[str]], np.ndarray]
NumericReferences = Mapping[int, str]


class AuthorYearRef(NamedTuple):
    """One reference-list entry for author-year citations; plain 3-tuples work too."""

    corpus_id: str
    surname: str
    year: int | str


AuthorYearReferences = Sequence[AuthorYearRef | tuple[str, str, int | str]]
References = NumericReferences | AuthorYearReferences


@dataclass(frozen=True)
class Citation:
    """One cited key. `raw` is the whole marker as written, shared by the keys of a group."""

    raw: str
    key: str
    sentence: int
    corpus_id: str | None
    start: int


# --- numeric citations -------------------------------------------------------------------------

_DASH = r"[-–—]"
_NUM_ITEM = rf"\s*\d+\s*(?:{_DASH}\s*\d+\s*)?"
_NUMERIC = re.compile(rf"\[({_NUM_ITEM}(?:[,;]{_NUM_ITEM})*)\]")


def _numeric_keys(group: str) -> list[int]:
    keys: list[int] = []
    for item in re.split(r"[,;]", group):
        bounds = [int(n) for n in re.split(_DASH, item)]
        if len(bounds) == 2 and bounds[0] <= bounds[1]:
            keys += range(bounds[0], bounds[1] + 1)
        else:
            keys += bounds  # a reversed range cites its two ends, not a guessed span
    return keys


def parse_numeric_citations(text: str, references: NumericReferences) -> list[Citation]:
    """Citations like `[1]`, `[1, 3]`, `[1-3]`, `[2; 5]`; unknown numbers resolve to None."""
    starts = [s for s, _ in sentence_spans(text)]
    citations = []
    for match in _NUMERIC.finditer(text):
        sentence = max(bisect_right(starts, match.start()) - 1, 0)
        for key in _numeric_keys(match.group(1)):
            citations.append(
                Citation(match.group(0), str(key), sentence, references.get(key), match.start())
            )
    return citations


# --- author-year citations ---------------------------------------------------------------------

_YEAR = r"(?:1[89]|20)\d{2}[a-z]?"
_YEARS = rf"{_YEAR}(?:\s*,\s*{_YEAR})*"
_PARENTHETICAL = re.compile(r"\(([^()]*)\)")
_PREFIX = r"(?:(?:e\.g\.|i\.e\.|cf\.|see(?:\s+also)?)\s*,?\s*)?"
_ITEM = re.compile(rf"^\s*{_PREFIX}(?P<authors>[^\d;]+?)\s*,?\s+(?P<years>{_YEARS})\s*$")
_NAME = r"[^\W\d_][\w'’-]*"
_NARRATIVE = re.compile(
    rf"(?P<authors>{_NAME}(?:\s+(?:et\s+al\.?|(?:and|&)\s+{_NAME}))?)\s+\((?P<years>{_YEARS})\)"
)
_FIRST_AUTHOR_END = re.compile(r"\s+et\s+al\b|\s+and\s+|\s*&\s*|,")


def _normalize_name(name: str) -> str:
    """Case- and diacritics-insensitive form: "Müller" == "muller", "Ünal" == "unal"."""
    decomposed = unicodedata.normalize("NFKD", name.replace("’", "'"))
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(plain.casefold().split())


def _split_year(year: int | str) -> tuple[int, str]:
    text = str(year).strip()
    return int(text[:4]), text[4:].lower()


def _surname_matches(cited: str, listed: str) -> bool:
    # Word-suffix matches let "Berg (2020)" find "van der Berg": the narrative form drops particles.
    return cited == listed or listed.endswith(" " + cited) or cited.endswith(" " + listed)


def resolve_author_year(surname: str, year: str, references: AuthorYearReferences) -> str | None:
    """Corpus id for a first-author surname and year such as "2024" or "2024a", or None.

    Surnames compare case- and diacritics-insensitively. A year suffix picks among several
    papers of one surname and year: an exact suffix in the list wins, else "a" is the first of
    them in list order, "b" the second. Without a suffix, several candidates are ambiguous (None).
    """
    cited_name = _normalize_name(surname)
    base, suffix = _split_year(year)
    candidates = [
        (corpus_id, _split_year(ref_year)[1])
        for corpus_id, ref_surname, ref_year in references
        if _split_year(ref_year)[0] == base
        and _surname_matches(cited_name, _normalize_name(ref_surname))
    ]
    ids = {corpus_id for corpus_id, _ in candidates}
    if len(ids) == 1:
        return ids.pop()
    if not suffix:
        return None
    exact = {corpus_id for corpus_id, ref_suffix in candidates if ref_suffix == suffix}
    if len(exact) == 1:
        return exact.pop()
    index = ord(suffix[0]) - ord("a")
    return candidates[index][0] if not exact and 0 <= index < len(candidates) else None


def _first_author(authors: str) -> str | None:
    first = _FIRST_AUTHOR_END.split(authors, maxsplit=1)[0].strip()
    return first if any(c.isupper() for c in first) else None


def _author_year_items(text: str) -> list[tuple[int, str, str, str, str]]:
    """(offset, raw marker, key, first author, year) for every author-year key, in text order."""
    items = []
    for match in _PARENTHETICAL.finditer(text):
        for part in match.group(1).split(";"):
            item = _ITEM.match(part)
            first = _first_author(item.group("authors")) if item else None
            if item and first:
                for year in re.split(r"\s*,\s*", item.group("years")):
                    key = f"{item.group('authors').strip()}, {year}"
                    items.append((match.start(), match.group(0), key, first, year))
    for match in _NARRATIVE.finditer(text):
        first = _first_author(match.group("authors"))
        if first and first[0].isupper():
            for year in re.split(r"\s*,\s*", match.group("years")):
                key = f"{match.group('authors')} ({year})"
                items.append((match.start(), match.group(0), key, first, year))
    items.sort(key=lambda item: item[0])  # stable: keys of one marker keep their order
    return items


def parse_author_year_citations(text: str, references: AuthorYearReferences) -> list[Citation]:
    """Citations like `(Smith et al., 2024; Chen, 2021)` and `Smith et al. (2024)`."""
    starts = [s for s, _ in sentence_spans(text)]
    return [
        Citation(
            raw,
            key,
            max(bisect_right(starts, offset) - 1, 0),
            resolve_author_year(first, year, references),
            offset,
        )
        for offset, raw, key, first, year in _author_year_items(text)
    ]


def parse_citations(text: str, references: References) -> list[Citation]:
    """Numeric citations for a {number: corpus id} mapping, author-year ones for a list."""
    if isinstance(references, Mapping):
        return parse_numeric_citations(text, references)
    return parse_author_year_citations(text, references)


# --- citation metrics --------------------------------------------------------------------------


def citation_validity(
    citations: Sequence[Citation], shortlist_ids: Collection[str]
) -> float | None:
    """Share of citations resolving to a shortlisted paper; None for a text without citations."""
    if not citations:
        return None
    allowed = set(shortlist_ids)
    return sum(c.corpus_id in allowed for c in citations) / len(citations)


def coverage(citations: Sequence[Citation], shortlist_ids: Collection[str]) -> float | None:
    """Distinct cited shortlisted papers / shortlist size; None for an empty shortlist."""
    allowed = set(shortlist_ids)
    if not allowed:
        return None
    return len({c.corpus_id for c in citations} & allowed) / len(allowed)


@dataclass(frozen=True)
class GraphMetrics:
    edges: int
    avg_node_degree: float
    clustering_coefficient: float


def cocitation_graph(citations: Sequence[Citation]) -> dict[str, set[str]]:
    """Adjacency of the co-citation graph: resolved references, joined when in one sentence."""
    by_sentence: dict[int, set[str]] = {}
    for c in citations:
        if c.corpus_id is not None:
            by_sentence.setdefault(c.sentence, set()).add(c.corpus_id)
    adjacency: dict[str, set[str]] = {node: set() for ids in by_sentence.values() for node in ids}
    for ids in by_sentence.values():
        for a, b in combinations(sorted(ids), 2):
            adjacency[a].add(b)
            adjacency[b].add(a)
    return adjacency


def _local_clustering(adjacency: dict[str, set[str]], node: str) -> float:
    neighbours = adjacency[node]
    k = len(neighbours)
    if k < 2:
        return 0.0
    links = sum(1 for a, b in combinations(neighbours, 2) if b in adjacency[a])
    return 2 * links / (k * (k - 1))


def graph_metrics(citations: Sequence[Citation]) -> GraphMetrics:
    """Select-Read-Write §5.2 co-citation graph statistics of one text.

    The paper (after Martin-Boyle et al., 2024): "A co-occurrence graph is constructed from the
    generated RWS, where each node represents a reference paper, and edges indicate that two
    references are jointly cited in a single sentence. [...] We select three simple yet
    insightful graph statistics as metrics: Average Number of Edges, Average Node Degree, and
    Clustering Coefficient." It names the statistics without formulas; the reading here:
    - nodes: the distinct references cited in the text that resolve to a corpus id (unresolved
      keys are not papers; validity penalizes them), isolated ones included;
    - edges: simple undirected graph, so a pair cited together in several sentences is one edge;
      "Average Number of Edges" is this count averaged over outputs (`average`);
    - average node degree: 2 * edges / nodes;
    - clustering coefficient: the mean of the local coefficients over all nodes (Watts-Strogatz,
      networkx `average_clustering`), a node of degree < 2 counting 0 - not global transitivity.
    A text without resolved citations scores 0 on all three, as the paper's table reports 0.0
    for a baseline whose references form no graph edges.
    """
    adjacency = cocitation_graph(citations)
    if not adjacency:
        return GraphMetrics(0, 0.0, 0.0)
    degree_sum = sum(len(neighbours) for neighbours in adjacency.values())
    clustering = sum(_local_clustering(adjacency, node) for node in adjacency) / len(adjacency)
    return GraphMetrics(degree_sum // 2, degree_sum / len(adjacency), clustering)


# --- support -----------------------------------------------------------------------------------


def _embed_unique(texts: Sequence[str], embed: Embed) -> dict[str, np.ndarray]:
    unique = list(dict.fromkeys(texts))  # each distinct text is embedded once
    vectors = np.asarray(embed(unique), dtype=np.float64)
    if vectors.shape[0] != len(unique):
        raise ValueError(f"embed returned {vectors.shape[0]} rows for {len(unique)} texts")
    if not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3):
        raise ValueError("embed must return L2-normalized rows (cosine is a dot product here)")
    return dict(zip(unique, vectors, strict=True))


def support(citing_pairs: Sequence[tuple[str, str]], embed: Embed) -> float | None:
    """Mean cosine of (citing sentence, cited paper abstract) pairs; None without pairs."""
    if not citing_pairs:
        return None
    vectors = _embed_unique([text for pair in citing_pairs for text in pair], embed)
    return float(np.mean([vectors[s] @ vectors[a] for s, a in citing_pairs]))


def support_random(
    sentences: Sequence[str],
    shortlist_abstracts: Sequence[str],
    embed: Embed,
    rng: np.random.Generator,
) -> float | None:
    """`support` with each sentence paired to a uniformly drawn shortlisted abstract instead.

    Draws `rng.integers(len(shortlist_abstracts), size=len(sentences))` once, so a seeded
    generator reproduces the baseline. Pass one sentence per citing pair (a sentence that cites
    two papers comes twice) so that the baseline averages over the same pairs as `support`.
    """
    if not sentences or not shortlist_abstracts:
        return None
    picks = rng.integers(len(shortlist_abstracts), size=len(sentences))
    pairs = [(s, shortlist_abstracts[i]) for s, i in zip(sentences, picks, strict=True)]
    return support(pairs, embed)


def citing_pairs(
    text: str, citations: Sequence[Citation], abstracts: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(sentence, abstract) for each distinct (sentence, cited paper with a known abstract)."""
    sentences = split_sentences(text)
    seen = dict.fromkeys(
        (c.sentence, c.corpus_id) for c in citations if c.corpus_id in abstracts
    )
    return [(sentences[i], abstracts[corpus_id]) for i, corpus_id in seen]


# --- per output and averages -------------------------------------------------------------------


@dataclass(frozen=True)
class OutputScores:
    n_sentences: int
    n_citations: int
    citation_validity: float | None
    coverage: float | None
    edges: int
    avg_node_degree: float
    clustering_coefficient: float
    support: float | None
    support_random: float | None


def score_output(
    text: str,
    references: References,
    shortlist: Mapping[str, str],
    embed: Embed | None = None,
    rng: np.random.Generator | None = None,
) -> OutputScores:
    """All figures for one generated text; `shortlist` maps corpus id -> abstract.

    Support is measured on citations of shortlisted papers only (their abstracts are known);
    without `embed` both support figures are None. `rng` defaults to a generator seeded with 0.
    """
    citations = parse_citations(text, references)
    graph = graph_metrics(citations)
    pairs = citing_pairs(text, citations, shortlist)
    supported = baseline = None
    if embed is not None:
        rng = rng if rng is not None else np.random.default_rng(0)
        supported = support(pairs, embed)
        baseline = support_random([s for s, _ in pairs], list(shortlist.values()), embed, rng)
    return OutputScores(
        n_sentences=len(sentence_spans(text)),
        n_citations=len(citations),
        citation_validity=citation_validity(citations, list(shortlist)),
        coverage=coverage(citations, list(shortlist)),
        edges=graph.edges,
        avg_node_degree=graph.avg_node_degree,
        clustering_coefficient=graph.clustering_coefficient,
        support=supported,
        support_random=baseline,
    )


# Report key -> OutputScores field; "avg_edges" is the paper's "Average Number of Edges".
AVERAGE_FIELDS = {
    "citation_validity": "citation_validity",
    "coverage": "coverage",
    "avg_edges": "edges",
    "avg_node_degree": "avg_node_degree",
    "clustering_coefficient": "clustering_coefficient",
    "support": "support",
    "support_random": "support_random",
}


def average(outputs: Sequence[OutputScores]) -> dict[str, float | None]:
    """Mean of each figure over the outputs that have a value (None when none has)."""
    result: dict[str, float | None] = {}
    for key, field in AVERAGE_FIELDS.items():
        values = [getattr(o, field) for o in outputs if getattr(o, field) is not None]
        result[key] = sum(values) / len(values) if values else None
    return result
