"""The gateway over HTTP: the web page, its assets, and a JSON API that mirrors the gRPC one.

Messages are the gRPC messages in protobuf's JSON mapping with snake_case field names, so one
contract serves both transports. `POST /api/v1/generate` and `/answer` stream server-sent events
when the client asks for them (`Accept: text/event-stream` or `?stream=1`): a browser cannot POST
with EventSource, so the page reads them from fetch()'s body instead of polling.

    GET  /                  the web page (services/gateway/web/)
    GET  /static/...        its script and style sheet
    GET  /api/v1/info       GetInfo (no key needed: the page asks it whether to show a key field)
    POST /api/v1/search     SearchPapers
    POST /api/v1/generate   GenerateRelatedWork: JSON (pdf as base64) or a multipart form
    POST /api/v1/answer     Answer

Keys go in `X-API-Key` or `Authorization: Bearer KEY`; `X-Request-Timeout: SECONDS` is the
client's deadline, as a gRPC deadline is. Errors are {"error": {"code": "UNAVAILABLE", "message":
"..."}} with the HTTP status of the gRPC code (429 with Retry-After); once an event stream has
started, an error is its last event (`event: error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from aiohttp import BodyPartReader, web
from google.protobuf import json_format
from google.protobuf.message import Message

from citeweave.gateway.v1 import gateway_pb2
from services.common.errors import CiteweaveError

log = logging.getLogger("citeweave.gateway.http")

WEB_DIR = Path(__file__).resolve().parent / "web"
API = "/api/v1"
MIB = 1024 * 1024
# Room for the multipart framing and the other form fields next to a PDF of the largest size.
BODY_MARGIN_BYTES = MIB
# Any form field but the PDF: an abstract or a question is a few KB.
FORM_FIELD_LIMIT_BYTES = MIB
# A comment line on a quiet stream, so that proxies do not close it while a stage takes long
# (an LLM summary can take a minute without an event).
KEEPALIVE_S = 15.0
# How long GET /api/v1/info answers from its last answer.
INFO_CACHE_S = 5.0
# Events buffered ahead of a slow client; past that the pipeline waits for it.
STREAM_BUFFER_EVENTS = 256

# gRPC code -> HTTP status, as Google's HTTP mapping of gRPC codes has it.
_HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
# For errors that only HTTP has (a bad route, a body too large): the code the JSON body names.
_HTTP_CODE = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE",
              415: "UNSUPPORTED_MEDIA_TYPE"}

# The page's own assets only: nothing may load from elsewhere.
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


class ApiError(Exception):
    """An error answered over HTTP: its status, the code named in the body, a message for a
    person, and for RESOURCE_EXHAUSTED the seconds after which a retry can succeed."""

    def __init__(self, status: int, code: str, message: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.retry_after_s is not None:
            error["retry_after_s"] = math.ceil(self.retry_after_s)
        return {"error": error}

    def response(self) -> web.Response:
        headers = {}
        if self.retry_after_s is not None:
            headers["Retry-After"] = str(max(1, math.ceil(self.retry_after_s)))
        if self.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="citeweave"'
        return web.json_response(self.body(), status=self.status, headers=headers)


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)


def api_error(exc: BaseException) -> ApiError:
    """Any exception of a handler as the error the client sees; unexpected ones are logged and
    answered without their details."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, CiteweaveError):
        return ApiError(_HTTP_STATUS.get(exc.code, 500), exc.code.name, exc.message,
                        getattr(exc, "retry_after_s", None))
    if isinstance(exc, grpc.aio.AioRpcError):
        # A downstream status the core let through: its code still means the same thing.
        return ApiError(_HTTP_STATUS.get(exc.code(), 500), exc.code().name, exc.details() or "")
    if isinstance(exc, TimeoutError):
        return ApiError(504, "DEADLINE_EXCEEDED", "the request took longer than its deadline")
    log.error("unexpected error in the HTTP API", exc_info=exc)
    return ApiError(500, "INTERNAL",
                    f"internal error ({type(exc).__name__}); the gateway logged it")


