"""LLM-judge prompts for coverage, logic and relevance (1-5), from Select-Read-Write.

The wording is the paper's (Appendix C, Figure 11 "Prompt for Evaluation"), copied as printed,
its grammar included. Only the layout is ours: the paper's three data slots ("{The Json
information of all the cited papers.}", "{The abstract of the citing paper.}", "{Related Work
section to be evaluated}") become the named placeholders `{cited_papers}`, `{citing_abstract}`
and `{related_work}`, each on its own line. The templates use `str.format`, so the literal JSON
braces of the paper's examples are doubled. `check_judge_prompts` runs at import, so a broken
edit fails at start-up, not in the middle of an evaluation run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from services.common.templates import TemplateError, check_template, placeholders  # noqa: F401

JUDGE_SYSTEM_PROMPT = "You are a strict paper reviewer."

JUDGE_METRICS = ("coverage", "logic", "relevance")
JUDGE_PLACEHOLDERS = frozenset({"cited_papers", "citing_abstract", "related_work"})


def _instruction(metric: str) -> str:
    return (
        f"Please evaluate the '{metric}' of the Related Work section of papers based on the "
        "abstracts of all the cited papers.\n\nThe scoring criteria are as follows:\n"
    )


_COVERAGE_CRITERIA = """\
- Score 1: The 'Related Work' has limited coverage, only touching on a small portion of the topic \
and lacking discussion on key areas.
- Score 2: The 'Related Work' covers some parts of the topic but has noticeable omissions, with \
significant areas either underrepresented or missing.
- Score 3: The 'Related Work' is generally comprehensive in coverage but still misses a few key \
points that are not fully discussed.
- Score 4: The 'Related Work' covers most key areas of the topic comprehensively, with only very \
minor topics left out.
- Score 5: The 'Related Work' comprehensively covers all key and peripheral topics, providing \
detailed discussions and information.
"""

_LOGIC_CRITERIA = """\
- Score 1: The 'Related Work' lacks logic, with no clear connections between sentences, making \
it difficult to understand the content.
- Score 2: The 'Related Work' has weak logical flow with some content arranged in a disordered \
or unreasonable manner.
- Score 3: The 'Related Work' has a generally reasonable logical structure, with most content \
arranged orderly, though some links and transitions could be improved such as repeated \
explanation.
- Score 4: The 'Related Work' has good logical consistency, with content well arranged and \
natural transitions, only slightly rigid in a few parts.
- Score 5: The 'Related Work' is tightly structured and logically clear, with all content \
arranged most reasonably, and transitions between adjacent sentences smooth without redundancy.
"""

_RELEVANCE_CRITERIA = """\
- Score 1: The content is outdated or unrelated to the field it purports to review, offering no \
alignment with the topic.
- Score 2: The 'Related Work' is somewhat on topic but with several digressions; the core \
subject is evident but not consistently adhered to.
- Score 3: The 'Related Work' is generally on topic, despite a few unrelated details.
- Score 4: The 'Related Work' is mostly on topic and focused; the narrative has a consistent \
relevance to the core subject with infrequent digressions.
- Score 5: The 'Related Work' is exceptionally focused and entirely on topic; the article is \
tightly centered on the subject, with every piece of information contributing to a \
comprehensive understanding of the topic.
"""

_INPUTS = """
I will list the abstracts of all cited papers in JSON format like {{'id': id of the cited paper, \
'abstract': abstract of the cited paper}}:
{cited_papers}
The content of the 'abstract' section of the current paper is:
{citing_abstract}
And the content of the 'Related Work' section to be evaluated is:
{related_work}

