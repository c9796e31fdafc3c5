"""A small arXiv look-alike on 127.0.0.1, for tests, `citeweave bench fetcher` and offline demos.

Serves `GET /api/query?id_list=...` as the Atom feed the `arxiv` package parses (entries only for
known ids; an unversioned id gets its latest version) and `GET /pdf/<id>` from a mapping of ids
to PDF files or bytes. Knobs simulate the network: a delay per request, ids that 404, stall,
answer HTML, fail with 500 a number of times, or answer 429 with Retry-After; counters tell tests
how many requests each path got and how many were in flight at once.

    with LocalArxiv() as arxiv:
        arxiv.add("2401.00001", title="...", abstract="...", pdf=Path("paper.pdf"))
        settings = {"arxiv_api_url": arxiv.api_url, "pdf_url_template": arxiv.pdf_url_template}

`python -m services.fetcher.local_arxiv DIR` serves every DIR/<id>.pdf until Ctrl-C.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape, quoteattr

_VERSION = re.compile(r"^(.+?)v(\d+)$")

HTML_PAGE = (
    b"<!DOCTYPE html><html><head><title>Just a moment...</title></head>"
    b"<body><p>Checking your browser before accessing arxiv.org.</p></body></html>"
)


def split_version(paper_id: str) -> tuple[str, int | None]:
    match = _VERSION.match(paper_id)
    if match and ("/" in paper_id or "." in paper_id):
        return match.group(1), int(match.group(2))
    return paper_id, None


@dataclass
class FakePaper:
    id: str  # without version
    title: str
    abstract: str
    authors: list[str] = field(default_factory=lambda: ["Ada Lovelace", "Alan Turing"])
    categories: list[str] = field(default_factory=lambda: ["cs.CL"])
    published: datetime = field(
        default_factory=lambda: datetime(2024, 1, 15, 12, 0, tzinfo=timezone.utc)
    )
    version: int = 1  # the latest


class LocalArxiv:
    def __init__(self, delay_s: float = 0.0, host: str = "127.0.0.1", port: int = 0):
        self.papers: dict[str, FakePaper] = {}
        self.pdfs: dict[str, Path | bytes] = {}
        # Knobs; ids given with or without version. Change them at any time.
        self.delay_s = delay_s  # before every answer (simulated network latency)
        self.missing: set[str] = set()  # PDF answers 404
        self.stall: dict[str, float] = {}  # PDF answers only after this many seconds
        self.html: set[str] = set()  # PDF answers 200 with an HTML page
        self.no_length: set[str] = set()  # PDF sent without Content-Length
        self.fail_first: dict[str, int] = {}  # PDF answers 500 this many more times
        self.rate_limited: dict[str, tuple[int, float]] = {}  # (429s left, Retry-After seconds)
        self.api_status: int | None = None  # every API request answers this status, e.g. 503
        # Counters.
        self.requests: Counter[str] = Counter()  # "/api/query" and "/pdf/<id>" -> count
        self.api_batches: list[list[str]] = []  # the id_list of each API request
        self.in_flight = 0
        self.max_in_flight = 0  # most PDF requests served at once
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread: threading.Thread | None = None

    # -- set-up -----------------------------------------------------------------------------

    def add(
        self,
        paper_id: str,
        title: str | None = None,
        abstract: str | None = None,
        pdf: Path | bytes | None = None,
        **fields,
    ) -> FakePaper:
        """A paper the API knows (and its PDF, when given)."""
        base, version = split_version(paper_id)
        paper = FakePaper(
            id=base,
            title=title if title is not None else f"Paper {base}",
            abstract=abstract if abstract is not None else f"The abstract of paper {base}.",
            **({"version": version} if version else {}),
            **fields,
        )
        self.papers[base] = paper
        if pdf is not None:
            self.pdfs[base] = pdf
        return paper

    def reset_counters(self) -> None:
        with self._lock:
            self.requests.clear()
            self.api_batches.clear()
            self.max_in_flight = self.in_flight

    def pdf_requests(self, paper_id: str | None = None) -> int:
        """PDF requests for one id (as requested), or for all."""
        with self._lock:
            if paper_id is not None:
                return self.requests[f"/pdf/{paper_id}"]
            return sum(n for path, n in self.requests.items() if path.startswith("/pdf/"))

    @property
    def api_requests(self) -> int:
        with self._lock:
            return self.requests["/api/query"]

    # -- addresses --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """For CITEWEAVE_FETCHER_ARXIV_API_URL (the arxiv package's query_url_format)."""
        return f"{self.url}/api/query?{{}}"

    @property
    def pdf_url_template(self) -> str:
        """For CITEWEAVE_FETCHER_PDF_URL_TEMPLATE."""
        return f"{self.url}/pdf/{{id}}"

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> "LocalArxiv":
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="local-arxiv", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes stalled and delayed answers
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> "LocalArxiv":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- answers ----------------------------------------------------------------------------

    def _knob(self, knobs, paper_id: str) -> str | None:
        """The key under which paper_id (or its unversioned form) is in knobs."""
        base, _ = split_version(paper_id)
        for key in (paper_id, base):
            if key in knobs:
                return key
        return None

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._closing.wait(seconds)

    def feed(self, id_list: list[str], max_results: int) -> bytes:
        entries = []
        for wanted in id_list:
            base, version = split_version(wanted)
            paper = self.papers.get(base)
            if paper is None or (version is not None and version > paper.version):
                continue
            entries.append(self._entry(paper, version or paper.version))
        entries = entries[:max_results] if max_results else entries
        query = escape(",".join(id_list))
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" '
            'xmlns:arxiv="http://arxiv.org/schemas/atom">\n'
            f"  <title>arXiv Query: id_list={query}</title>\n"
            f"  <id>{escape(self.url)}/api/query</id>\n"
            "  <updated>2024-01-01T00:00:00Z</updated>\n"
            f"  <opensearch:totalResults>{len(entries)}</opensearch:totalResults>\n"
            "  <opensearch:startIndex>0</opensearch:startIndex>\n"
            f"  <opensearch:itemsPerPage>{max(max_results, 1)}</opensearch:itemsPerPage>\n"
            + "".join(entries)
            + "</feed>\n"
        ).encode()

    def _entry(self, paper: FakePaper, version: int) -> str:
        versioned = f"{paper.id}v{version}"
        stamp = paper.published.strftime("%Y-%m-%dT%H:%M:%SZ")
        authors = "".join(f"    <author><name>{escape(a)}</name></author>\n" for a in paper.authors)
        categories = "".join(
            f'    <category term={quoteattr(c)} scheme="http://arxiv.org/schemas/atom"/>\n'
            for c in paper.categories
        )
        primary = paper.categories[0] if paper.categories else ""
        return (
            "  <entry>\n"
            f"    <id>http://arxiv.org/abs/{escape(versioned)}</id>\n"
            f"    <updated>{stamp}</updated>\n"
            f"    <published>{stamp}</published>\n"
            f"    <title>{escape(paper.title)}</title>\n"
            f"    <summary>{escape(paper.abstract)}</summary>\n"
            f"{authors}"
            f'    <link href="http://arxiv.org/abs/{escape(versioned)}" rel="alternate" '
            'type="text/html"/>\n'
            f'    <link title="pdf" href="{escape(self.url)}/pdf/{escape(versioned)}" '
            'rel="related" type="application/pdf"/>\n'
            f'    <arxiv:primary_category term={quoteattr(primary)} '
            'scheme="http://arxiv.org/schemas/atom"/>\n'
            f"{categories}"
            "  </entry>\n"
        )

    def pdf_body(self, paper_id: str) -> bytes | None:
        key = self._knob(self.pdfs, paper_id)
        if key is None:
            return None
        source = self.pdfs[key]
        return source if isinstance(source, bytes) else Path(source).read_bytes()


