from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SelectionRule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SELECTION_RULE_UNSPECIFIED: _ClassVar[SelectionRule]
    SELECTION_RULE_MMR: _ClassVar[SelectionRule]
    SELECTION_RULE_CITEGEIST_MIN: _ClassVar[SelectionRule]

class CitationStyle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CITATION_STYLE_UNSPECIFIED: _ClassVar[CitationStyle]
    CITATION_STYLE_NUMERIC: _ClassVar[CitationStyle]
    CITATION_STYLE_AUTHOR_YEAR: _ClassVar[CitationStyle]

class GeneratorBackend(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GENERATOR_BACKEND_UNSPECIFIED: _ClassVar[GeneratorBackend]
    GENERATOR_BACKEND_OPENAI: _ClassVar[GeneratorBackend]
    GENERATOR_BACKEND_EXTRACTIVE: _ClassVar[GeneratorBackend]

class Stage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_UNSPECIFIED: _ClassVar[Stage]
    STAGE_EMBEDDING: _ClassVar[Stage]
    STAGE_LONGLIST: _ClassVar[Stage]
    STAGE_FETCHING: _ClassVar[Stage]
    STAGE_PAGES: _ClassVar[Stage]
    STAGE_SHORTLIST: _ClassVar[Stage]
    STAGE_SUMMARIZING: _ClassVar[Stage]
    STAGE_WRITING: _ClassVar[Stage]
    STAGE_DONE: _ClassVar[Stage]
SELECTION_RULE_UNSPECIFIED: SelectionRule
SELECTION_RULE_MMR: SelectionRule
SELECTION_RULE_CITEGEIST_MIN: SelectionRule
CITATION_STYLE_UNSPECIFIED: CitationStyle
CITATION_STYLE_NUMERIC: CitationStyle
CITATION_STYLE_AUTHOR_YEAR: CitationStyle
GENERATOR_BACKEND_UNSPECIFIED: GeneratorBackend
GENERATOR_BACKEND_OPENAI: GeneratorBackend
GENERATOR_BACKEND_EXTRACTIVE: GeneratorBackend
STAGE_UNSPECIFIED: Stage
STAGE_EMBEDDING: Stage
STAGE_LONGLIST: Stage
STAGE_FETCHING: Stage
STAGE_PAGES: Stage
STAGE_SHORTLIST: Stage
STAGE_SUMMARIZING: Stage
STAGE_WRITING: Stage
STAGE_DONE: Stage

class Filters(_message.Message):
    __slots__ = ("categories", "topics", "date_from", "date_to")
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    DATE_FROM_FIELD_NUMBER: _ClassVar[int]
    DATE_TO_FIELD_NUMBER: _ClassVar[int]
    categories: _containers.RepeatedScalarFieldContainer[str]
    topics: _containers.RepeatedScalarFieldContainer[int]
    date_from: str
    date_to: str
    def __init__(self, categories: _Optional[_Iterable[str]] = ..., topics: _Optional[_Iterable[int]] = ..., date_from: _Optional[str] = ..., date_to: _Optional[str] = ...) -> None: ...

class RetrievalOptions(_message.Message):
    __slots__ = ("breadth", "depth", "diversity", "rule", "filters")
    BREADTH_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    DIVERSITY_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    breadth: int
    depth: int
    diversity: float
    rule: SelectionRule
    filters: Filters
    def __init__(self, breadth: _Optional[int] = ..., depth: _Optional[int] = ..., diversity: _Optional[float] = ..., rule: _Optional[_Union[SelectionRule, str]] = ..., filters: _Optional[_Union[Filters, _Mapping]] = ...) -> None: ...

class Paper(_message.Message):
    __slots__ = ("id", "title", "authors", "year", "url", "abstract", "categories")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    YEAR_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    ABSTRACT_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    authors: _containers.RepeatedScalarFieldContainer[str]
    year: int
    url: str
    abstract: str
    categories: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., authors: _Optional[_Iterable[str]] = ..., year: _Optional[int] = ..., url: _Optional[str] = ..., abstract: _Optional[str] = ..., categories: _Optional[_Iterable[str]] = ...) -> None: ...

