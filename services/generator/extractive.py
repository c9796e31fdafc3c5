"""The extractive writer: a related-work draft quoted from the shortlisted papers, no LLM.

Every cited sentence is a sentence of the paper it cites, chosen by TF-IDF relevance to the source
text with the retriever's MMR rule, so the draft can never state what a cited paper does not say.
The only words of our own are each paragraph's opening sentence (built from the theme's title
terms, citing nothing), neutral connectives between papers, and a few first-person rewrites that
turn "We propose" into "Smith et al. propose"; `traceable` undoes exactly these to check a
sentence against its paper.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from sklearn.cluster import AgglomerativeClustering
from sklearn.feature_extraction.text import TfidfVectorizer

from services.common.sentences import sentence_spans
from services.generator.papers import Paper, attribution, surname
from services.retriever.lexical import tokenize
from services.retriever.selection import normalize_rows, select

NOTE = (
    "extractive: every cited sentence is quoted from the paper it cites (first person rewritten "
    "as the authors' names or 'they'); each paragraph opens with a sentence naming terms of its "
    "papers' titles; no language model was used"
)
ANSWER_OPENER = "The corpus papers most related to this question report the following."
MIN_PARAGRAPH_SENTENCES = 4

# Openers of a paragraph; {terms} is one or two title phrases. Cycled by paragraph index.
_THEME_OPENERS = (
    "Several works study {terms}.",
    "Another group of papers addresses {terms}.",
    "A further line of work concerns {terms}.",
    "Other studies focus on {terms}.",
    "Related work also covers {terms}.",
)
_SINGLE_OPENER = "A related study concerns {terms}."
_NO_TERMS_OPENER = "Several further works are related."
# Between two papers of a paragraph. None of them says how the papers relate ("similarly",
# "in contrast" would be claims), only that another one follows.
CONNECTIVES = ("In addition,", "Relatedly,", "Along the same line,", "Moreover,",
               "In a related direction,")
# Sentence-initial words that are never names, so a connective may lower-case them.
_LOWERABLE = frozenset(
    "a all although an as at both by current despite each existing for from given in it its many "
    "most on one prior recent several some since such the their these they this those to "
    "traditional two unlike using when where while with".split()
)


@dataclass(frozen=True)
class Excerpt:
    text: str  # verbatim sentence from the paper (whitespace normalized to single spaces)
    page: int  # 0 = abstract, else the page number
    relevance: float  # TF-IDF cosine to the source text


@dataclass(frozen=True)
class Draft:
    text: str  # paragraphs separated by "\n\n"; citations as raw markers "[KEY]"
    paragraphs: int
    note: str


# --- TF-IDF ------------------------------------------------------------------------------------


def _tfidf(texts: list[str]) -> np.ndarray:
    """Unit TF-IDF rows over the retriever's tokens; a text without tokens gets a zero row."""
    tokens = tokenize(texts)
    if not any(tokens):
        return np.zeros((len(texts), 1))
    vectorizer = TfidfVectorizer(analyzer=_identity, sublinear_tf=True)
    return vectorizer.fit_transform(tokens).toarray()


def _identity(tokens: list[str]) -> list[str]:
    return tokens


# --- excerpts ----------------------------------------------------------------------------------

