"""A typed Python client of the citeweave gateway (gRPC).

    from citeweave.client import Client, Progress, TextDelta, TextReset, Result

    with Client("127.0.0.1:50050", api_key=None) as client:
        for event in client.generate("We study ...", breadth=10, depth=2):
            if isinstance(event, Progress):
                print(f"{event.percent:3d}% {event.stage}: {event.message}")
            elif isinstance(event, TextDelta):
                print(event.text, end="")
            elif isinstance(event, Result):
                print(event.text, *(r.formatted for r in event.references), sep="\n")

        section = client.generate_section("We study ...")   # the Result alone
        answer = client.answer("Which methods ...?").result()

Leaving a stream early (break, an exception, `close()`, the end of a `with` block) cancels the
call, and the gateway then cancels its work downstream. Errors are `CiteweaveClientError` with the
gRPC status name in `.code`. Needs only grpcio and the generated stubs.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import grpc
from google.protobuf.json_format import MessageToDict

from citeweave.gateway.v1 import gateway_pb2 as pb
from citeweave.gateway.v1 import gateway_pb2_grpc

__all__ = [
    "DEFAULT_ADDR", "Client", "CiteweaveClientError", "Event", "Info", "Progress", "Range",
    "RankedPaper", "Reference", "Result", "Stream", "TextDelta", "TextReset",
]

DEFAULT_ADDR = "127.0.0.1:50050"
# A result carries the longlist's abstracts and a request may carry a whole PDF: gRPC's 4 MiB
# default would refuse both. Kept here rather than imported so the client needs no server code.
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
]

STYLES = {"numeric": pb.CITATION_STYLE_NUMERIC, "author-year": pb.CITATION_STYLE_AUTHOR_YEAR}
BACKENDS = {"extractive": pb.GENERATOR_BACKEND_EXTRACTIVE, "openai": pb.GENERATOR_BACKEND_OPENAI}
RULES = {"mmr": pb.SELECTION_RULE_MMR, "citegeist-min": pb.SELECTION_RULE_CITEGEIST_MIN}

DateLike = Union[str, _dt.date, None]


class CiteweaveClientError(Exception):
    """A call failed. `code` is the gRPC status name ("UNAVAILABLE", "UNAUTHENTICATED",
    "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", ...), `message` the gateway's words, and
    `retry_after_s` the seconds to wait when the gateway said so (over a rate or concurrency
    limit), else None."""

    def __init__(self, code: str, message: str, retry_after_s: float | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "CiteweaveClientError":
        # A grpc.RpcError raised by a call is also a grpc.Call; one raised elsewhere may not be.
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        message = error.details() if hasattr(error, "details") else str(error)
        trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
        return cls(code.name, message or "", _retry_after(trailers))


def _retry_after(trailers) -> float | None:
    for key, value in trailers or ():
        if key == "retry-after":
            try:
                return float(value)
            except ValueError:
                return None
    return None


# --- events of a streaming call --------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """`stage` is "embedding", "longlist", "fetching", "pages", "shortlist", "summarizing",
    "writing" or "done"; `percent` (0..100) never decreases over a call; `done`/`total` count
    the stage's items (papers fetched, summaries; characters written while writing)."""

    stage: str
    percent: int
    message: str
    done: int
    total: int


@dataclass(frozen=True)
class TextDelta:
    """The next piece of the text being written."""

    text: str


@dataclass(frozen=True)
class TextReset:
    """The text streamed so far is void (the LLM failed mid-answer; another writer starts over)."""

    reason: str


@dataclass(frozen=True)
class Reference:
    paper_id: str
    marker: str  # as in the text: "[3]" or "(Vaswani et al., 2017)"
    formatted: str  # APA-like, with the link
    url: str
    key: str  # the BibTeX key