def _to_json(message: Message) -> dict[str, Any]:
    # Every field, defaults included, so that a client reads `percent: 0` or
    # `generation_error: ""` instead of testing for absent keys.
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True,
        unquote_int64_if_possible=True,
    )


def _mb(n: float) -> str:
    if n < MIB:
        return f"{math.ceil(n / 1024)} KB"
    return f"{n / MIB:.1f}".removesuffix(".0") + " MB"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    # json.dumps escapes newlines, so each event's data is one `data:` line.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}\n\n".encode()


def _event(response: Message) -> tuple[str, dict[str, Any]]:
    """A GenerateRelatedWorkResponse or AnswerResponse as an SSE event name and its data."""
    kind = response.WhichOneof("event")
    if kind == "text_delta":
        return "delta", {"text": response.text_delta}
    if kind in ("progress", "reset", "result"):
        return kind, _to_json(getattr(response, kind))
    raise ValueError(f"a response with no event ({kind})")


# --- forms -------------------------------------------------------------------------------------

_ENUMS = {  # form field -> (request field, enum, prefix of its value names)
    "style": ("citation_style", gateway_pb2.CitationStyle, "CITATION_STYLE_"),
    "citation_style": ("citation_style", gateway_pb2.CitationStyle, "CITATION_STYLE_"),
    "backend": ("backend", gateway_pb2.GeneratorBackend, "GENERATOR_BACKEND_"),
}
_OPTION_FIELDS = {"breadth", "depth", "diversity", "rule", "categories", "topics",
                  "date_from", "date_to"}


def _enum_name(value: str, enum: Any, prefix: str, field: str) -> str:
    """"author-year", "AUTHOR_YEAR" or "CITATION_STYLE_AUTHOR_YEAR" -> the enum value's name."""
    name = value.strip().upper().replace("-", "_")
    if not name.startswith(prefix):
        name = prefix + name
    if name not in enum.keys():
        allowed = [k.removeprefix(prefix).lower().replace("_", "-") for k in enum.keys()
                   if not k.endswith("_UNSPECIFIED")]
        raise _invalid(f"{field} must be one of {', '.join(allowed)}, got {value!r}")
    return name


def _number(value: str, field: str, kind: type) -> int | float:
    try:
        return kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise _invalid(f"{field} must be {what}, got {value!r}") from None


def _split(values: list[str]) -> list[str]:
    # A list field may come repeated or comma-separated ("cs.CL, cs.IR").
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def form_message(
    message_type: type[Message], fields: dict[str, list[str]], pdf: bytes | None, filename: str
) -> Message:
    """The request message of a form post. Empty fields count as absent, as a browser sends
    every input of a form; an unknown field is an error, so a typo is not silently ignored."""
    accepted = set(message_type.DESCRIPTOR.fields_by_name)
    fields = {k: [v for v in vs if v.strip()] for k, vs in fields.items()}
    fields = {k: vs for k, vs in fields.items() if vs}
    known = (accepted & {"abstract", "question", "filename"}) | {
        f for f, (target, _, _) in _ENUMS.items() if target in accepted}
    if "options" in accepted:
        known |= _OPTION_FIELDS
    unknown = sorted(set(fields) - known)
    if unknown:
        raise _invalid(f"unknown form field {', '.join(unknown)}; this endpoint takes "
                       f"{', '.join(sorted(known | ({'pdf'} if 'pdf' in accepted else set())))}")
    if pdf is not None and "pdf" not in accepted:
        raise _invalid("this endpoint takes no file")

    body: dict[str, Any] = {}
    for name in ("abstract", "question", "filename"):
        if name in fields:
            body[name] = fields[name][-1]
    for name, (target, enum, prefix) in _ENUMS.items():
        if name in fields:
            body[target] = _enum_name(fields[name][-1], enum, prefix, name)
    options: dict[str, Any] = {}
    for name, kind in (("breadth", int), ("depth", int), ("diversity", float)):
        if name in fields:
            options[name] = _number(fields[name][-1], name, kind)
    if "rule" in fields:
        options["rule"] = _enum_name(fields["rule"][-1], gateway_pb2.SelectionRule,
                                     "SELECTION_RULE_", "rule")
    filters: dict[str, Any] = {}
    if "categories" in fields:
        filters["categories"] = _split(fields["categories"])
    if "topics" in fields:
        filters["topics"] = [_number(t, "topics", int) for t in _split(fields["topics"])]
    for name in ("date_from", "date_to"):
        if name in fields:
            filters[name] = fields[name][-1].strip()
    if filters:
        options["filters"] = filters
    if options:
        body["options"] = options
    if pdf is not None and "abstract" in body:
        raise _invalid("send an abstract or a PDF, not both")
    if pdf is not None and "filename" not in body and filename:
        body["filename"] = filename

    message = _parse(body, message_type)
    if pdf is not None:
        message.pdf = pdf
    return message