# Citations of other works, "(Smith et al., 2020)", "Lee (2019)", "Chen et al. show"; numeric
# ones ("[12]") go with every square bracket (see usable).
_CITATION = re.compile(r"\([^()]*\b(?:19|20)\d{2}[a-z]?\s*\)|\bet al\b")
# "Fig. 3", "Table II", "Eq. (4)", "Section A", "the appendix": meaningless outside the paper.
_REFERENCE = re.compile(
    r"\b(?:[Ff]ig(?:ure)?s?|[Tt]ab(?:le)?s?|[Ee]q(?:uation)?s?|[Ss]ec(?:tion)?s?|[Aa]lgorithm"
    r"|[Tt]heorem|[Ll]emma|[Dd]efinition)\.?\s*~?\(?(?:\d|[IVX]+\b|[A-Z]\b)"
    r"|\b[Aa]ppendi(?:x|ces)\b"
)
# Links and ids; an arXiv id would also read as a citation to the citation resolver.
_URL = re.compile(r"https?://|www\.|\.(?:com|org|io|net)\b|github|\S@\S|ar[Xx]iv:")
_LATEX = re.compile(r"[$\\{}]")
# Sentences that lean on the one before them ("However, ...", "This allows ...", "To address
# these ..."), or a section heading glued to the first sentence. Matched after the first-person
# rewrite, so "This paper proposes" (which becomes "The paper by ...") stays usable.
_DANGLING = re.compile(
    r"^(?:However|Moreover|Furthermore|Further|Additionally|In addition|Therefore|Thus|Hence"
    r"|Finally|Besides|Also|Then|First|Firstly|Second|Secondly|Third|Thirdly|Lastly"
    r"|Consequently|Nevertheless|Nonetheless|Meanwhile|Instead|Similarly|Likewise|Specifically"
    r"|In particular|On the other hand|In contrast|To this end|As a result|For example"
    r"|For instance|This|These|Those|That|Such|It|Its|Here|Next|Based on this|Building on this"
    r"|To (?:address|tackle|overcome|solve|mitigate|alleviate|handle|bridge|fill|resolve|achieve)"
    r" (?:this|these|those|such|that|the above|both))[,\s]"
    r"|^(?:Abstract|Introduction|Related [Ww]ork|Background|Conclusions?|Methodology"
    r"|Acknowledge?ments?|References)\s+[A-Z]"
)
# "In this paper, a model is proposed": the draft's own paper, to a reader of the draft.
_SELF_REFERENCE = re.compile(
    r"\b(?:[Tt]his|[Tt]he present|[Tt]he current) (?:paper|work|study|article)\b"
)
_WE = re.compile(r"^(?:(?:In this (?:paper|work|study|article)|Here(?:in)?),? we|We) (?=[a-z])")
_THIS = re.compile(r"^This (paper|work|study|article) (?=[a-z])")
_OUR = re.compile(r"\b([Oo])ur\b")
# First person that the rewrites above leave: such a sentence cannot be quoted as it stands.
_FIRST_PERSON = re.compile(r"\b(?:[Ww]e|[Uu]s|[Oo]urs|[Oo]urselves|[Mm]e|[Mm]y)\b")


def _normalize(text: str) -> str:
    return " ".join(text.split())


def _paper_sentences(paper: Paper) -> list[tuple[str, int]]:
    """(sentence, page) in reading order: abstract first, then pages by number; no repeats."""
    sources = [(0, paper.abstract)]
    sources += [(p.number, p.text) for p in sorted(paper.pages, key=lambda p: p.number)]
    seen: set[str] = set()
    sentences = []
    for page, text in sources:
        for start, end in sentence_spans(text):
            sentence = _normalize(text[start:end])
            if sentence and sentence not in seen:
                seen.add(sentence)
                sentences.append((sentence, page))
    return sentences


def _balanced(text: str) -> bool:
    return (
        text.count("(") == text.count(")")
        and text.count('"') % 2 == 0
        and text.count("“") == text.count("”")
    )


def usable(sentence: str) -> bool:
    """Whether a sentence can be quoted out of its context as a claim of its paper."""
    letters = sum(c.isalpha() for c in sentence)
    visible = sum(not c.isspace() for c in sentence)
    return (
        40 <= len(sentence) <= 450
        and sentence[0].isupper()
        and sentence.endswith(".")
        and _citable(sentence)
        and letters >= 0.6 * visible
        and _balanced(sentence)
        and not _CITATION.search(sentence)
        and not _REFERENCE.search(sentence)
        and not _URL.search(sentence)
        and not _LATEX.search(sentence)
        and _reads_alone(_third_person(sentence, "They"))
    )


def _citable(sentence: str) -> bool:
    """Whether the draft can cite the sentence as a statement: a bracket would read as a marker
    of the draft, and "?" or "!" would end the sentence before its marker."""
    return not any(c in sentence for c in "[]?!")


