"""Sentence splitting shared by the evaluation metrics and the extractive writer.

Scientific prose breaks naive splitters: "et al.", "e.g.", "Fig. 3", decimals and bracketed
citations all contain periods that do not end a sentence. The metrics locate each citation in
its sentence, and the extractive writer quotes whole sentences, so both must cut alike.
"""

from __future__ import annotations

import re

# Lower-case, with their final period; matched only at a word start.
_ABBREVIATIONS = ("et al.", "e.g.", "i.e.", "fig.", "figs.", "cf.", "vs.", "eq.", "eqs.", "sec.")
_OPENERS = {"(": ")", "[": "]"}
# Sentence-final punctuation, then closing quotes/brackets, then whitespace. Decimals (3.5) never
# match: no whitespace follows their period.
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s+\S)")
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_NEXT_CHAR = re.compile(r"\s+(\S)")


def _mask_brackets(text: str) -> str:
    """Blanks the inside of balanced (...) and [...] so no boundary is found in a citation."""
    chars = list(text)
    stack: list[tuple[str, int]] = []
    for i, ch in enumerate(text):
        if ch in _OPENERS:
            stack.append((_OPENERS[ch], i))
        elif stack and ch == stack[-1][0]:
            _, opened = stack.pop()
            chars[opened + 1 : i] = "_" * (i - opened - 1)
    # Unclosed openers mask nothing: one stray "(" must not glue the rest of a text together.
    return "".join(chars)


def _ends_with_abbreviation(masked: str, end: int) -> bool:
    head = masked[max(end - 10, 0) : end].lower()  # longer than any abbreviation plus one char
    for abbr in _ABBREVIATIONS:
        if head.endswith(abbr):
            before = len(head) - len(abbr) - 1
            if before < 0 or not head[before].isalpha():
                return True
    return False


def _paragraph_sentence_spans(text: str, offset: int) -> list[tuple[int, int]]:
    masked = _mask_brackets(text)
    spans, start = [], 0
    for match in _BOUNDARY.finditer(masked):
        end = match.end()
        following = _NEXT_CHAR.match(masked, end).group(1)
        # A lower-case continuation is never a new sentence ("e.g. the", "approx. twice").
        if following.islower() or _ends_with_abbreviation(masked, match.start() + 1):
            continue
        spans.append((start, end))
        start = end
    spans.append((start, len(text)))
    return [_strip_span(text, s, e, offset) for s, e in spans if text[s:e].strip()]


def _strip_span(text: str, start: int, end: int, offset: int) -> tuple[int, int]:
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    trail = len(piece) - len(piece.rstrip())
    return offset + start + lead, offset + end - trail


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of `text`; a blank line always ends a sentence."""
    spans, start = [], 0
    for match in _PARAGRAPH.finditer(text):
        spans += _paragraph_sentence_spans(text[start : match.start()], start)
        start = match.end()
    spans += _paragraph_sentence_spans(text[start:], start)
    return spans


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, never split after "et al.", "e.g.", "i.e.", "Fig.", inside decimals
    or inside (...) and [...]."""
    return [text[s:e] for s, e in sentence_spans(text)]