def _parse(body: Any, message_type: type[Message]) -> Message:
    if not isinstance(body, dict):
        raise _invalid(f"the body must be a JSON object: a {message_type.DESCRIPTOR.name}")
    try:
        return json_format.ParseDict(body, message_type())
    except json_format.ParseError as exc:
        raise _invalid(str(exc)) from None


# --- the API -----------------------------------------------------------------------------------

class HttpApi:
    def __init__(self, gateway: Any, guard: Any):
        self.gateway = gateway
        self.guard = guard
        self.max_pdf_bytes: int = gateway.settings.max_pdf_bytes
        # A PDF in JSON is base64: four bytes for every three.
        self.json_body_limit = math.ceil(self.max_pdf_bytes * 4 / 3) + BODY_MARGIN_BYTES
        self.form_body_limit = self.max_pdf_bytes + BODY_MARGIN_BYTES
        self._info: tuple[float, dict[str, Any]] | None = None

    # routes

    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(WEB_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    async def info(self, request: web.Request) -> web.Response:
        # No key needed (the page asks before it has one), so no rate limit either: a short
        # cache keeps callers from turning it into downstream Stats and GetInfo calls.
        now = time.monotonic()
        if self._info is None or now - self._info[0] > INFO_CACHE_S:
            info = await self.gateway.info()
            # The guard, not the core, knows whether keys are on.
            info.auth_required = bool(getattr(self.guard, "auth_required", False))
            self._info = (now, _to_json(info))
        return web.json_response(self._info[1])

    async def search(self, request: web.Request) -> web.Response:
        async with self._admitted(request):
            message = await self._read(request, gateway_pb2.SearchPapersRequest)
            reply = await self.gateway.search(message, _timeout(request))
            return web.json_response(_to_json(reply))

    async def generate(self, request: web.Request) -> web.StreamResponse:
        async with self._admitted(request):
            message = await self._read(request, gateway_pb2.GenerateRelatedWorkRequest)
            return await self._respond(request, self.gateway.generate(message, _timeout(request)))

    async def answer(self, request: web.Request) -> web.StreamResponse:
        async with self._admitted(request):
            message = await self._read(request, gateway_pb2.AnswerRequest)
            return await self._respond(request, self.gateway.answer(message, _timeout(request)))

    # auth, limits and bodies

    @contextlib.asynccontextmanager
    async def _admitted(self, request: web.Request) -> AsyncIterator[None]:
        """Key, then size, then the tenant's rate and concurrency limits, held for the whole
        request: a refused request costs no body read and no slot."""
        tenant = self.guard.authenticate(_api_key(request), request.remote or "unknown")
        self._check_declared_size(request)
        async with self.guard.admit(tenant):
            yield

    def _body_limit(self, request: web.Request) -> int:
        return self.json_body_limit if request.content_type == "application/json" \
            else self.form_body_limit

    def _too_large(self, size: str) -> ApiError:
        return ApiError(413, "PAYLOAD_TOO_LARGE",
                        f"the upload is {size}; this service accepts a PDF of up to "
                        f"{_mb(self.max_pdf_bytes)}")

    def _check_declared_size(self, request: web.Request) -> None:
        length = request.content_length
        if length is not None and length > self._body_limit(request):
            raise self._too_large(_mb(length))

    async def _read(self, request: web.Request, message_type: type[Message]) -> Message:
        ctype = request.content_type
        if ctype == "multipart/form-data":
            fields, pdf, filename = await self._read_multipart(request)
            return form_message(message_type, fields, pdf, filename)
        if ctype == "application/x-www-form-urlencoded":
            form = await request.post()
            fields: dict[str, list[str]] = defaultdict(list)
            for key, value in form.items():
                fields[key].append(str(value))
            return form_message(message_type, fields, None, "")
        if ctype == "application/json":
            try:
                body = json.loads(await request.read())
            except web.HTTPRequestEntityTooLarge:
                raise self._too_large(f"more than {_mb(self.json_body_limit)} of JSON") from None
            except (ValueError, UnicodeDecodeError) as exc:
                raise _invalid(f"the body is not valid JSON: {exc}") from None
            return _parse(body, message_type)
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE",
                       f"send the request as JSON (Content-Type: application/json) or as a form "
                       f"(multipart/form-data), not {ctype or 'an untyped body'}")

    async def _read_multipart(
        self, request: web.Request
    ) -> tuple[dict[str, list[str]], bytes | None, str]:
        fields: dict[str, list[str]] = defaultdict(list)
        pdf: bytes | None = None
        filename = ""
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader) or not part.name:
                raise _invalid("a form part without a name, or a nested multipart body")
            if part.filename is None:
                data = await _read_part(part, FORM_FIELD_LIMIT_BYTES, lambda: _invalid(
                    f"the form field {part.name} is longer than {_mb(FORM_FIELD_LIMIT_BYTES)}"))
                try:
                    fields[part.name].append(data.decode(part.get_charset("utf-8")))
                except (UnicodeDecodeError, LookupError):
                    raise _invalid(f"the form field {part.name} is not UTF-8 text") from None
                continue
            if part.name != "pdf":
                raise _invalid(f"unexpected file field {part.name!r}: send the PDF as 'pdf'")
            data = await _read_part(part, self.max_pdf_bytes, lambda: self._too_large(
                f"larger than {_mb(self.max_pdf_bytes)}"))
            # A file input left empty still sends a part: no filename, no bytes.
            if data or part.filename:
                pdf, filename = data, part.filename
        return fields, pdf, filename

    # responses

    async def _respond(
        self, request: web.Request, events: AsyncIterator[Message]
    ) -> web.StreamResponse:
        if _wants_stream(request):
            return await self._stream(request, events)
        result = None
        async with contextlib.aclosing(events):
            async for event in events:
                if event.WhichOneof("event") == "result":
                    result = event.result
        if result is None:
            raise ApiError(500, "INTERNAL", "the pipeline ended without a result")
        return web.json_response(_to_json(result))

    async def _stream(
        self, request: web.Request, events: AsyncIterator[Message]
    ) -> web.StreamResponse:
        """Server-sent events. The first event is awaited before the response starts, so that
        bad input (the core raises it at the first step) is still an HTTP status, not an event.

        One task consumes the core's generator from start to end, as the gRPC server would (its
        task groups and timeouts belong to the task that entered them); this handler writes.
        When the client goes away aiohttp cancels this handler, and the finally block cancels
        that task, which cancels the downstream calls."""
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(STREAM_BUFFER_EVENTS)
        pump = asyncio.create_task(_pump(events, queue), name="http-stream")
        response: web.StreamResponse | None = None
        try:
            while True:
                try:
                    kind, item = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    if pump.done() and queue.empty():
                        kind, item = "error", _stopped()
                    else:
                        response = response or await _open_stream(request)
                        await response.write(b": keepalive\n\n")
                        continue
                if kind == "end":
                    break
                if kind == "error":
                    if response is None:
                        raise item
                    await response.write(_sse("error", api_error(item).body()))
                    break
                response = response or await _open_stream(request)
                await response.write(_sse(*_event(item)))
            response = response or await _open_stream(request)
            await response.write_eof()
            return response
        except ConnectionResetError:
            # The client went away between two events; the finally block stops the work.
            log.info("client disconnected; request cancelled", extra={"path": request.path})
            if response is None:
                raise
            return response
        finally:
            if not pump.done():
                pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)