def _reads_alone(rewritten: str) -> bool:
    return not (
        _DANGLING.match(rewritten)
        or _FIRST_PERSON.search(rewritten)
        or _SELF_REFERENCE.search(rewritten)
    )


def excerpts(source_text: str, paper: Paper, k: int = 3, diversity: float = 0.3) -> list[Excerpt]:
    """Up to k sentences of the paper most related to the source, diverse by MMR, in paper order.

    A paper without a usable sentence falls back to its first sentences, so it can still be cited.
    """
    sentences = _paper_sentences(paper)
    chosen = [i for i, (text, _) in enumerate(sentences) if usable(text)]
    if not chosen:
        first = [s for s in sentences if _citable(s[0])][:k]
        return [
            Excerpt(text, page, float(rel))
            for (text, page), rel in zip(first, _relevances(source_text, first), strict=True)
        ]
    candidates = [sentences[i] for i in chosen]
    vectors = _tfidf([source_text] + [text for text, _ in candidates])
    relevance = vectors[1:] @ vectors[0]
    picks = sorted(p.index for p in select(relevance, vectors[1:], k, diversity))
    return [Excerpt(candidates[i][0], candidates[i][1], float(relevance[i])) for i in picks]


def _relevances(source_text: str, sentences: list[tuple[str, int]]) -> np.ndarray:
    if not sentences:
        return np.zeros(0)
    vectors = _tfidf([source_text] + [text for text, _ in sentences])
    return vectors[1:] @ vectors[0]


# --- first person and citations ----------------------------------------------------------------


def _named_authors(paper: Paper) -> int:
    return sum(1 for a in paper.authors if surname(a))


def _names(paper: Paper) -> str:
    """The attribution as a sentence start: a record's "yan" would read as no new sentence."""
    names = attribution(paper)
    return names[:1].upper() + names[1:]


def _third_person(sentence: str, subject: str, possessive: str = "Their",
                  this_noun: str = "The {noun}") -> str:
    match = _WE.match(sentence)
    if match:
        sentence = f"{subject} {sentence[match.end():]}"
    elif match := _THIS.match(sentence):
        sentence = f"{this_noun.format(noun=match.group(1))} {sentence[match.end():]}"
    elif sentence.startswith("Our "):
        sentence = f"{possessive} {sentence[4:]}"
    return _OUR.sub(lambda m: "Their" if m.group(1) == "O" else "their", sentence)


def rewrite(sentence: str, paper: Paper, lead: bool) -> str:
    """The sentence in the third person. The paper's first sentence in a paragraph names the
    authors; "Smith propose" would be wrong for a single author, who becomes "they" instead."""
    names = _names(paper)
    named = _named_authors(paper)
    subject = names if lead and named >= 2 else "They"
    possessive = f"{names}'s" if lead and named else "Their"
    this_noun = f"The {{noun}} by {names}" if named else "The {noun}"
    return _third_person(sentence, subject, possessive, this_noun)


def cite(sentence: str, key: str) -> str:
    """`sentence` with its marker before the final period: "... results [KEY]."."""
    body = sentence.rstrip()
    body = body[:-1] if body.endswith(".") else body
    return f"{body} [{key}]."


def mention(paper: Paper) -> str:
    """The citing sentence of a paper with no text at all: authors and title, from the record."""
    names = f"{attribution(paper)}, " if _named_authors(paper) else ""
    title = paper.title.replace("[", "(").replace("]", ")")  # brackets are markers in a draft
    return cite(f"See also {names}“{title}”", paper.key)


def _with_connective(sentence: str, connective: str, paper: Paper) -> str | None:
    """"In addition, the model ..."; None when the first word might be a name."""
    first = sentence.split(" ", 1)[0]
    if sentence.startswith(_names(paper)) or any(c.isupper() for c in first[1:]):
        return f"{connective} {sentence}"
    if first.lower() in _LOWERABLE:
        return f"{connective} {sentence[0].lower()}{sentence[1:]}"
    return None


# --- traceability ------------------------------------------------------------------------------

