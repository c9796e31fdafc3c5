from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Backend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKEND_UNSPECIFIED: _ClassVar[Backend]
    BACKEND_OPENAI: _ClassVar[Backend]
    BACKEND_EXTRACTIVE: _ClassVar[Backend]

class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODE_UNSPECIFIED: _ClassVar[Mode]
    MODE_RELATED_WORK: _ClassVar[Mode]
    MODE_ANSWER: _ClassVar[Mode]

class CitationStyle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CITATION_STYLE_UNSPECIFIED: _ClassVar[CitationStyle]
    CITATION_STYLE_NUMERIC: _ClassVar[CitationStyle]
    CITATION_STYLE_AUTHOR_YEAR: _ClassVar[CitationStyle]
BACKEND_UNSPECIFIED: Backend
BACKEND_OPENAI: Backend
BACKEND_EXTRACTIVE: Backend
MODE_UNSPECIFIED: Mode
MODE_RELATED_WORK: Mode
MODE_ANSWER: Mode
CITATION_STYLE_UNSPECIFIED: CitationStyle
CITATION_STYLE_NUMERIC: CitationStyle
CITATION_STYLE_AUTHOR_YEAR: CitationStyle

class SourcePaper(_message.Message):
    __slots__ = ("id", "title", "abstract", "authors", "year", "url", "categories")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ABSTRACT_FIELD_NUMBER: _ClassVar[int]
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    YEAR_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    abstract: str
    authors: _containers.RepeatedScalarFieldContainer[str]
    year: int
    url: str
    categories: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., abstract: _Optional[str] = ..., authors: _Optional[_Iterable[str]] = ..., year: _Optional[int] = ..., url: _Optional[str] = ..., categories: _Optional[_Iterable[str]] = ...) -> None: ...

class PageText(_message.Message):
    __slots__ = ("number", "text")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    number: int
    text: str
    def __init__(self, number: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ...) -> None: ...

class SummarizeRequest(_message.Message):
    __slots__ = ("source_text", "paper", "pages", "backend", "mode")
    SOURCE_TEXT_FIELD_NUMBER: _ClassVar[int]
    PAPER_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    source_text: str
    paper: SourcePaper
    pages: _containers.RepeatedCompositeFieldContainer[PageText]
    backend: Backend
    mode: Mode
    def __init__(self, source_text: _Optional[str] = ..., paper: _Optional[_Union[SourcePaper, _Mapping]] = ..., pages: _Optional[_Iterable[_Union[PageText, _Mapping]]] = ..., backend: _Optional[_Union[Backend, str]] = ..., mode: _Optional[_Union[Mode, str]] = ...) -> None: ...

class Excerpt(_message.Message):
    __slots__ = ("text", "page", "relevance")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    text: str
    page: int
    relevance: float
    def __init__(self, text: _Optional[str] = ..., page: _Optional[int] = ..., relevance: _Optional[float] = ...) -> None: ...

class SummarizeResponse(_message.Message):
    __slots__ = ("paper_id", "summary", "usage", "backend", "fallback_reason", "excerpts")
    PAPER_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    EXCERPTS_FIELD_NUMBER: _ClassVar[int]
    paper_id: str
    summary: str
    usage: TokenUsage
    backend: Backend
    fallback_reason: str
    excerpts: _containers.RepeatedCompositeFieldContainer[Excerpt]
    def __init__(self, paper_id: _Optional[str] = ..., summary: _Optional[str] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., backend: _Optional[_Union[Backend, str]] = ..., fallback_reason: _Optional[str] = ..., excerpts: _Optional[_Iterable[_Union[Excerpt, _Mapping]]] = ...) -> None: ...

class PaperSummary(_message.Message):
    __slots__ = ("paper", "summary", "vector", "pages", "relevance")
    PAPER_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    paper: SourcePaper
    summary: str
    vector: _containers.RepeatedScalarFieldContainer[float]
    pages: _containers.RepeatedCompositeFieldContainer[PageText]
    relevance: float
    def __init__(self, paper: _Optional[_Union[SourcePaper, _Mapping]] = ..., summary: _Optional[str] = ..., vector: _Optional[_Iterable[float]] = ..., pages: _Optional[_Iterable[_Union[PageText, _Mapping]]] = ..., relevance: _Optional[float] = ...) -> None: ...

