"""What extraction returns, and why a PDF cannot be read: shared by extraction, the service and the
`citeweave pages` command."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class DropReason(str, Enum):
    REFERENCES = "references"
    APPENDIX = "appendix"
    ACKNOWLEDGEMENTS = "acknowledgements"
    SUPPLEMENTARY = "supplementary"
    EMPTY = "empty"


class Problem(str, Enum):
    """Why a PDF gives no usable text. The service maps each to a FallbackCause (FetchPaper) or
    INVALID_ARGUMENT (ExtractPdf)."""

    NOT_FOUND = "not_found"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    NOT_PDF = "not_pdf"
    ENCRYPTED = "encrypted"
    TOO_LARGE = "too_large"
    TOO_MANY_PAGES = "too_many_pages"
    NO_TEXT = "no_text"
    UNREADABLE = "unreadable"


class PdfProblem(Exception):
    """A PDF that cannot be had or read, with a message a person can act on."""

    def __init__(self, problem: Problem, message: str):
        super().__init__(message)
        self.problem = problem
        self.message = message

    def __reduce__(self):
        # Raised in an extraction worker process and re-raised in the service: pickle must pass
        # both arguments back (the default passes only self.args, the message).
        return type(self), (self.problem, self.message)


@dataclass(frozen=True)
class KeptPage:
    number: int  # 1-based
    text: str
    partial: bool = False  # only the text before a dropped part's heading was kept


@dataclass(frozen=True)
class DroppedPart:
    number: int  # 1-based page the part starts on or continues over
    reason: DropReason
    heading: str  # the heading that started the part, as printed; "" for EMPTY
    chars: int


@dataclass(frozen=True)
class Extraction:
    pages: list[KeptPage]
    dropped: list[DroppedPart]
    page_count: int
    title: str = ""
    extract_ms: float = 0.0

    def summary(self) -> dict:
        """The `citeweave pages --json` shape (1-based pages; a page kept in part is in both)."""
        return {
            "kept": [{"page": p.number, "text_chars": len(p.text)} for p in self.pages],
            "dropped": [{"page": d.number, "reason": d.reason.value} for d in self.dropped],
        }