_MARKER_END = re.compile(r"^(.*?)\s*\[([^\[\]]+)\]\.$")
_WE_SOURCE = r"(?:(?:In this (?:paper|work|study|article)|Here(?:in)?),? we|We) "


def _source_pattern(body: str) -> str:
    parts = re.split(r"\b(their|Their)\b", body)
    return "".join(
        f"(?:{p}|{'O' if p[0] == 'T' else 'o'}ur)" if p in ("their", "Their") else re.escape(p)
        for p in parts
    )


def _openings(body: str, paper: Paper) -> list[str]:
    """Regexes of the original sentence for each rewrite that may have produced `body`."""
    names = _names(paper)
    patterns = [_source_pattern(body)]
    rewrites = [(f"{names} ", _WE_SOURCE), ("They ", _WE_SOURCE), (f"{names}'s ", "Our ")]
    for noun in ("paper", "work", "study", "article"):
        rewrites.append((f"The {noun} by {names} ", f"This {noun} "))
        rewrites.append((f"The {noun} ", f"This {noun} "))
    for rendered, source in rewrites:
        if body.startswith(rendered):
            patterns.append(source + _source_pattern(body[len(rendered):]))
    return patterns


def traceable(sentence: str, paper: Paper) -> bool:
    """Whether a cited sentence of a draft is a sentence of `paper` once the marker, a leading
    connective and the first-person rewrite are undone (whitespace-normalized substring)."""
    match = _MARKER_END.match(_normalize(sentence))
    if not match or (paper.key and match.group(2) != paper.key):
        return False
    if _normalize(sentence) == mention(paper):
        return True
    body = match.group(1)
    bodies = [body]
    for connective in CONNECTIVES:
        if body.startswith(connective + " "):
            rest = body[len(connective) + 1:]
            bodies.append(rest[:1].upper() + rest[1:])
            bodies.append(rest)
    texts = [_normalize(paper.abstract)] + [_normalize(p.text) for p in paper.pages]
    for candidate in bodies:
        for pattern in _openings(candidate, paper):
            compiled = re.compile(pattern)
            if any(compiled.search(text) for text in texts):
                return True
    return False


# --- themes ------------------------------------------------------------------------------------


def _relevance(source_text: str, papers: Sequence[Paper]) -> np.ndarray:
    if any(p.relevance for p in papers):
        return np.array([p.relevance for p in papers], dtype=np.float64)
    vectors = _tfidf([source_text] + [p.abstract for p in papers])
    return vectors[1:] @ vectors[0]


def _theme_vectors(papers: Sequence[Paper]) -> np.ndarray:
    dims = {None if p.vector is None else np.asarray(p.vector).shape for p in papers}
    if None not in dims and len(dims) == 1:
        vectors = np.stack([np.asarray(p.vector, dtype=np.float64) for p in papers])
    else:
        vectors = _tfidf([f"{p.title}\n{p.abstract}" for p in papers])
    return normalize_rows(vectors).astype(np.float64)


def _clusters(unit: np.ndarray, k: int) -> list[list[int]]:
    """Groups of row indices, average-linkage on cosine distance, each group sorted."""
    n = unit.shape[0]
    if k <= 1 or n <= 1:
        return [list(range(n))]
    distance = np.clip(1.0 - unit @ unit.T, 0.0, 2.0)
    distance = (distance + distance.T) / 2  # BLAS need not return an exactly symmetric product
    np.fill_diagonal(distance, 0.0)
    labels = AgglomerativeClustering(
        n_clusters=min(k, n), metric="precomputed", linkage="average"
    ).fit_predict(distance)
    groups: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(int(label), []).append(index)
    return sorted(groups.values())


