"""Every prompt the generator sends, in one place; `check_prompts` runs at start-up.

Structure from Citegeist (summarize each shortlisted paper against "my abstract" from its
abstract and relevant pages, then synthesize: group by theme, use every paper, cite inline, at
most ceil(breadth/2) paragraphs, no 2-3-sentence paragraphs) and the writer instructions of
Select-Read-Write (explain the relationships between papers instead of describing each in
isolation, combine several references in one sentence). Papers are shown under their citation
key, never a list number, and without authors or years, which the model must not write: names and
years in the output come from the corpus records.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.common.templates import check_template
from services.generator.papers import Paper

SUMMARY_SYSTEM = (
    "You are a careful research assistant. You summarize scientific papers faithfully and state "
    "only what the given text says."
)

SUMMARY_RELATED_WORK = """My abstract:
{source}

Abstract of the paper to cite, "{title}":
{abstract}

Relevant pages of the paper to cite:
{pages}

Summarize the paper to cite in three to five sentences for the related-work section of my paper: the problem it addresses, its method and its findings, and how it relates to my abstract. State only what its abstract and pages above say; add no facts, numbers, names or references that are not there. Write plain prose, without citations, lists or headings."""

SUMMARY_ANSWER = """My question:
{source}

Abstract of a paper, "{title}":
{abstract}

Relevant pages of the paper:
{pages}

Summarize in three to five sentences what this paper says that helps answer my question. State only what its abstract and pages above say; add no facts, numbers, names or references that are not there. Write plain prose, without citations, lists or headings."""

SYNTHESIS_SYSTEM = "You are a research worker with excellent paper writing skills."

SYNTHESIS_RELATED_WORK = """I am writing a paper and have written everything except the Related Work section. My abstract:
{source}

These are the {count} papers to cite. Each starts with its citation key in square brackets, then its title and a summary of what it says:

{papers}

Write the Related Work section of my paper.
- Group the papers by theme and order the themes. Explain the connections between the papers and how they relate to my work rather than describing each paper in isolation, and combine several references in one sentence where they share a point.
- Use every paper above. Cite inline with the key in square brackets exactly as given, for example {example_citation}. Cite nothing else: do not invent references, and do not write author names, years or a reference list.
- Write at most {max_paragraphs} paragraphs, and avoid paragraphs of only two or three sentences.
- Write plain prose with no heading."""

SYNTHESIS_ANSWER = """My question:
{source}

These are the {count} papers to draw on. Each starts with its citation key in square brackets, then its title and a summary of what it says:

{papers}

Answer my question using only what these papers say.
- Cite inline with the key in square brackets exactly as given, for example {example_citation}. Cite nothing else: do not invent references, and do not write author names, years or a reference list.
- Bring together what several papers say where they agree or differ, and say so plainly if the papers do not answer the question.
- Write at most {max_paragraphs} paragraphs of plain prose with no heading."""

SUMMARY_PLACEHOLDERS = ("source", "title", "abstract", "pages")
SYNTHESIS_PLACEHOLDERS = ("source", "count", "papers", "example_citation", "max_paragraphs")

PROMPTS = {
    "summary (related work)": (SUMMARY_RELATED_WORK, SUMMARY_PLACEHOLDERS),
    "summary (answer)": (SUMMARY_ANSWER, SUMMARY_PLACEHOLDERS),
    "synthesis (related work)": (SYNTHESIS_RELATED_WORK, SYNTHESIS_PLACEHOLDERS),
    "synthesis (answer)": (SYNTHESIS_ANSWER, SYNTHESIS_PLACEHOLDERS),
}

NO_PAGES = "(only the abstract is available)"


def check_prompts() -> None:
    for name, (template, expected) in PROMPTS.items():
        check_template(f"{name} prompt", template, expected)


def fit(texts: Sequence[str], max_chars: int) -> list[str]:
    """The texts cut so that together they have at most `max_chars` characters: short ones stay
    whole, long ones share what is left equally (cut at a word boundary, marked with …)."""
    if sum(len(t) for t in texts) <= max_chars:
        return list(texts)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    left, shares = max(0, max_chars), {}
    for position, i in enumerate(order):
        share = left // (len(order) - position)
        shares[i] = min(len(texts[i]), share)
        left -= shares[i]
    return [_cut(t, shares[i]) for i, t in enumerate(texts)]


def _cut(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    if chars <= 1:
        return ""
    cut = text[: chars - 1]
    space = cut.rfind(" ")
    if space > chars // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def summary_messages(
    template: str, source: str, paper: Paper, page_texts: Sequence[tuple[int, str]], max_chars: int
) -> list[dict]:
    """Chat messages for one summary; the pages get what `max_chars` leaves after the rest."""
    fixed = len(SUMMARY_SYSTEM) + len(template) + len(source) + len(paper.title) + len(paper.abstract)
    pages = fit([text for _, text in page_texts], max_chars - fixed)
    shown = "\n\n".join(
        f"[page {number}]\n{text}" for (number, _), text in zip(page_texts, pages) if text
    )
    user = template.format(
        source=source, title=paper.title, abstract=paper.abstract, pages=shown or NO_PAGES
    )
    return [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": user}]


def synthesis_messages(
    template: str, source: str, papers: Sequence[Paper], max_paragraphs: int, max_chars: int
) -> list[dict]:
    """Chat messages for the synthesis; summaries share what `max_chars` leaves after the rest."""
    heads = [f'[{p.key}] "{p.title}"\n' for p in papers]
    bodies = [p.summary or p.abstract for p in papers]
    fixed = len(SYNTHESIS_SYSTEM) + len(template) + len(source) + sum(len(h) + 2 for h in heads)
    fitted = fit(bodies, max_chars - fixed)
    blocks = "\n\n".join(head + body for head, body in zip(heads, fitted))
    keys = [p.key for p in papers]
    example = f"[{keys[0]}]" if len(keys) == 1 else f"[{keys[0]}] or [{keys[0]}; {keys[1]}]"
    user = template.format(
        source=source, count=len(papers), papers=blocks, example_citation=example,
        max_paragraphs=max_paragraphs,
    )
    return [{"role": "system", "content": SYNTHESIS_SYSTEM}, {"role": "user", "content": user}]
