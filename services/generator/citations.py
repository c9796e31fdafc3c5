"""Citation integrity: what a writer (LLM or extractive) put in the text -> resolved, rendered
citations of shortlisted papers; everything else removed and counted.

Writers cite by key, `[smith2024graph]` or `[smith2024graph; lee2023deep]`. The resolver reads
that and every other form a model tends to write anyway, and keeps a citation only when it names a
shortlisted paper without doubt:

- a key of the shortlist (case-insensitive; `@key`, `\\cite{key}`, `(key)` too) or a shortlisted
  corpus id (`[2401.01234]`, `arXiv:2401.01234v2`);
- an author-year citation, parenthetical or narrative (`(Smith et al., 2024)`, `Smith et al.
  (2024)`), whose first-author surname *and* year match exactly one shortlisted paper: repaired to
  that paper and counted as repaired.

Removed, with the reason in words: unknown keys, numbers (`[3]`: the writer was never given
numbers), corpus ids outside the shortlist, author-year citations of other papers or with a year
the corpus record does not have, and years in parentheses that belong to no resolved citation
(`“Some Title” (2031)`: every year printed comes from the corpus record). Markers are rendered in
the requested style with names and years from the corpus record.

The resolver works segment by segment, so a stream can be rendered as it arrives; numbering is
by first citation and stable across segments.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from services.common.corpus import is_arxiv_id
from services.generator.papers import Paper, attribution, letter_suffix, surname


class Style(str, Enum):
    NUMERIC = "numeric"
    AUTHOR_YEAR = "author-year"


class Reason:
    UNKNOWN_KEY = "unknown key"
    NUMBERED = "numbered citation: the writer was given keys, not numbers"
    NOT_IN_SHORTLIST = "not in the shortlist"
    YEAR_MISMATCH = "year does not match the corpus record"
    AMBIGUOUS = "matches more than one shortlisted paper"
    STRAY_YEAR = "year written by the model, not taken from a corpus record"
    REFERENCE_LIST = "reference list written by the model (references come from the corpus)"


@dataclass(frozen=True)
class CitationSpan:
    paper_id: str
    marker: str
    start: int
    end: int


@dataclass(frozen=True)
class Removed:
    raw: str
    reason: str


@dataclass(frozen=True)
class Reference:
    paper_id: str
    key: str
    marker: str
    formatted: str
    url: str


_YEAR = r"(?:19|20)\d\d[a-z]?"
_NAME = r"[A-Z][\w'’\-]+(?:\s+(?:van|von|de|der|da|di|le|la)\s+[A-Z][\w'’\-]+)?"
_AUTHORS = rf"{_NAME}(?:\s+et\s+al\.?|\s+(?:and|&)\s+{_NAME})?"
_AUTHOR_YEAR_ITEM = re.compile(rf"^\s*(?P<authors>{_AUTHORS}),?\s+(?P<year>{_YEAR})\s*$")
_ARXIV_ID = r"(?:\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?"
_TOKEN = re.compile(r"^@?[A-Za-z0-9][\w.:/\-+]*$")

_CONSTRUCTS = (
    r"(?P<cite>\\cite[pt]?\*?\{(?P<cite_body>[^{}\n]{1,400})\})"
    r"|(?P<brackets>\[(?P<bracket_body>[^\[\]\n]{1,400})\](?:\s*,?\s*\[[^\[\]\n]{1,400}\])*)"
    rf"|(?P<narrative>(?P<n_authors>{_AUTHORS})\s*\((?P<n_year>{_YEAR})\))"
    r"|(?P<parens>\((?P<paren_body>[^()\n]{1,400})\))"
    rf"|(?P<bare_id>(?<![\w./])arXiv:\s*{_ARXIV_ID}(?!\w))"
)
_BRACKET = re.compile(r"\[([^\[\]\n]{1,400})\]")


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()


def _first_surname(authors_text: str) -> str:
    first = re.split(r"\s+(?:et\s+al\.?|and|&)\b", authors_text.strip())[0]
    return _fold(first.split()[-1]) if first.split() else ""


class CitationResolver:
    """Resolves and renders citations segment by segment for one shortlist and style."""

    def __init__(self, papers: Sequence[Paper], style: Style = Style.NUMERIC):
        self.style = style
        self.papers = list(papers)
        self._by_key = {p.key.lower(): p for p in self.papers if p.key}
        self._by_id = {p.id.lower(): p for p in self.papers}
        self._by_surname: dict[str, list[Paper]] = defaultdict(list)
        for paper in self.papers:
            if paper.authors:
                self._by_surname[_fold(surname(paper.authors[0]))].append(paper)
        self._year_labels = _year_labels(self.papers)
        # A key written without brackets is still a citation of that paper (keys are distinctive).
        keys = sorted((re.escape(k) for k in self._by_key), key=len, reverse=True)
        bare_keys = rf"|(?P<bare_key>\b(?:{'|'.join(keys)})\b)" if keys else ""
        self._construct = re.compile(_CONSTRUCTS + bare_keys)
        self.numbers: dict[str, int] = {}
        self.citations: list[CitationSpan] = []
        self.removed: list[Removed] = []
        self.repaired = 0
        self._emitted = 0

    # --- resolution ---------------------------------------------------------------------------

    def _token(self, raw: str) -> Paper | Removed:
        token = raw.strip().strip("'\"`").lstrip("@").strip()
        lowered = token.lower()
        if lowered in self._by_key:
            return self._by_key[lowered]
        bare_id = re.sub(r"^arxiv:\s*", "", lowered)
        unversioned = re.sub(r"v\d+$", "", bare_id)
        for candidate in (bare_id, unversioned):
            if candidate in self._by_id:
                return self._by_id[candidate]
        if re.fullmatch(r"\d+(?:\s*[-–]\s*\d+)?", token):
            return Removed(raw.strip(), Reason.NUMBERED)
        if is_arxiv_id(unversioned):
            return Removed(raw.strip(), Reason.NOT_IN_SHORTLIST)
        return Removed(raw.strip(), Reason.UNKNOWN_KEY)

    def _author_year(self, authors_text: str, year: str, raw: str) -> Paper | Removed:
        candidates = self._by_surname.get(_first_surname(authors_text), [])
        if not candidates:
            return Removed(raw, Reason.NOT_IN_SHORTLIST)
        same_year = [p for p in candidates if str(p.year) == year[:4]]
        if not same_year:
            return Removed(raw, Reason.YEAR_MISMATCH)
        if len(same_year) > 1:
            labelled = [p for p in same_year if self._year_labels[p.id] == year]
            if len(labelled) != 1:
                return Removed(raw, Reason.AMBIGUOUS)
            same_year = labelled
        self.repaired += 1
        return same_year[0]

    def _group(self, body: str, raw: str) -> list[Paper | Removed] | None:
        """The items of a bracket/cite/paren body, or None when it is not a citation."""
        # "Smith et al., 2024; Lee, 2023": the comma between name and year is not a separator.
        author_items = [part for part in body.split(";") if part.strip()]
        parsed = [_AUTHOR_YEAR_ITEM.match(item) for item in author_items]
        if author_items and all(parsed):
            return [
                self._author_year(m["authors"], m["year"], item.strip())
                for m, item in zip(parsed, author_items)
            ]
        items = [part for part in re.split(r"[;,]", body) if part.strip()]
        if items and all(_TOKEN.match(item.strip()) for item in items):
            return [self._token(item) for item in items]
        # "[smith2024graph, Table 2]": a shortlisted key makes it a citation; the rest is dropped.
        resolved = [self._token(item) for item in items if _TOKEN.match(item.strip())]
        if any(isinstance(r, Paper) for r in resolved):
            return resolved + [
                Removed(item.strip(), Reason.UNKNOWN_KEY)
                for item in items if not _TOKEN.match(item.strip())
            ]
        return None

    def _paren_group(self, body: str, raw: str) -> list[Paper | Removed] | None:
        if re.fullmatch(rf"\s*{_YEAR}\s*", body):
            return [Removed(raw, Reason.STRAY_YEAR)]
        author_items = [part for part in body.split(";") if part.strip()]
        if author_items and all(_AUTHOR_YEAR_ITEM.match(item) for item in author_items):
            return self._group(body, raw)
        items = [part for part in re.split(r"[;,]", body) if part.strip()]
        # Parentheses hold prose far more often than citations: only exact keys/ids count.
        if items and all(_TOKEN.match(i.strip()) for i in items):
            resolved = [self._token(i) for i in items]
            if all(isinstance(r, Paper) for r in resolved) or any(
                isinstance(r, Removed) and r.reason == Reason.NOT_IN_SHORTLIST for r in resolved
            ):
                return resolved
            return None
        return self._group(body, raw)

    # --- rendering ----------------------------------------------------------------------------

    def _number(self, paper: Paper) -> int:
        return self.numbers.setdefault(paper.id, len(self.numbers) + 1)

    def year_label(self, paper: Paper) -> str:
        return self._year_labels[paper.id]

    def _marker(self, papers: list[Paper]) -> str:
        if self.style is Style.NUMERIC:
            numbers = sorted({self._number(p) for p in papers})
            return "[" + ", ".join(str(n) for n in numbers) + "]"
        for paper in papers:
            self._number(paper)
        return "(" + "; ".join(f"{attribution(p)}, {self.year_label(p)}" for p in papers) + ")"

    def _narrative(self, paper: Paper) -> str:
        self._number(paper)
        if self.style is Style.NUMERIC:
            return f"{attribution(paper)} [{self.numbers[paper.id]}]"
        return f"{attribution(paper)} ({self.year_label(paper)})"

    def _items(self, match: re.Match) -> tuple[list[Paper | Removed] | None, bool]:
        """(items, narrative) for one construct match; items None means: leave the text."""
        raw = match.group(0)
        if match["cite"]:
            return [self._token(t) for t in match["cite_body"].split(",") if t.strip()], False
        if match["brackets"]:
            items: list[Paper | Removed] = []
            for body in _BRACKET.findall(raw):
                group = self._group(body, f"[{body}]")
                if group is None:
                    return None, False
                items.extend(group)
            return items, False
        if match["narrative"]:
            return [self._author_year(match["n_authors"], match["n_year"], raw)], True
        if match["parens"]:
            return self._paren_group(match["paren_body"], raw), False
        if match["bare_key"]:
            return [self._token(match["bare_key"])], False
        token = self._token(match["bare_id"])
        if isinstance(token, Removed) and token.reason == Reason.UNKNOWN_KEY:
            return None, False
        return [token], False

    def render(self, segment: str) -> str:
        """Rendered text of the next raw segment; records citations and removals."""
        out: list[str] = []
        length = 0
        position = 0
        for match in self._construct.finditer(segment):
            items, narrative = self._items(match)
            if items is None:
                continue
            before = segment[position:match.start()]
            papers = _unique([i for i in items if isinstance(i, Paper)])
            self.removed.extend(i for i in items if isinstance(i, Removed))
            if papers:
                marker = self._narrative(papers[0]) if narrative else self._marker(papers)
                out.append(before)
                length += len(before)
                start = self._emitted + length
                for paper in papers:
                    self.citations.append(
                        CitationSpan(paper.id, marker, start, start + len(marker))
                    )
                out.append(marker)
                length += len(marker)
            elif narrative:
                # "Transformers (2031)": the words stay, the year the model wrote goes.
                kept = before + match["n_authors"]
                out.append(kept)
                length += len(kept)
            else:
                following = segment[match.end():match.end() + 1]
                if not following or following in ".,;:!?) \n":
                    before = before.rstrip(" ")
                out.append(before)
                length += len(before)
            position = match.end()
        tail = segment[position:]
        out.append(tail)
        text = "".join(out)
        self._emitted += len(text)
        return text

    # --- references ---------------------------------------------------------------------------

    def cited_papers(self) -> list[Paper]:
        """Cited papers in reference-list order: by number (numeric) or by name and year."""
        cited = [p for p in self.papers if p.id in self.numbers]
        if self.style is Style.NUMERIC:
            return sorted(cited, key=lambda p: self.numbers[p.id])
        return sorted(
            cited,
            key=lambda p: (_fold(surname(p.authors[0])) if p.authors else _fold(p.title),
                           self.year_label(p), p.key),
        )

    def references(self) -> list[Reference]:
        refs = []
        for paper in self.cited_papers():
            if self.style is Style.NUMERIC:
                # Numbers tell papers apart: the year needs no letter.
                marker, year = f"[{self.numbers[paper.id]}]", str(paper.year or "n.d.")
            else:
                year = self.year_label(paper)
                marker = f"({attribution(paper)}, {year})"
            refs.append(Reference(paper.id, paper.key, marker, format_reference(paper, year),
                                  paper.link))
        return refs

    def bibtex(self) -> str:
        return "\n".join(bibtex_entry(p) for p in self.cited_papers())


def _unique(papers: list[Paper]) -> list[Paper]:
    seen: set[str] = set()
    return [p for p in papers if not (p.id in seen or seen.add(p.id))]


def _year_labels(papers: Sequence[Paper]) -> dict[str, str]:
    """Year as printed: "2024", or "2024a"/"2024b" when attribution and year collide."""
    groups: dict[tuple[str, int], list[Paper]] = defaultdict(list)
    for paper in papers:
        groups[(attribution(paper), paper.year)].append(paper)
    labels = {}
    for (_, year), group in groups.items():
        shown = str(year) if year else "n.d."
        if len(group) == 1:
            labels[group[0].id] = shown
            continue
        for i, paper in enumerate(sorted(group, key=lambda p: p.key)):
            labels[paper.id] = f"{shown}{letter_suffix(i)}"
    return labels


# --- reference entries ------------------------------------------------------------------------

_MAX_APA_AUTHORS = 20


def _initials(given: str) -> str:
    parts = [p for p in re.split(r"[\s\-]+", given) if p and p[0].isalpha()]
    return " ".join(f"{p[0].upper()}." for p in parts)


def _split_name(author: str) -> tuple[str, str]:
    last = surname(author)
    given = author[: author.rfind(last)].strip() if last else ""
    return last, given


def _apa_author(author: str) -> str:
    last, given = _split_name(author)
    initials = _initials(given)
    return f"{last}, {initials}" if initials else last


def _apa_authors(authors: Sequence[str]) -> str:
    names = [_apa_author(a) for a in authors if a.strip()]
    if not names:
        return ""
    if len(names) == 1:
        return names[0]
    if len(names) > _MAX_APA_AUTHORS:
        # APA 7: the first 19, an ellipsis, the last.
        return ", ".join(names[:19]) + ", ... " + names[-1]
    return ", ".join(names[:-1]) + ", & " + names[-1]


def format_reference(paper: Paper, year_label: str) -> str:
    """APA-like: Authors (Year). Title. arXiv:ID. URL"""
    authors = _apa_authors(paper.authors)
    title = paper.title.rstrip(".")
    parts = [f"{authors} ({year_label})." if authors else f"{title}. ({year_label})."]
    if authors:
        parts.append(f"{title}.")
    if is_arxiv_id(paper.id):
        parts.append(f"arXiv:{paper.id}.")
    if paper.link:
        parts.append(paper.link)
    return " ".join(parts)


_BIBTEX_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_"}


def _bibtex_value(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    text = text.replace("{", "").replace("}", "")
    return "".join(_BIBTEX_ESCAPES.get(ch, ch) for ch in text)


def _bibtex_author(author: str) -> str:
    last, given = _split_name(author)
    return f"{last}, {given}" if given else last


def bibtex_entry(paper: Paper) -> str:
    fields = [("title", "{" + _bibtex_value(paper.title) + "}")]
    if paper.authors:
        fields.append(("author", " and ".join(_bibtex_value(_bibtex_author(a)) for a in paper.authors)))
    if paper.year:
        fields.append(("year", str(paper.year)))
    if is_arxiv_id(paper.id):
        fields += [("eprint", paper.id), ("archivePrefix", "arXiv")]
        if paper.categories:
            fields.append(("primaryClass", paper.categories[0]))
    if paper.link:
        fields.append(("url", paper.link))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@misc{{{paper.key},\n{body}\n}}\n"