Provide your reasoning for the score first, and then give the final score. Use JSON format for \
your response, like: {{"reason": "The reason for your score", "score": "The final given \
score"}}. Be strict to the format and do not answer any other extra content!"""

COVERAGE_PROMPT = _instruction("Coverage") + _COVERAGE_CRITERIA + _INPUTS
LOGIC_PROMPT = _instruction("Logic") + _LOGIC_CRITERIA + _INPUTS
RELEVANCE_PROMPT = _instruction("Relevance") + _RELEVANCE_CRITERIA + _INPUTS

JUDGE_PROMPTS: Mapping[str, str] = {
    "coverage": COVERAGE_PROMPT,
    "logic": LOGIC_PROMPT,
    "relevance": RELEVANCE_PROMPT,
}


class JudgePromptError(TemplateError):
    """A judge prompt template whose placeholders are not the expected ones."""


class JudgeReplyError(ValueError):
    """A judge reply without a usable 1-5 score."""


def check_judge_prompts(
    prompts: Mapping[str, str] = JUDGE_PROMPTS,
    expected: frozenset[str] = JUDGE_PLACEHOLDERS,
) -> None:
    """Raises JudgePromptError unless every prompt has each expected placeholder exactly once."""
    if set(prompts) != set(JUDGE_METRICS):
        raise JudgePromptError(f"judge prompts for {sorted(prompts)}, need {list(JUDGE_METRICS)}")
    for metric, template in prompts.items():
        try:
            check_template(f"{metric} judge prompt", template, expected)
        except TemplateError as exc:
            raise JudgePromptError(str(exc)) from exc


def format_cited_papers(abstracts: Mapping[str, str]) -> str:
    """The cited papers as the JSON list the prompt announces: [{"id": ..., "abstract": ...}]."""
    papers = [{"id": corpus_id, "abstract": text} for corpus_id, text in abstracts.items()]
    return json.dumps(papers, ensure_ascii=False)


def render_judge_prompt(
    metric: str, *, cited_papers: str, citing_abstract: str, related_work: str
) -> str:
    """The user prompt for one metric; `cited_papers` comes from `format_cited_papers`."""
    if metric not in JUDGE_PROMPTS:
        raise KeyError(f"unknown judge metric {metric!r}, expected one of {list(JUDGE_METRICS)}")
    return JUDGE_PROMPTS[metric].format(
        cited_papers=cited_papers, citing_abstract=citing_abstract, related_work=related_work
    )


_SCORE_VALUE = re.compile(r"^\s*(\d+(?:\.0+)?)\s*(?:/\s*5)?\s*$")
# Fallback for replies that are not JSON: the last `score: N` / `"score": "N"` wins, since a
# reason written before the score may quote other numbers.
_SCORE_FIELD = re.compile(r"""["']?\bscore["']?\s*[:=]\s*["']?\s*(\d+(?:\.\d+)?)""", re.IGNORECASE)


def _score_from_value(value: object, reply: str) -> int:
    # bool is an int subclass: `"score": true` is no score.
    text = "" if isinstance(value, bool) else str(value)
    match = _SCORE_VALUE.match(text) if isinstance(value, int | float | str) else None
    score = int(float(match.group(1))) if match else None
    if score is None or not 1 <= score <= 5:
        raise JudgeReplyError(
            f"judge score {value!r} is not an integer from 1 to 5 in reply {reply[:200]!r}"
        )
    return score


def _json_object(reply: str) -> dict | None:
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        parsed = json.loads(reply[start : end + 1])
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def parse_judge_score(reply: str) -> int:
    """The 1-5 score of a judge reply such as `{"reason": "...", "score": "4"}`.

    Takes the JSON object in the reply (code fences and text around it are tolerated); when the
    reply is not JSON (single quotes, a truncated reason), the last `score: N` in it. Raises
    JudgeReplyError when there is no score or it is not an integer from 1 to 5.
    """
    parsed = _json_object(reply)
    if parsed is not None:
        if "score" not in parsed:
            raise JudgeReplyError(f"judge reply has no 'score' field: {reply[:200]!r}")
        return _score_from_value(parsed["score"], reply)
    found = _SCORE_FIELD.findall(reply)
    if not found:
        raise JudgeReplyError(f"judge reply has no score: {reply[:200]!r}")
    return _score_from_value(found[-1], reply)


check_judge_prompts()