class ChosenPage(_message.Message):
    __slots__ = ("number", "similarity", "reason")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    number: int
    similarity: float
    reason: str
    def __init__(self, number: _Optional[int] = ..., similarity: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class RankedPaper(_message.Message):
    __slots__ = ("paper", "score", "rank", "reason", "chosen_pages", "abstract_only", "fallback_reason", "abstract_similarity")
    PAPER_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_PAGES_FIELD_NUMBER: _ClassVar[int]
    ABSTRACT_ONLY_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    ABSTRACT_SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    paper: Paper
    score: float
    rank: int
    reason: str
    chosen_pages: _containers.RepeatedCompositeFieldContainer[ChosenPage]
    abstract_only: bool
    fallback_reason: str
    abstract_similarity: float
    def __init__(self, paper: _Optional[_Union[Paper, _Mapping]] = ..., score: _Optional[float] = ..., rank: _Optional[int] = ..., reason: _Optional[str] = ..., chosen_pages: _Optional[_Iterable[_Union[ChosenPage, _Mapping]]] = ..., abstract_only: _Optional[bool] = ..., fallback_reason: _Optional[str] = ..., abstract_similarity: _Optional[float] = ...) -> None: ...

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

class StageTiming(_message.Message):
    __slots__ = ("stage", "duration_ms")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    stage: Stage
    duration_ms: float
    def __init__(self, stage: _Optional[_Union[Stage, str]] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("stage", "percent", "message", "done", "total")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    stage: Stage
    percent: int
    message: str
    done: int
    total: int
    def __init__(self, stage: _Optional[_Union[Stage, str]] = ..., percent: _Optional[int] = ..., message: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class TextReset(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class GenerationReport(_message.Message):
    __slots__ = ("backend", "fallback_reason", "papers_cited", "papers_shortlisted", "citations_removed", "note")
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    PAPERS_CITED_FIELD_NUMBER: _ClassVar[int]
    PAPERS_SHORTLISTED_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    backend: str
    fallback_reason: str
    papers_cited: int
    papers_shortlisted: int
    citations_removed: int
    note: str
    def __init__(self, backend: _Optional[str] = ..., fallback_reason: _Optional[str] = ..., papers_cited: _Optional[int] = ..., papers_shortlisted: _Optional[int] = ..., citations_removed: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class GenerationResult(_message.Message):
    __slots__ = ("text", "references", "bibtex", "longlist", "shortlist", "timings", "warnings", "generation_error", "report", "input_kind", "input_title")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    BIBTEX_FIELD_NUMBER: _ClassVar[int]
    LONGLIST_FIELD_NUMBER: _ClassVar[int]
    SHORTLIST_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ERROR_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    INPUT_KIND_FIELD_NUMBER: _ClassVar[int]
    INPUT_TITLE_FIELD_NUMBER: _ClassVar[int]
    text: str
    references: _containers.RepeatedCompositeFieldContainer[Reference]
    bibtex: str
    longlist: _containers.RepeatedCompositeFieldContainer[RankedPaper]
    shortlist: _containers.RepeatedCompositeFieldContainer[RankedPaper]
    timings: _containers.RepeatedCompositeFieldContainer[StageTiming]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    generation_error: str
    report: GenerationReport
    input_kind: str
    input_title: str
    def __init__(self, text: _Optional[str] = ..., references: _Optional[_Iterable[_Union[Reference, _Mapping]]] = ..., bibtex: _Optional[str] = ..., longlist: _Optional[_Iterable[_Union[RankedPaper, _Mapping]]] = ..., shortlist: _Optional[_Iterable[_Union[RankedPaper, _Mapping]]] = ..., timings: _Optional[_Iterable[_Union[StageTiming, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ..., generation_error: _Optional[str] = ..., report: _Optional[_Union[GenerationReport, _Mapping]] = ..., input_kind: _Optional[str] = ..., input_title: _Optional[str] = ...) -> None: ...

class GenerateRelatedWorkRequest(_message.Message):
    __slots__ = ("abstract", "pdf", "options", "citation_style", "backend", "filename")
    ABSTRACT_FIELD_NUMBER: _ClassVar[int]
    PDF_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CITATION_STYLE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    abstract: str
    pdf: bytes
    options: RetrievalOptions
    citation_style: CitationStyle
    backend: GeneratorBackend
    filename: str
    def __init__(self, abstract: _Optional[str] = ..., pdf: _Optional[bytes] = ..., options: _Optional[_Union[RetrievalOptions, _Mapping]] = ..., citation_style: _Optional[_Union[CitationStyle, str]] = ..., backend: _Optional[_Union[GeneratorBackend, str]] = ..., filename: _Optional[str] = ...) -> None: ...

class GenerateRelatedWorkResponse(_message.Message):
    __slots__ = ("progress", "text_delta", "result", "reset")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    progress: Progress
    text_delta: str
    result: GenerationResult
    reset: TextReset
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., text_delta: _Optional[str] = ..., result: _Optional[_Union[GenerationResult, _Mapping]] = ..., reset: _Optional[_Union[TextReset, _Mapping]] = ...) -> None: ...

class AnswerRequest(_message.Message):
    __slots__ = ("question", "options", "citation_style", "backend")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CITATION_STYLE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    question: str
    options: RetrievalOptions
    citation_style: CitationStyle
    backend: GeneratorBackend
    def __init__(self, question: _Optional[str] = ..., options: _Optional[_Union[RetrievalOptions, _Mapping]] = ..., citation_style: _Optional[_Union[CitationStyle, str]] = ..., backend: _Optional[_Union[GeneratorBackend, str]] = ...) -> None: ...

class AnswerResponse(_message.Message):
    __slots__ = ("progress", "text_delta", "result", "reset")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    progress: Progress
    text_delta: str
    result: GenerationResult
    reset: TextReset
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., text_delta: _Optional[str] = ..., result: _Optional[_Union[GenerationResult, _Mapping]] = ..., reset: _Optional[_Union[TextReset, _Mapping]] = ...) -> None: ...

class SearchPapersRequest(_message.Message):
    __slots__ = ("abstract", "pdf", "options", "filename")
    ABSTRACT_FIELD_NUMBER: _ClassVar[int]
    PDF_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    abstract: str
    pdf: bytes
    options: RetrievalOptions
    filename: str
    def __init__(self, abstract: _Optional[str] = ..., pdf: _Optional[bytes] = ..., options: _Optional[_Union[RetrievalOptions, _Mapping]] = ..., filename: _Optional[str] = ...) -> None: ...

class SearchPapersResponse(_message.Message):
    __slots__ = ("longlist", "timings", "warnings")
    LONGLIST_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    longlist: _containers.RepeatedCompositeFieldContainer[RankedPaper]
    timings: _containers.RepeatedCompositeFieldContainer[StageTiming]
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, longlist: _Optional[_Iterable[_Union[RankedPaper, _Mapping]]] = ..., timings: _Optional[_Iterable[_Union[StageTiming, _Mapping]]] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class GetInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Range(_message.Message):
    __slots__ = ("min", "max", "default")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    min: float
    max: float
    default: float
    def __init__(self, min: _Optional[float] = ..., max: _Optional[float] = ..., default: _Optional[float] = ...) -> None: ...

class GetInfoResponse(_message.Message):
    __slots__ = ("breadth", "depth", "diversity", "max_abstract_chars", "max_question_chars", "max_pdf_bytes", "max_pdf_pages", "backends", "default_backend", "auth_required", "papers")
    BREADTH_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    DIVERSITY_FIELD_NUMBER: _ClassVar[int]
    MAX_ABSTRACT_CHARS_FIELD_NUMBER: _ClassVar[int]
    MAX_QUESTION_CHARS_FIELD_NUMBER: _ClassVar[int]
    MAX_PDF_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PDF_PAGES_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_BACKEND_FIELD_NUMBER: _ClassVar[int]
    AUTH_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    PAPERS_FIELD_NUMBER: _ClassVar[int]
    breadth: Range
    depth: Range
    diversity: Range
    max_abstract_chars: int
    max_question_chars: int
    max_pdf_bytes: int
    max_pdf_pages: int
    backends: _containers.RepeatedScalarFieldContainer[str]
    default_backend: str
    auth_required: bool
    papers: int
    def __init__(self, breadth: _Optional[_Union[Range, _Mapping]] = ..., depth: _Optional[_Union[Range, _Mapping]] = ..., diversity: _Optional[_Union[Range, _Mapping]] = ..., max_abstract_chars: _Optional[int] = ..., max_question_chars: _Optional[int] = ..., max_pdf_bytes: _Optional[int] = ..., max_pdf_pages: _Optional[int] = ..., backends: _Optional[_Iterable[str]] = ..., default_backend: _Optional[str] = ..., auth_required: _Optional[bool] = ..., papers: _Optional[int] = ...) -> None: ...