@dataclass(frozen=True)
class RankedPaper:
    id: str
    title: str
    authors: tuple[str, ...]
    year: int
    url: str
    score: float
    rank: int
    chosen_pages: tuple[int, ...]
    # The PDF could not be had; the paper was judged on its abstract, for `fallback_reason`.
    abstract_only: bool
    fallback_reason: str
    proto: pb.RankedPaper  # everything else: abstract, categories, page similarities, reasons

    @classmethod
    def from_proto(cls, ranked: pb.RankedPaper) -> "RankedPaper":
        paper = ranked.paper
        return cls(
            id=paper.id, title=paper.title, authors=tuple(paper.authors), year=paper.year,
            url=paper.url, score=ranked.score, rank=ranked.rank,
            chosen_pages=tuple(page.number for page in ranked.chosen_pages),
            abstract_only=ranked.abstract_only, fallback_reason=ranked.fallback_reason,
            proto=ranked,
        )


@dataclass(frozen=True)
class Result:
    """The last event of a call: the text and everything it was made from. `proto` is the
    gateway's GenerationResult as sent."""

    proto: pb.GenerationResult

    @property
    def text(self) -> str:
        return self.proto.text

    @property
    def references(self) -> list[Reference]:
        return [Reference(r.paper_id, r.marker, r.formatted, r.url, r.key)
                for r in self.proto.references]

    @property
    def bibtex(self) -> str:
        return self.proto.bibtex

    @property
    def longlist(self) -> list[RankedPaper]:
        return [RankedPaper.from_proto(p) for p in self.proto.longlist]

    @property
    def shortlist(self) -> list[RankedPaper]:
        return [RankedPaper.from_proto(p) for p in self.proto.shortlist]

    @property
    def warnings(self) -> list[str]:
        return list(self.proto.warnings)

    @property
    def generation_error(self) -> str:
        """Non-empty when the text could not be written; the lists are still there."""
        return self.proto.generation_error

    @property
    def backend(self) -> str:
        """The writer that wrote the text: "extractive" or "openai"."""
        return self.proto.report.backend

    @property
    def timings(self) -> dict[str, float]:
        """Stage name -> seconds."""
        seconds: dict[str, float] = {}
        for timing in self.proto.timings:
            stage = stage_name(timing.stage)
            seconds[stage] = seconds.get(stage, 0.0) + timing.duration_ms / 1000
        return seconds

    def to_dict(self) -> dict:
        """The result as JSON-ready data with the proto's field names and every field, empty
        ones included: the shape the gateway's HTTP API answers with."""
        return MessageToDict(self.proto, preserving_proto_field_name=True,
                             always_print_fields_with_no_presence=True)


Event = Union[Progress, TextDelta, TextReset, Result]


def stage_name(stage: int) -> str:
    try:
        return pb.Stage.Name(stage).removeprefix("STAGE_").lower()
    except ValueError:  # a stage added to the contract after this client was built
        return f"stage-{stage}"


def _event(response) -> Event | None:
    kind = response.WhichOneof("event")
    if kind == "progress":
        p = response.progress
        return Progress(stage_name(p.stage), p.percent, p.message, p.done, p.total)
    if kind == "text_delta":
        return TextDelta(response.text_delta)
    if kind == "reset":
        return TextReset(response.reset.reason)
    if kind == "result":
        return Result(response.result)
    return None  # an event kind newer than this client: skipped


class Stream(Iterator[Event]):
    """The events of one GenerateRelatedWork or Answer call, in order, ending with a Result.

    Iterating it raises CiteweaveClientError for a failed call. Closing it (`close()`, leaving a
    `with` block, or dropping the last reference after a `break`) cancels the call."""

    def __init__(self, call):
        self._call = call
        self._done = False
        self._held = None  # a response or error read ahead of the caller (see _read_to_end)

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Event:
        while True:
            event = _event(self._read())
            if isinstance(event, Result):
                self._read_to_end()
            if event is not None:
                return event

    def _read(self):
        if self._held is not None:
            held, self._held = self._held, None
            if isinstance(held, Exception):
                raise held
            return held
        if self._done:
            raise StopIteration
        try:
            return next(self._call)
        except StopIteration:
            self._done = True
            raise
        except grpc.RpcError as error:
            self._done = True
            raise CiteweaveClientError.from_rpc_error(error) from None

    def _read_to_end(self) -> None:
        # The Result is the last event: reading on to the call's status now means a caller that
        # stops at the Result leaves a finished call behind, not one the gateway sees cancelled.
        try:
            self._held = self._read()
        except StopIteration:
            pass
        except CiteweaveClientError as error:
            self._held = error

    def result(self, on_event: Callable[[Event], None] | None = None) -> Result:
        """Reads the stream to its end and returns its Result; `on_event` sees every event on
        the way (a progress bar, say)."""
        result = None
        for event in self:
            if on_event is not None:
                on_event(event)
            if isinstance(event, Result):
                result = event
        if result is None:
            raise CiteweaveClientError("INTERNAL", "the gateway ended the stream without a result")
        return result

    def close(self) -> None:
        """Cancels the call unless it has finished; safe to call twice."""
        self._done, self._held = True, None
        self._call.cancel()

    cancel = close

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: grpc may already be torn down
            pass


