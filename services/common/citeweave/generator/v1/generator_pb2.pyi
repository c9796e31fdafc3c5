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
    __slots__ = ("source_text", "paper", "pages", "backend")
    SOURCE_TEXT_FIELD_NUMBER: _ClassVar[int]
    PAPER_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    source_text: str
    paper: SourcePaper
    pages: _containers.RepeatedCompositeFieldContainer[PageText]
    backend: Backend
    def __init__(self, source_text: _Optional[str] = ..., paper: _Optional[_Union[SourcePaper, _Mapping]] = ..., pages: _Optional[_Iterable[_Union[PageText, _Mapping]]] = ..., backend: _Optional[_Union[Backend, str]] = ...) -> None: ...

class SummarizeResponse(_message.Message):
    __slots__ = ("paper_id", "summary", "usage", "backend")
    PAPER_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    paper_id: str
    summary: str
    usage: TokenUsage
    backend: Backend
    def __init__(self, paper_id: _Optional[str] = ..., summary: _Optional[str] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., backend: _Optional[_Union[Backend, str]] = ...) -> None: ...

class PaperSummary(_message.Message):
    __slots__ = ("paper", "summary", "vector")
    PAPER_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    paper: SourcePaper
    summary: str
    vector: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, paper: _Optional[_Union[SourcePaper, _Mapping]] = ..., summary: _Optional[str] = ..., vector: _Optional[_Iterable[float]] = ...) -> None: ...

class SynthesizeRequest(_message.Message):
    __slots__ = ("source_text", "mode", "summaries", "citation_style", "backend")
    SOURCE_TEXT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    CITATION_STYLE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    source_text: str
    mode: Mode
    summaries: _containers.RepeatedCompositeFieldContainer[PaperSummary]
    citation_style: CitationStyle
    backend: Backend
    def __init__(self, source_text: _Optional[str] = ..., mode: _Optional[_Union[Mode, str]] = ..., summaries: _Optional[_Iterable[_Union[PaperSummary, _Mapping]]] = ..., citation_style: _Optional[_Union[CitationStyle, str]] = ..., backend: _Optional[_Union[Backend, str]] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("paper_id", "marker")
    PAPER_ID_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    paper_id: str
    marker: str
    def __init__(self, paper_id: _Optional[str] = ..., marker: _Optional[str] = ...) -> None: ...

class Reference(_message.Message):
    __slots__ = ("paper_id", "marker", "formatted", "url")
    PAPER_ID_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    FORMATTED_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    paper_id: str
    marker: str
    formatted: str
    url: str
    def __init__(self, paper_id: _Optional[str] = ..., marker: _Optional[str] = ..., formatted: _Optional[str] = ..., url: _Optional[str] = ...) -> None: ...

class RemovedCitation(_message.Message):
    __slots__ = ("raw", "reason")
    RAW_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    raw: str
    reason: str
    def __init__(self, raw: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SynthesisReport(_message.Message):
    __slots__ = ("papers_cited", "papers_shortlisted", "removed_citations", "usage", "backend", "note")
    PAPERS_CITED_FIELD_NUMBER: _ClassVar[int]
    PAPERS_SHORTLISTED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_CITATIONS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    papers_cited: int
    papers_shortlisted: int
    removed_citations: _containers.RepeatedCompositeFieldContainer[RemovedCitation]
    usage: TokenUsage
    backend: Backend
    note: str
    def __init__(self, papers_cited: _Optional[int] = ..., papers_shortlisted: _Optional[int] = ..., removed_citations: _Optional[_Iterable[_Union[RemovedCitation, _Mapping]]] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., backend: _Optional[_Union[Backend, str]] = ..., note: _Optional[str] = ...) -> None: ...

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

class SynthesizeResponse(_message.Message):
    __slots__ = ("text_delta", "result")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    text_delta: str
    result: SynthesisResult
    def __init__(self, text_delta: _Optional[str] = ..., result: _Optional[_Union[SynthesisResult, _Mapping]] = ...) -> None: ...
