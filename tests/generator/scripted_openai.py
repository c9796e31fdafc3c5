"""An OpenAI-compatible HTTP server on 127.0.0.1 that answers from a script, for the hostile
cases: each request to /v1/chat/completions takes the next `Reply` (or the default one), and is
recorded with its headers so tests can check what reached the endpoint."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.local_http import serving

CHUNK_CHARS = 24


@dataclass
class Reply:
    # The assistant's text; streamed in CHUNK_CHARS pieces when the request streams.
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # A raw body sent as is (malformed JSON, error objects); wins over `text`.
    body: str | None = None
    # Streaming only: a raw event-stream body sent as is (broken JSON in a data line).
    raw_stream: str | None = None
    # Seconds to wait before answering.
    delay_s: float = 0.0
    # No choices at all in the answer.
    empty_choices: bool = False
    # Streaming only: after this many chunks, stall for `stall_s` and then drop the connection.
    fail_after_chunks: int | None = None
    stall_s: float = 0.0


@dataclass
class Request:
    body: dict
    headers: dict[str, str]


def _completion(model: str, text: str, empty: bool) -> dict:
    choices = [] if empty else [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    ]
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": 100, "completion_tokens": max(1, len(text) // 4),
                  "total_tokens": 100 + max(1, len(text) // 4)},
    }


def _chunk(model: str, content: str | None, finish: str | None = None, usage: dict | None = None,
           empty: bool = False) -> bytes:
    choices = [] if empty or usage else [
        {"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}
    ]
    payload = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
               "model": model, "choices": choices, "usage": usage}
    return f"data: {json.dumps(payload)}\n\n".encode()


class ScriptedOpenAi:
    def __init__(self, default: Reply | None = None):
        self.default = default or Reply(text="")
        self.script: deque[Reply] = deque()
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reset(self, timeout_s: float = 10.0) -> None:
        """Ends stalled answers, forgets the script and the recorded requests."""
        self._release.set()
        deadline = time.monotonic() + timeout_s
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        self._release = threading.Event()
        self.script.clear()
        self.requests.clear()
        self.max_in_flight = 0
        self.default = Reply(text="")

    def _wait(self, seconds: float) -> None:
        """A delay that `reset` cuts short."""
        if seconds > 0:
            self._release.wait(seconds)

    def add(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def _next(self) -> Reply:
        with self._lock:
            return self.script.popleft() if self.script else self.default

    def _handler(self):
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                self._send(200, body.encode(), {"Content-Type": "application/json"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                with scripted._lock:
                    scripted.requests.append(Request(request, {k.lower(): v for k, v in self.headers.items()}))
                    scripted.in_flight += 1
                    scripted.max_in_flight = max(scripted.max_in_flight, scripted.in_flight)
                try:
                    self._answer(request, scripted._next())
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with scripted._lock:
                        scripted.in_flight -= 1

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _answer(self, request: dict, reply: Reply) -> None:
                scripted._wait(reply.delay_s)
                model = request.get("model", "scripted")
                headers = {"Content-Type": "application/json", **reply.headers}
                if reply.body is not None or reply.status != 200:
                    self._send(reply.status, (reply.body or "{}").encode(), headers)
                    return
                if request.get("stream") and reply.raw_stream is not None:
                    self._send(200, reply.raw_stream.encode(),
                               {"Content-Type": "text/event-stream", **reply.headers})
                    return
                if not request.get("stream"):
                    body = json.dumps(_completion(model, reply.text, reply.empty_choices))
                    self._send(200, body.encode(), headers)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                pieces = [reply.text[i:i + CHUNK_CHARS] for i in range(0, len(reply.text), CHUNK_CHARS)]
                for n, piece in enumerate(pieces):
                    if reply.fail_after_chunks is not None and n == reply.fail_after_chunks:
                        self.wfile.flush()
                        scripted._wait(reply.stall_s)
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    self.wfile.write(_chunk(model, piece, empty=reply.empty_choices))
                    self.wfile.flush()
                self.wfile.write(_chunk(model, None, finish="stop", empty=reply.empty_choices))
                usage = {"prompt_tokens": 100, "completion_tokens": max(1, len(reply.text) // 4),
                         "total_tokens": 100 + max(1, len(reply.text) // 4)}
                self.wfile.write(_chunk(model, None, usage=usage))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler

    @contextmanager
    def running(self) -> Iterator["ScriptedOpenAi"]:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        with serving(self._server):
            yield self