def _merge_small(groups: list[list[int]], unit: np.ndarray, sentences: list[int],
                 relevance: np.ndarray) -> list[list[int]]:
    """Folds each theme whose paragraph would be too short into the theme nearest to it."""
    groups = [list(g) for g in groups]

    def size(group: list[int]) -> int:
        return 1 + sum(sentences[i] for i in group)  # the opening sentence counts

    while len(groups) > 1:
        small = [g for g in groups if size(g) < MIN_PARAGRAPH_SENTENCES]
        if not small:
            break
        smallest = min(small, key=lambda g: (size(g), max(relevance[g]), g[0]))
        others = [g for g in groups if g is not smallest]
        # Average linkage again (mean pairwise cosine), as the clustering itself: a centroid
        # would pull every small theme into the largest, broadest one.
        nearest = max(others, key=lambda g: (float((unit[smallest] @ unit[g].T).mean()), -g[0]))
        nearest.extend(smallest)
        nearest.sort()
        groups = others
    return groups


# --- title terms for the opening sentence ------------------------------------------------------

_TITLE_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'’][A-Za-z0-9]+)*|\S")
_TITLE_STOP = frozenset(
    "a about across after against all along among an and any are as at based be between beyond "
    "both but by can do does for from has have how in into is it its new not novel of on or our "
    "over than that the their them then these this those through to toward towards under unified "
    "up using versus via vs what when where whether which while who why will with within without "
    "you your".split()
)
# Singular count nouns that head many titles ("A Benchmark", "Our Framework"): a phrase ending in
# one needs an article that the opening sentence cannot know, so it is never chosen.
_GENERIC_HEADS = frozenset(
    "agent algorithm analysis approach architecture benchmark case comparison corpus dataset "
    "evaluation framework investigation library method model module network paper perspective "
    "pipeline platform solution strategy study survey system technique tool toolkit".split()
)


def _surface(word: str, names: frozenset[str]) -> str:
    """How a title word reads in running text: lower case, except names and acronyms ("Indian",
    "3D", "LLMs", "DecAlign"), part by part of a hyphenated word."""
    parts = re.split(r"([-'’])", word)
    return "".join(
        p if any(c.isupper() for c in p[1:]) or p.lower() in names else p.lower() for p in parts
    )


def _names_in(texts: Sequence[str]) -> frozenset[str]:
    """Words (lower-cased) that running text capitalizes mid-sentence and never writes in lower
    case: names. Title case hides them, so the abstracts decide."""
    capitalized, lower = set(), set()
    for text in texts:
        tokens = text.split()
        for index, token in enumerate(tokens):
            starts_sentence = index == 0 or tokens[index - 1].endswith((".", "!", "?", ":"))
            for part in re.split(r"[-/]", token.strip("()[]{},;:.!?\"'“”‘’")):
                if re.fullmatch(r"[a-z]+", part):
                    lower.add(part)
                elif re.fullmatch(r"[A-Z][a-z]+", part) and not starts_sentence:
                    capitalized.add(part.lower())
    return frozenset(capitalized - lower)


def _title_chunks(title: str) -> list[list[str]]:
    """Runs of content words of a title, cut at punctuation, numbers and stop words."""
    title = re.sub(r"\$[^$]*\$", " , ", title)
    chunks: list[list[str]] = [[]]
    for word in _TITLE_WORD.findall(title):
        content = word[0].isalnum() and not word.isdigit() and word.lower() not in _TITLE_STOP
        if content:
            chunks[-1].append(word)
        elif chunks[-1]:
            chunks.append([])
    return [c for c in chunks if c]


def _head_phrases(title: str) -> list[tuple[str, ...]]:
    """Phrases of up to three words ending a chunk: titles are noun phrases whose head comes last,
    so these read as nouns ("gesture recognition"), never as a lone adjective. A phrase opening
    with a verb form ("Evaluating code-mixed text") is left out."""
    phrases = []
    for chunk in _title_chunks(title):
        if chunk[-1].lower() in _GENERIC_HEADS:
            continue
        for n in range(1, min(3, len(chunk)) + 1):
            phrase = tuple(chunk[-n:])
            if n == 1 or not phrase[0].lower().endswith(("ing", "ed")):
                phrases.append(phrase)
    return phrases


def _stems(words: Sequence[str]) -> frozenset[str]:
    return frozenset(stem for tokens in tokenize(list(words)) for stem in tokens)