def _handler(arxiv: LocalArxiv) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "LocalArxiv/1"

        def log_message(self, format, *args) -> None:  # noqa: A002 - quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            if path == "/api/query":
                with arxiv._lock:
                    arxiv.requests[path] += 1
                self._api(parse_qs(parts.query))
            elif path.startswith("/pdf/"):
                paper_id = path.removeprefix("/pdf/").removesuffix(".pdf")
                with arxiv._lock:
                    arxiv.requests[f"/pdf/{paper_id}"] += 1
                    arxiv.in_flight += 1
                    arxiv.max_in_flight = max(arxiv.max_in_flight, arxiv.in_flight)
                try:
                    self._pdf(paper_id)
                finally:
                    with arxiv._lock:
                        arxiv.in_flight -= 1
            else:
                self._send(404, b"not found", "text/plain")

        def _api(self, query: dict[str, list[str]]) -> None:
            arxiv._sleep(arxiv.delay_s)
            ids = [i for i in ",".join(query.get("id_list", [])).split(",") if i]
            with arxiv._lock:
                arxiv.api_batches.append(ids)
            if arxiv.api_status is not None:
                self._send(arxiv.api_status, b"service unavailable", "text/plain")
                return
            max_results = int((query.get("max_results") or ["10"])[0])
            self._send(200, arxiv.feed(ids, max_results), "application/atom+xml; charset=utf-8")

        def _pdf(self, paper_id: str) -> None:
            arxiv._sleep(arxiv.delay_s)
            stall = arxiv._knob(arxiv.stall, paper_id)
            if stall is not None:
                arxiv._sleep(arxiv.stall[stall])
            with arxiv._lock:
                limited = arxiv._knob(arxiv.rate_limited, paper_id)
                if limited is not None and arxiv.rate_limited[limited][0] > 0:
                    left, retry_after = arxiv.rate_limited[limited]
                    arxiv.rate_limited[limited] = (left - 1, retry_after)
                    status = 429
                else:
                    failing = arxiv._knob(arxiv.fail_first, paper_id)
                    status = 200
                    if failing is not None and arxiv.fail_first[failing] > 0:
                        arxiv.fail_first[failing] -= 1
                        status = 500
            if status == 429:
                self._send(429, b"slow down", "text/plain",
                           {"Retry-After": f"{retry_after:g}"})
                return
            if status == 500:
                self._send(500, b"internal server error", "text/plain")
                return
            if arxiv._knob(arxiv.missing, paper_id) is not None:
                self._send(404, b"no such paper", "text/plain")
                return
            if arxiv._knob(arxiv.html, paper_id) is not None:
                self._send(200, HTML_PAGE, "text/html; charset=utf-8")
                return
            body = arxiv.pdf_body(paper_id)
            if body is None:
                self._send(404, b"no such paper", "text/plain")
                return
            length = arxiv._knob(arxiv.no_length, paper_id) is None
            self._send(200, body, "application/pdf", with_length=length)

        def _send(self, status: int, body: bytes, content_type: str,
                  headers: dict[str, str] | None = None, with_length: bool = True) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                if with_length:
                    self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                for start in range(0, len(body), 64 * 1024):
                    self.wfile.write(body[start:start + 64 * 1024])
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout under test); nothing to tell it

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pdf_dir", type=Path, help="directory of <id>.pdf ('/' in ids as '_')")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-s", type=float, default=0.0)
    args = parser.parse_args()
    server = LocalArxiv(delay_s=args.delay_s, port=args.port)
    for path in sorted(args.pdf_dir.glob("*.pdf")):
        stem = path.stem  # old-style ids are stored as archive_NNNNNNN
        old_style = re.match(r"^[a-z-]+(\.[A-Z]{2})?_\d{7}", stem)
        paper_id = stem.replace("_", "/", 1) if old_style else stem
        server.add(paper_id, pdf=path)
    with server:
        print(f"CITEWEAVE_FETCHER_ARXIV_API_URL='{server.api_url}'")
        print(f"CITEWEAVE_FETCHER_PDF_URL_TEMPLATE='{server.pdf_url_template}'")
        print(f"serving {len(server.papers)} papers; Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