async def _pump(events: AsyncIterator[Message], queue: asyncio.Queue) -> None:
    """Feeds the writer the core's events, then ("end", None) or ("error", exception)."""
    # What the writer is told when the core stops without either (a stray cancellation).
    outcome: tuple[str, Any] = ("error", _stopped())
    try:
        async for event in events:
            await queue.put(("event", event))
        outcome = ("end", None)
    except Exception as exc:  # noqa: BLE001 - handed to the writer, which answers it
        outcome = ("error", exc)
    finally:
        # Cancelled while waiting on a full queue, the generator is still suspended at a yield.
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        # A full queue has a writer that is gone, or that finds the pump done when it next waits.
        with contextlib.suppress(asyncio.QueueFull):
            queue.put_nowait(outcome)


def _stopped() -> ApiError:
    return ApiError(500, "INTERNAL", "the request stopped before its result")


async def _open_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache",
        # nginx would otherwise buffer the stream and the progress bar would jump at the end.
        "X-Accel-Buffering": "no",
    })
    await response.prepare(request)
    return response


async def _read_part(part: BodyPartReader, limit: int, too_large) -> bytes:
    """The part's bytes, refused as soon as it passes `limit`, without reading the rest."""
    chunks, size = [], 0
    while chunk := await part.read_chunk(256 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def _api_key(request: web.Request) -> str | None:
    key = request.headers.get("X-API-Key", "").strip()
    if not key:
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            key = credentials.strip()
    return key or None


def _timeout(request: web.Request) -> float | None:
    """The client's deadline in seconds (X-Request-Timeout), as a gRPC client sets one; None
    leaves the endpoint's request_timeout_s."""
    value = request.headers.get("X-Request-Timeout", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise _invalid(f"X-Request-Timeout must be a positive number of seconds, got {value!r}")
    return seconds


def _wants_stream(request: web.Request) -> bool:
    if request.query.get("stream", "").lower() in ("1", "true", "yes"):
        return True
    return "text/event-stream" in request.headers.get("Accept", "")


@web.middleware
async def _errors(request: web.Request, handler) -> web.StreamResponse:
    """Errors of the API as JSON with their status; the page's routes keep aiohttp's own."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if not request.path.startswith(API + "/") or exc.status < 400:
            raise
        if isinstance(exc, web.HTTPRequestEntityTooLarge):
            message = "the request body is larger than this service accepts"
        else:
            message = exc.reason.lower() if exc.status in (404, 405) else exc.text or exc.reason
            if exc.status == 404:
                message = f"no API route {request.method} {request.path}"
        return ApiError(exc.status, _HTTP_CODE.get(exc.status, "INVALID_ARGUMENT"), message
                        ).response()
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception as exc:  # noqa: BLE001 - every other error is answered as JSON
        return api_error(exc).response()


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    if not request.path.startswith(API + "/"):
        response.headers.setdefault("Content-Security-Policy", _CSP)
        response.headers.setdefault("Referrer-Policy", "no-referrer")


def build_http_app(gateway: Any, guard: Any) -> web.Application:
    """The aiohttp application of the web page and the JSON API. Run it with
    `AppRunner(app, handler_cancellation=True)`: a client that disconnects must cancel its
    request, and the pipeline under it."""
    api = HttpApi(gateway, guard)
    app = web.Application(middlewares=[_errors], client_max_size=api.json_body_limit)
    app.router.add_get("/", api.index)
    app.router.add_static("/static/", WEB_DIR, show_index=False, follow_symlinks=False)
    app.router.add_get(f"{API}/info", api.info)
    app.router.add_post(f"{API}/search", api.search)
    app.router.add_post(f"{API}/generate", api.generate)
    app.router.add_post(f"{API}/answer", api.answer)
    app.on_response_prepare.append(_security_headers)
    return app