def _theme_terms(titles: Sequence[str], names: frozenset[str] = frozenset()) -> list[str]:
    """One or two title phrases that name a theme, the most shared first. `titles` in paper
    order; `names` (see _names_in) keep their capital."""
    per_title = [_head_phrases(t) for t in titles]
    title_stems = [_stems([w for phrase in phrases for w in phrase]) for phrases in per_title]
    frequency = Counter(stem for stems in title_stems for stem in stems)
    ranked = []
    for rank, phrases in enumerate(per_title):
        for phrase in phrases:
            stems = _stems(phrase)
            if stems:
                shared = sum(frequency[s] - 1 for s in stems)  # words of other titles too
                surface = " ".join(_surface(w, names) for w in phrase)
                ranked.append((-shared, -len(phrase), rank, surface, stems))
    ranked.sort(key=lambda r: r[:4])
    if not ranked:
        return []
    _, _, first_rank, first, first_stems = ranked[0]
    # The second phrase comes from another title (one title alone may give two) and repeats no
    # word of the first, so "X and Y" names two things.
    second = next(
        (surface for _, _, rank, surface, stems in ranked[1:]
         if (rank != first_rank or len(titles) == 1) and not stems & first_stems),
        None,
    )
    return [first] if second is None else [first, second]


def _opening(titles: Sequence[str], names: frozenset[str], index: int) -> str:
    """The paragraph's first sentence: cites nothing, says only what the titles name."""
    terms = _theme_terms(titles, names)
    if not terms:
        return _NO_TERMS_OPENER
    joined = " and ".join(terms)
    if len(titles) == 1:
        return _SINGLE_OPENER.format(terms=joined)
    return _THEME_OPENERS[index % len(_THEME_OPENERS)].format(terms=joined)


# --- the draft ---------------------------------------------------------------------------------


def write(
    source_text: str,
    papers: Sequence[Paper],
    mode: Literal["related_work", "answer"] = "related_work",
    max_paragraphs: int = 0,
    sentences_per_paper: int = 2,
) -> Draft:
    """A draft citing every paper once per quoted sentence, one paragraph per theme.

    `papers` carry their keys (papers.with_keys). Papers are put in id order before anything
    else, so the draft depends on the set of papers, not on how the list was ordered.
    """
    papers = sorted(papers, key=lambda p: p.id)
    if not papers:
        return Draft(text="", paragraphs=0, note=NOTE)
    relevance = _relevance(source_text, papers)
    quotes = [excerpts(source_text, p, k=sentences_per_paper) for p in papers]
    unit = _theme_vectors(papers)
    limit = max_paragraphs if max_paragraphs > 0 else math.ceil(len(papers) / 2)
    groups = _merge_small(_clusters(unit, limit), unit, [max(len(q), 1) for q in quotes],
                          relevance)
    for group in groups:
        group.sort(key=lambda i: (-relevance[i], papers[i].id))
    groups.sort(key=lambda g: (-relevance[g[0]], papers[g[0]].id))

    names = _names_in([source_text] + [p.abstract for p in papers])
    paragraphs = []
    used = 0  # connectives used so far: the next one is CONNECTIVES[used % len(CONNECTIVES)]
    for index, group in enumerate(groups):
        sentences = [ANSWER_OPENER] if mode == "answer" and index == 0 else []
        sentences.append(_opening([papers[i].title for i in group], names, index))
        for position, i in enumerate(group):
            cited = _cited_sentences(papers[i], quotes[i])
            if position > 0:
                connective = CONNECTIVES[used % len(CONNECTIVES)]
                joined = _with_connective(cited[0], connective, papers[i])
                if joined is not None:
                    cited[0] = joined
                    used += 1
            sentences += cited
        paragraphs.append(" ".join(sentences))
    return Draft(text="\n\n".join(paragraphs), paragraphs=len(paragraphs), note=NOTE)


def _cited_sentences(paper: Paper, quotes: list[Excerpt]) -> list[str]:
    if not quotes:
        return [mention(paper)]
    return [cite(rewrite(q.text, paper, lead=j == 0), paper.key) for j, q in enumerate(quotes)]