# --- the client -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    min: float
    max: float
    default: float


@dataclass(frozen=True)
class Info:
    """What the endpoint accepts (GetInfo)."""

    breadth: Range
    depth: Range
    diversity: Range
    max_abstract_chars: int
    max_question_chars: int
    max_pdf_bytes: int
    max_pdf_pages: int
    backends: tuple[str, ...]  # those a request may name; empty when the endpoint decides
    default_backend: str
    auth_required: bool
    papers: int  # in the store


def _range(r: pb.Range) -> Range:
    return Range(r.min, r.max, r.default)


def _choice(table: dict[str, int], value: str | None, what: str) -> int:
    if value is None:
        return 0  # UNSPECIFIED: the gateway's default
    if value not in table:
        raise ValueError(f"{what} must be one of {', '.join(table)}, got {value!r}")
    return table[value]


def _iso(value: DateLike) -> str:
    return value.isoformat() if isinstance(value, _dt.date) else (value or "")


def _options(breadth, depth, diversity, rule, categories, topics, date_from, date_to):
    options = pb.RetrievalOptions(
        rule=_choice(RULES, rule, "rule"),
        filters=pb.Filters(categories=list(categories), topics=list(topics),
                           date_from=_iso(date_from), date_to=_iso(date_to)),
    )
    # Optional fields: unset means the gateway's default, which 0 would not.
    if breadth is not None:
        options.breadth = breadth
    if depth is not None:
        options.depth = depth
    if diversity is not None:
        options.diversity = diversity
    return options


def _document(abstract: str | None, pdf: bytes | Path | str | None, filename: str) -> dict:
    """The request's `input` oneof (+ filename) from an abstract or a PDF (bytes or a path)."""
    if (abstract is None) == (pdf is None):
        raise ValueError("give exactly one of abstract and pdf")
    if abstract is not None:
        return {"abstract": abstract, "filename": filename}
    if isinstance(pdf, (str, os.PathLike)):
        path = Path(pdf)
        return {"pdf": path.read_bytes(), "filename": filename or path.name}
    return {"pdf": bytes(pdf), "filename": filename}


