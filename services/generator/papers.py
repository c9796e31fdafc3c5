"""The shortlisted papers as the generator sees them, their citation keys and author names.

Every name and year printed in a citation comes from here, that is from the corpus record, never
from a model. A paper's key is what the LLM sees and writes (`[smith2024graph]`) and also its
BibTeX key. Keys depend only on the paper's own record and on the other papers of the same
request (collisions get a, b, ... in corpus-id order), never on list positions, so reordering a
shortlist never moves a citation to another paper.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from services.common.corpus import paper_link

# Name suffixes that are not surnames: "Martin Luther King Jr." -> King.
_SUFFIXES = {"jr", "jr.", "sr", "sr.", "ii", "iii", "iv"}
_KEY_STOP_WORDS = {
    "a", "an", "the", "on", "of", "for", "in", "to", "and", "with", "via", "towards", "toward",
    "is", "are", "from", "by", "at", "as", "do", "does", "can", "what", "how", "why", "when",
}


@dataclass(frozen=True)
class Page:
    number: int
    text: str


@dataclass(frozen=True)
class Paper:
    """One shortlisted paper. `key` is set by `with_keys`."""

    id: str
    title: str
    abstract: str
    authors: tuple[str, ...] = ()
    year: int = 0
    url: str = ""
    categories: tuple[str, ...] = ()
    pages: tuple[Page, ...] = ()
    summary: str = ""
    relevance: float = 0.0
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)
    key: str = ""

    @property
    def link(self) -> str:
        return paper_link(self.id, self.url)


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def surname(author: str) -> str:
    """The family name of "First Middle Last" (the corpus form), suffixes skipped."""
    parts = author.replace(",", " ").split()
    while len(parts) > 1 and parts[-1].lower() in _SUFFIXES:
        parts.pop()
    return parts[-1] if parts else ""


def attribution(paper: Paper) -> str:
    """How prose names the authors: "Smith", "Smith and Lee", "Smith et al."."""
    names = [surname(a) for a in paper.authors if surname(a)]
    if not names:
        return f"“{paper.title}”" if paper.title else "One study"
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} and {names[1]}"
    return f"{names[0]} et al."


def _base_key(paper: Paper) -> str:
    name = re.sub(r"[^a-z]", "", _ascii(surname(paper.authors[0]) if paper.authors else "").lower())
    words = [re.sub(r"[^a-z0-9]", "", w) for w in _ascii(paper.title).lower().split()]
    word = next((w for w in words if w and w not in _KEY_STOP_WORDS), "")
    year = str(paper.year) if paper.year else ""
    return f"{name or 'anon'}{year}{word[:20]}"


def assign_keys(papers: Iterable[Paper]) -> dict[str, str]:
    """corpus id -> key, unique among `papers`; independent of their order."""
    by_base: dict[str, list[str]] = defaultdict(list)
    for paper in papers:
        by_base[_base_key(paper)].append(paper.id)
    keys: dict[str, str] = {}
    for base, ids in by_base.items():
        ids = sorted(set(ids))
        if len(ids) == 1:
            keys[ids[0]] = base
            continue
        for i, paper_id in enumerate(ids):
            keys[paper_id] = base + letter_suffix(i)
    return keys


def letter_suffix(i: int) -> str:
    """a, b, ..., z, aa, ab, ... for i = 0, 1, ..."""
    letters = ""
    i += 1
    while i:
        i, rest = divmod(i - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def with_keys(papers: Sequence[Paper]) -> list[Paper]:
    keys = assign_keys(papers)
    return [replace(p, key=keys[p.id]) for p in papers]
