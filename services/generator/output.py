"""A model's raw text, as it streams, -> rendered deltas safe to show.

Raw text is held back until a point where no citation can be open (the end of a line, or for a
long line the end of a sentence outside brackets), then that piece goes through the resolver, so
a client never sees a raw key or an unresolved citation. Besides citations the filter drops what
the pipeline provides itself: a heading the model puts first ("## Related Work") and a reference
list it appends ("References", "Bibliography", ...), every entry of which is counted as removed.
The first characters are checked for a refusal before anything is shown.
"""

from __future__ import annotations

import re

from services.generator.citations import CitationResolver, Reason, Removed
from services.generator.llm import REFUSAL_PROBE_CHARS, FaultKind, LlmFault, is_refusal

_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:\d+\.?\s*)?(?:related works?|answer)\s*:?\s*(?:\*\*|__)?\s*$",
    re.IGNORECASE,
)
_REFERENCE_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:references?|bibliography|works cited|reference list|"
    r"citations|sources|cited (?:papers|works))\s*:?\s*(?:\*\*|__)?\s*$",
    re.IGNORECASE,
)
# A long line is cut at a sentence end; "et al." and similar are not ends.
_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)(?<!\bcf)(?<!\bvs)\.\s+(?=[A-Z])")
_LONG_LINE_CHARS = 400
_SHOWN_RAW_CHARS = 200
# A verbatim run of the source this long in the answer is an echo, not a quotation.
ECHO_CHARS = 150
MIN_ECHO_CHARS = 60


def _balanced(text: str) -> bool:
    return text.count("[") == text.count("]") and text.count("(") == text.count(")")


class OutputFilter:
    def __init__(self, resolver: CitationResolver):
        self.resolver = resolver
        self.raw = ""
        self._buffer = ""
        self._at_line_start = True
        self._seen_text = False
        self._in_references = False
        self._checked_refusal = False
        self.text = ""

    def feed(self, delta: str) -> list[str]:
        """Rendered deltas that became safe with this raw delta (maybe none)."""
        self.raw += delta
        self._buffer += delta
        if not self._checked_refusal:
            if len(self._buffer.strip()) < REFUSAL_PROBE_CHARS:
                return []
            self._check_refusal()
        return self._drain(final=False)

    def finish(self) -> list[str]:
        if not self._checked_refusal:
            self._check_refusal()
        out = self._drain(final=True)
        if not self.text.strip():
            raise LlmFault(FaultKind.EMPTY, "the answer had no text besides headings or references")
        return out

    def _check_refusal(self) -> None:
        self._checked_refusal = True
        if is_refusal(self._buffer):
            raise LlmFault(FaultKind.REFUSAL, self._buffer.strip()[:160])

    def _drain(self, final: bool) -> list[str]:
        out: list[str] = []
        while self._buffer:
            newline = self._buffer.find("\n")
            if newline >= 0:
                piece, self._buffer = self._buffer[:newline + 1], self._buffer[newline + 1:]
            elif final:
                piece, self._buffer = self._buffer, ""
            elif len(self._buffer) > _LONG_LINE_CHARS and (cut := self._sentence_cut()):
                piece, self._buffer = self._buffer[:cut], self._buffer[cut:]
            else:
                break
            rendered = self._piece(piece, complete_line=piece.endswith("\n") or final)
            if rendered:
                out.append(rendered)
        if final and out:
            out[-1] = out[-1].rstrip()
            if not out[-1]:
                out.pop()
        self.text += "".join(out)
        return out

    def _sentence_cut(self) -> int:
        cut = 0
        for match in _SENTENCE_END.finditer(self._buffer):
            if _balanced(self._buffer[:match.end()]):
                cut = match.end()
        return cut

    def _piece(self, piece: str, complete_line: bool) -> str:
        line_start, self._at_line_start = self._at_line_start, complete_line
        if self._in_references:
            if piece.strip():
                self._drop_reference(piece)
            return ""
        if line_start and complete_line:
            if _REFERENCE_HEADING.match(piece):
                self._in_references = True
                return ""
            if not self._seen_text and (not piece.strip() or _HEADING.match(piece)):
                return ""
        if piece.strip():
            self._seen_text = True
        return self.resolver.render(piece)

    def check_echo(self, source: str, papers) -> None:
        """LlmFault when the answer repeats its prompt instead of writing: a long verbatim run of
        the source text, or a paper block as the prompt shows it (`[key] "Title"`). Small models
        do this; the citations would resolve, but the text is not a section."""
        raw = " ".join(self.raw.split())
        flat = " ".join(source.split())
        # A short source (a question) counts as repeated only when all of it is.
        size = min(ECHO_CHARS, len(flat))
        if size >= MIN_ECHO_CHARS:
            for start in range(0, len(flat) - size + 1, max(1, size // 3)):
                if flat[start:start + size] in raw:
                    raise LlmFault(FaultKind.MALFORMED, "the answer repeats the source text")
        for paper in papers:
            if f'[{paper.key}] "{paper.title}"' in raw:
                raise LlmFault(FaultKind.MALFORMED, "the answer repeats the prompt's paper list")

    def _drop_reference(self, line: str) -> None:
        self.resolver.removed.append(Removed(line.strip()[:_SHOWN_RAW_CHARS], Reason.REFERENCE_LIST))