class Client:
    """A connection to a citeweave gateway.

    `addr` defaults to $CITEWEAVE_GATEWAY_ADDR, else 127.0.0.1:50050; `api_key` is sent as the
    "x-api-key" metadata when the endpoint requires one. `tls` (implied by `root_certificates`,
    PEM bytes or a file) connects over TLS, with the system's roots when none are given.
    `timeout_s` is the deadline of each call."""

    def __init__(
        self,
        addr: str | None = None,
        api_key: str | None = None,
        tls: bool = False,
        root_certificates: bytes | Path | None = None,
        timeout_s: float = 600,
    ):
        self.addr = addr or os.environ.get("CITEWEAVE_GATEWAY_ADDR") or DEFAULT_ADDR
        self.timeout_s = timeout_s
        self._metadata = (("x-api-key", api_key),) if api_key else ()
        if isinstance(root_certificates, (str, os.PathLike)):
            root_certificates = Path(root_certificates).read_bytes()
        if tls or root_certificates:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(self.addr, credentials, options=_CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(self.addr, options=_CHANNEL_OPTIONS)
        self._stub = gateway_pb2_grpc.GatewayServiceStub(self._channel)

    def close(self) -> None:
        """Closes the connection; calls still running are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _unary(self, method, request):
        try:
            return method(request, timeout=self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as error:
            raise CiteweaveClientError.from_rpc_error(error) from None

    def _stream(self, method, request) -> Stream:
        return Stream(method(request, timeout=self.timeout_s, metadata=self._metadata))

    def generate(
        self,
        abstract: str | None = None,
        *,
        pdf: bytes | Path | None = None,
        filename: str = "",
        breadth: int | None = None,
        depth: int | None = None,
        diversity: float | None = None,
        rule: str | None = None,
        style: str = "numeric",
        backend: str | None = None,
        categories: Iterable[str] = (),
        topics: Iterable[int] = (),
        date_from: DateLike = None,
        date_to: DateLike = None,
    ) -> Stream:
        """A related-work section for an abstract or a whole PDF, as a Stream of events.

        breadth 5..20 (shortlist size), depth 1..5 (pages per paper), diversity 0..1; None takes
        the endpoint's default (see `info()`). rule: "mmr" or "citegeist-min". style: "numeric"
        or "author-year". backend: "extractive", "openai" or None (the endpoint decides).
        Filters: arXiv categories, topic ids, inclusive dates (ISO strings or dates)."""
        request = pb.GenerateRelatedWorkRequest(
            **_document(abstract, pdf, filename),
            options=_options(breadth, depth, diversity, rule, categories, topics, date_from,
                             date_to),
            citation_style=_choice(STYLES, style, "style"),
            backend=_choice(BACKENDS, backend, "backend"),
        )
        return self._stream(self._stub.GenerateRelatedWork, request)

    def generate_section(self, abstract: str | None = None, **kwargs) -> Result:
        """`generate(...)` run to its end: the Result alone."""
        return self.generate(abstract, **kwargs).result()

    def answer(
        self,
        question: str,
        *,
        breadth: int | None = None,
        depth: int | None = None,
        diversity: float | None = None,
        rule: str | None = None,
        style: str = "numeric",
        backend: str | None = None,
        categories: Iterable[str] = (),
        topics: Iterable[int] = (),
        date_from: DateLike = None,
        date_to: DateLike = None,
    ) -> Stream:
        """An answer to a question citing corpus papers, as a Stream of events (options as for
        `generate`); `answer(...).result()` for the Result alone."""
        request = pb.AnswerRequest(
            question=question,
            options=_options(breadth, depth, diversity, rule, categories, topics, date_from,
                             date_to),
            citation_style=_choice(STYLES, style, "style"),
            backend=_choice(BACKENDS, backend, "backend"),
        )
        return self._stream(self._stub.Answer, request)

    def search(
        self,
        abstract: str | None = None,
        *,
        pdf: bytes | Path | None = None,
        filename: str = "",
        breadth: int | None = None,
        diversity: float | None = None,
        rule: str | None = None,
        categories: Iterable[str] = (),
        topics: Iterable[int] = (),
        date_from: DateLike = None,
        date_to: DateLike = None,
    ) -> list[RankedPaper]:
        """The longlist (3 x breadth papers) for an abstract or a PDF: no full text, no text."""
        request = pb.SearchPapersRequest(
            **_document(abstract, pdf, filename),
            options=_options(breadth, None, diversity, rule, categories, topics, date_from,
                             date_to),
        )
        reply = self._unary(self._stub.SearchPapers, request)
        return [RankedPaper.from_proto(p) for p in reply.longlist]

    def info(self) -> Info:
        """The endpoint's defaults, ranges and limits."""
        reply = self._unary(self._stub.GetInfo, pb.GetInfoRequest())
        return Info(
            breadth=_range(reply.breadth), depth=_range(reply.depth),
            diversity=_range(reply.diversity), max_abstract_chars=reply.max_abstract_chars,
            max_question_chars=reply.max_question_chars, max_pdf_bytes=reply.max_pdf_bytes,
            max_pdf_pages=reply.max_pdf_pages, backends=tuple(reply.backends),
            default_backend=reply.default_backend, auth_required=reply.auth_required,
            papers=reply.papers,
        )