class SynthesizeRequest(_message.Message):
    __slots__ = ("source_text", "mode", "summaries", "citation_style", "backend", "max_paragraphs")
    SOURCE_TEXT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    CITATION_STYLE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MAX_PARAGRAPHS_FIELD_NUMBER: _ClassVar[int]
    source_text: str
    mode: Mode
    summaries: _containers.RepeatedCompositeFieldContainer[PaperSummary]
    citation_style: CitationStyle
    backend: Backend
    max_paragraphs: int
    def __init__(self, source_text: _Optional[str] = ..., mode: _Optional[_Union[Mode, str]] = ..., summaries: _Optional[_Iterable[_Union[PaperSummary, _Mapping]]] = ..., citation_style: _Optional[_Union[CitationStyle, str]] = ..., backend: _Optional[_Union[Backend, str]] = ..., max_paragraphs: _Optional[int] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("paper_id", "marker", "start", "end")
    PAPER_ID_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    paper_id: str
    marker: str
    start: int
    end: int
    def __init__(self, paper_id: _Optional[str] = ..., marker: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class Reference(_message.Message):
    __slots__ = ("paper_id", "marker", "formatted", "url", "key")
    PAPER_ID_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    FORMATTED_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    paper_id: str
    marker: str
    formatted: str
    url: str
    key: str
    def __init__(self, paper_id: _Optional[str] = ..., marker: _Optional[str] = ..., formatted: _Optional[str] = ..., url: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class RemovedCitation(_message.Message):
    __slots__ = ("raw", "reason")
    RAW_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    raw: str
    reason: str
    def __init__(self, raw: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SynthesisReport(_message.Message):
    __slots__ = ("papers_cited", "papers_shortlisted", "removed_citations", "usage", "backend", "note", "requested_backend", "fallback_reason", "uncited_paper_ids", "elapsed_ms", "citations_repaired")
    PAPERS_CITED_FIELD_NUMBER: _ClassVar[int]
    PAPERS_SHORTLISTED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_CITATIONS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BACKEND_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    UNCITED_PAPER_IDS_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_REPAIRED_FIELD_NUMBER: _ClassVar[int]
    papers_cited: int
    papers_shortlisted: int
    removed_citations: _containers.RepeatedCompositeFieldContainer[RemovedCitation]
    usage: TokenUsage
    backend: Backend
    note: str
    requested_backend: Backend
    fallback_reason: str
    uncited_paper_ids: _containers.RepeatedScalarFieldContainer[str]
    elapsed_ms: float
    citations_repaired: int
    def __init__(self, papers_cited: _Optional[int] = ..., papers_shortlisted: _Optional[int] = ..., removed_citations: _Optional[_Iterable[_Union[RemovedCitation, _Mapping]]] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., backend: _Optional[_Union[Backend, str]] = ..., note: _Optional[str] = ..., requested_backend: _Optional[_Union[Backend, str]] = ..., fallback_reason: _Optional[str] = ..., uncited_paper_ids: _Optional[_Iterable[str]] = ..., elapsed_ms: _Optional[float] = ..., citations_repaired: _Optional[int] = ...) -> None: ...

class SynthesisResult(_message.Message):
    __slots__ = ("text", "citations", "references", "bibtex", "report")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    BIBTEX_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    text: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    references: _containers.RepeatedCompositeFieldContainer[Reference]
    bibtex: str
    report: SynthesisReport
    def __init__(self, text: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., references: _Optional[_Iterable[_Union[Reference, _Mapping]]] = ..., bibtex: _Optional[str] = ..., report: _Optional[_Union[SynthesisReport, _Mapping]] = ...) -> None: ...

class TextReset(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class SynthesizeResponse(_message.Message):
    __slots__ = ("text_delta", "result", "reset")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    text_delta: str
    result: SynthesisResult
    reset: TextReset
    def __init__(self, text_delta: _Optional[str] = ..., result: _Optional[_Union[SynthesisResult, _Mapping]] = ..., reset: _Optional[_Union[TextReset, _Mapping]] = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("default_backend", "backends", "model", "max_concurrent_requests")
    DEFAULT_BACKEND_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    default_backend: Backend
    backends: _containers.RepeatedScalarFieldContainer[Backend]
    model: str
    max_concurrent_requests: int
    def __init__(self, default_backend: _Optional[_Union[Backend, str]] = ..., backends: _Optional[_Iterable[_Union[Backend, str]]] = ..., model: _Optional[str] = ..., max_concurrent_requests: _Optional[int] = ...) -> None: ...
