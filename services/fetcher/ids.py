"""Paper ids: arXiv new-style (2401.01234v2), old-style (hep-th/9901001v1), or, when the fetcher
reads a local PDF directory, any corpus id that is safe as a file name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.common.corpus import ARXIV_NEW_STYLE, ARXIV_OLD_STYLE
from services.common.errors import InvalidArgument

_PREFIX = re.compile(r"^arxiv:", re.IGNORECASE)
_LOCAL = re.compile(r"^[A-Za-z0-9._\-/]+$")
LOCAL_ID_MAX_CHARS = 200

ARXIV_ID_HELP = "an arXiv id looks like 2401.01234, 2401.01234v2 or hep-th/9901001"


@dataclass(frozen=True)
class PaperId:
    """A checked id. `value` is what was asked for (an "arXiv:" prefix removed)."""

    value: str
    arxiv: bool
    base: str  # without version; the whole id for a non-arXiv id
    version: int | None = None

    @property
    def versioned(self) -> bool:
        """Names one immutable PDF. An unversioned arXiv id names the latest version, which can
        change; a local corpus id names whatever file is in the directory."""
        return self.arxiv and self.version is not None

    def with_version(self, version: int) -> "PaperId":
        return PaperId(f"{self.base}v{version}", True, self.base, version)

    @property
    def file_stem(self) -> str:
        return self.value.replace("/", "_")


def parse_arxiv(value: str) -> PaperId | None:
    """The arXiv id in value (an "arXiv:" prefix allowed), or None when it is not one."""
    value = _PREFIX.sub("", value.strip())
    for pattern in (ARXIV_NEW_STYLE, ARXIV_OLD_STYLE):
        match = pattern.match(value)
        if match:
            base = match.group(1)
            if pattern is ARXIV_NEW_STYLE and (len(base) == 10) != (base[:4] >= "1501"):
                return None  # 4-digit numbers until 1412, 5-digit ones since 1501
            version = int(match.group(2)) if match.group(2) else None
            return PaperId(value, True, base, version)
    return None


def parse_id(raw: str, local_ids: bool) -> PaperId:
    """The checked id of a request; INVALID_ARGUMENT saying what an id looks like otherwise.
    local_ids: a PDF directory is configured, so non-arXiv corpus ids are accepted."""
    if not raw.strip():
        raise InvalidArgument(f"id is empty; {ARXIV_ID_HELP}")
    arxiv_id = parse_arxiv(raw)
    if arxiv_id is not None:
        return arxiv_id
    shown = raw if len(raw) <= 80 else raw[:80] + "..."
    if not local_ids:
        raise InvalidArgument(
            f"id {shown!r} is not an arXiv id; {ARXIV_ID_HELP} (ids of other corpora are "
            "accepted when the fetcher reads PDFs from a directory: CITEWEAVE_FETCHER_PDF_DIR)"
        )
    if (
        len(raw) > LOCAL_ID_MAX_CHARS
        or not _LOCAL.match(raw)
        or ".." in raw
        or raw.startswith("/")
    ):
        raise InvalidArgument(
            f"id {shown!r} is neither an arXiv id ({ARXIV_ID_HELP}) nor a corpus id: those are "
            f"at most {LOCAL_ID_MAX_CHARS} letters, digits and . _ - /, with no '..' and no "
            "leading '/'"
        )
    return PaperId(raw, False, raw)
