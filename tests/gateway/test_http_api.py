"""The gateway's JSON HTTP API and its server-sent events.

Two layers: the HTTP layer alone (a scripted core behind the real Guard, served by aiohttp's test
server with handler cancellation on, as app.py runs it) for the cases that need exact control:
forms, limits, keys, errors before and after a stream starts, a disconnect; then the real
gateway process over the whole stack: JSON and streamed generation, a PDF upload, a file that is
not a PDF, search, answer, keys and limits, and a browser that goes away mid-run."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from citeweave.gateway.v1 import gateway_pb2 as gw
from services.common.errors import InvalidArgument, Unavailable
from services.gateway import http_api
from services.gateway.guard import Guard
from services.gateway.http_api import build_http_app, form_message
from services.gateway.settings import GatewaySettings
from tests.conftest import running_service
from tests.gateway.gateway_stack import (
    API_KEY,
    PDFS,
    QUERY,
    QUESTION,
    arxiv_fixture_papers,
    start_gateway,
    write_keys_file,
)
from tests.generator.scripted_openai import Reply, ScriptedOpenAi

NOT_A_PDF = b"PK\x03\x04 this is a zip file, not a paper"
MIB = 1024 * 1024


def parse_sse(body: str) -> list[tuple[str, dict]]:
    """(event, data) pairs of an event-stream body; keep-alive comments dropped."""
    events = []
    for block in body.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        name = next(line[7:] for line in lines if line.startswith("event: "))
        data = "\n".join(line[6:] for line in lines if line.startswith("data: "))
        events.append((name, json.loads(data)))
    return events


# --- the HTTP layer over a scripted core ---------------------------------------------------------


class ScriptedGateway:
    """Stands in for services.gateway.core.Gateway: what it yields, when it blocks and whether
    it was cancelled are set by each test."""

    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.requests: list[tuple[object, float | None]] = []
        self.fail_after_first: Exception | None = None
        self.first_event_delay_s = 0.0
        self.block = False
        self.blocked = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def info(self) -> gw.GetInfoResponse:
        return gw.GetInfoResponse(
            breadth=gw.Range(min=5, max=20, default=10), depth=gw.Range(min=1, max=5, default=2),
            diversity=gw.Range(min=0, max=1, default=0), max_abstract_chars=6000,
            max_pdf_bytes=self.settings.max_pdf_bytes, max_pdf_pages=60, papers=67,
            backends=["extractive"], default_backend="extractive")

    async def search(self, request, deadline_s=None) -> gw.SearchPapersResponse:
        self.requests.append((request, deadline_s))
        return gw.SearchPapersResponse(longlist=[gw.RankedPaper(
            paper=gw.Paper(id="2004.07180", title="SPECTER"), score=0.8, rank=1)])

    async def generate(
        self, request, deadline_s=None
    ) -> AsyncIterator[gw.GenerateRelatedWorkResponse]:
        self.requests.append((request, deadline_s))
        if request.WhichOneof("input") == "pdf" and not request.pdf.startswith(b"%PDF-"):
            raise InvalidArgument(f"{request.filename or 'the upload'} is not a PDF: upload the "
                                  "PDF of your paper")
        if not request.abstract.strip() and not request.pdf:
            raise InvalidArgument("give an abstract (text) or the PDF of your paper")
        await asyncio.sleep(self.first_event_delay_s)
        yield gw.GenerateRelatedWorkResponse(progress=gw.Progress(
            stage=gw.STAGE_EMBEDDING, percent=0, message="embedding the abstract"))
        if self.fail_after_first is not None:
            raise self.fail_after_first
        if self.block:
            self.blocked.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        yield gw.GenerateRelatedWorkResponse(progress=gw.Progress(
            stage=gw.STAGE_WRITING, percent=80, message="writing"))
        yield gw.GenerateRelatedWorkResponse(text_delta="A first try")
        yield gw.GenerateRelatedWorkResponse(reset=gw.TextReset(reason="the LLM failed"))
        for delta in ("SPECTER embeds papers ", "[1]."):
            yield gw.GenerateRelatedWorkResponse(text_delta=delta)
        yield gw.GenerateRelatedWorkResponse(progress=gw.Progress(
            stage=gw.STAGE_DONE, percent=100, message="done"))
        yield gw.GenerateRelatedWorkResponse(result=gw.GenerationResult(
            text="SPECTER embeds papers [1].", bibtex="@article{cohan2020specter,}",
            references=[gw.Reference(paper_id="2004.07180", marker="[1]", key="cohan2020specter",
                                     formatted="Cohan et al. SPECTER. 2020.",
                                     url="https://arxiv.org/abs/2004.07180")]))

    async def answer(self, request, deadline_s=None) -> AsyncIterator[gw.AnswerResponse]:
        self.requests.append((request, deadline_s))
        yield gw.AnswerResponse(result=gw.GenerationResult(text="An answer.",
                                                           input_kind="question"))


@pytest.fixture
async def make_client(tmp_path):
    """(client, scripted core) for the given gateway settings; `keys` writes an API keys file."""
    clients: list[TestClient] = []

    async def make(keys: dict | None = None, **settings) -> tuple[TestClient, ScriptedGateway]:
        if keys is not None:
            settings["api_keys_file"] = write_keys_file(tmp_path / "keys.json", **keys)
        gateway_settings = GatewaySettings(**settings)
        core = ScriptedGateway(gateway_settings)
        client = TestClient(TestServer(build_http_app(core, Guard(gateway_settings))))
        await client.start_server()
        clients.append(client)
        return client, core

    yield make
    for client in clients:
        await client.close()


async def test_json_result_and_the_request_as_sent(make_client):
    client, core = await make_client()
    response = await client.post("/api/v1/generate", json={
        "abstract": QUERY, "options": {"breadth": 7, "depth": 1, "diversity": 0.25},
        "citation_style": "CITATION_STYLE_AUTHOR_YEAR"}, headers={"X-Request-Timeout": "30"})
    assert response.status == 200
    body = await response.json()
    assert set(body) >= {"text", "references", "bibtex", "shortlist", "generation_error"}
    assert body["text"] == "SPECTER embeds papers [1]."
    assert body["references"][0]["paper_id"] == "2004.07180"
    request, deadline_s = core.requests[-1]
    assert request.options.breadth == 7 and request.options.HasField("diversity")
    assert request.citation_style == gw.CITATION_STYLE_AUTHOR_YEAR and deadline_s == 30.0


async def test_stream_events_in_order(make_client):
    client, _ = await make_client()
    response = await client.post("/api/v1/generate?stream=1", json={"abstract": QUERY})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = parse_sse(await response.text())
    assert [name for name, _ in events] == [
        "progress", "progress", "delta", "reset", "delta", "delta", "progress", "result"]
    percents = [data["percent"] for name, data in events if name == "progress"]
    assert percents == sorted(percents) == [0, 80, 100]
    assert events[0][1]["stage"] == "STAGE_EMBEDDING"
    assert events[3][1] == {"reason": "the LLM failed"}
    assert "".join(d["text"] for n, d in events[4:6]) == events[-1][1]["text"]


async def test_bad_input_is_a_status_even_when_a_stream_was_asked(make_client):
    client, _ = await make_client()
    response = await client.post("/api/v1/generate", json={"abstract": "   "},
                                 headers={"Accept": "text/event-stream"})
    assert response.status == 400
    assert (await response.json())["error"] == {
        "code": "INVALID_ARGUMENT", "message": "give an abstract (text) or the PDF of your paper"}


async def test_error_after_the_stream_started_is_its_last_event(make_client):
    client, core = await make_client()
    core.fail_after_first = Unavailable("the retriever (127.0.0.1:1) is unavailable: down")
    response = await client.post("/api/v1/generate", json={"abstract": QUERY},
                                 headers={"Accept": "text/event-stream"})
    assert response.status == 200
    events = parse_sse(await response.text())
    assert [name for name, _ in events] == ["progress", "error"]
    assert events[-1][1] == {"error": {
        "code": "UNAVAILABLE", "message": "the retriever (127.0.0.1:1) is unavailable: down"}}
    # Without a stream the same failure is the status.
    response = await client.post("/api/v1/generate", json={"abstract": QUERY})
    assert response.status == 503
    assert (await response.json())["error"]["code"] == "UNAVAILABLE"


async def test_a_core_that_stops_without_a_result_ends_the_stream(make_client):
    client, core = await make_client()
    core.fail_after_first = asyncio.CancelledError()  # not the client's doing
    response = await client.post("/api/v1/generate", json={"abstract": QUERY},
                                 headers={"Accept": "text/event-stream"})
    events = await asyncio.wait_for(response.text(), 10)
    assert parse_sse(events)[-1] == ("error", {"error": {
        "code": "INTERNAL", "message": "the request stopped before its result"}})


async def test_a_quiet_stream_is_kept_alive(make_client, monkeypatch):
    monkeypatch.setattr(http_api, "KEEPALIVE_S", 0.05)
    client, core = await make_client()
    core.first_event_delay_s = 0.3
    core.fail_after_first = InvalidArgument("no paper in the corpus matches these filters")
    response = await client.post("/api/v1/generate?stream=true", json={"abstract": QUERY})
    body = await response.text()
    assert response.status == 200 and body.startswith(": keepalive\n\n")
    # Once the stream has started, even bad input can only be an event.
    assert parse_sse(body)[-1] == ("error", {"error": {
        "code": "INVALID_ARGUMENT", "message": "no paper in the corpus matches these filters"}})


async def test_multipart_form_with_a_pdf(make_client):
    client, core = await make_client()
    pdf = (PDFS / arxiv_fixture_papers()[0]["file"]).read_bytes()[:20_000]
    form = aiohttp.FormData()
    form.add_field("pdf", pdf, filename="paper.pdf", content_type="application/pdf")
    for name, value in (("breadth", "5"), ("depth", "1"), ("diversity", "0.5"),
                        ("style", "author-year"), ("backend", "extractive"), ("abstract", "")):
        form.add_field(name, value)
    response = await client.post("/api/v1/generate", data=form)
    assert response.status == 200, await response.text()
    request, _ = core.requests[-1]
    assert request.pdf == pdf and request.filename == "paper.pdf"
    assert request.WhichOneof("input") == "pdf", "an empty abstract field is no abstract"
    assert (request.options.breadth, request.options.depth) == (5, 1)
    assert request.citation_style == gw.CITATION_STYLE_AUTHOR_YEAR
    assert request.backend == gw.GENERATOR_BACKEND_EXTRACTIVE


async def test_a_file_that_is_not_a_pdf(make_client):
    client, _ = await make_client()
    form = aiohttp.FormData()
    form.add_field("pdf", NOT_A_PDF, filename="paper.zip", content_type="application/zip")
    response = await client.post("/api/v1/generate", data=form)
    assert response.status == 400
    assert (await response.json())["error"]["message"] == (
        "paper.zip is not a PDF: upload the PDF of your paper")


def test_forms_mean_what_the_json_means():
    fields = {"abstract": [QUERY], "breadth": ["12"], "depth": ["3"], "diversity": ["0.3"],
              "rule": ["citegeist-min"], "style": ["NUMERIC"], "backend": ["openai"],
              "categories": ["cs.CL, cs.IR", "cs.DL"], "topics": ["3,4"],
              "date_from": ["2019-01-01"], "date_to": [""]}
    from_form = form_message(gw.GenerateRelatedWorkRequest, fields, None, "")
    from_json = http_api._parse({
        "abstract": QUERY, "citation_style": "CITATION_STYLE_NUMERIC",
        "backend": "GENERATOR_BACKEND_OPENAI",
        "options": {"breadth": 12, "depth": 3, "diversity": 0.3,
                    "rule": "SELECTION_RULE_CITEGEIST_MIN",
                    "filters": {"categories": ["cs.CL", "cs.IR", "cs.DL"], "topics": [3, 4],
                                "date_from": "2019-01-01"}}}, gw.GenerateRelatedWorkRequest)
    assert from_form == from_json
    answer = form_message(gw.AnswerRequest, {"question": [QUESTION], "breadth": ["5"]}, None, "")
    assert answer.question == QUESTION and answer.options.breadth == 5


@pytest.mark.parametrize("fields, pdf, words", [
    ({"abstract": ["x"], "breadth": ["ten"]}, None, "breadth must be a whole number, got 'ten'"),
    ({"abstract": ["x"], "diversity": ["lots"]}, None, "diversity must be a number"),
    ({"abstract": ["x"], "style": ["harvard"]}, None,
     "style must be one of numeric, author-year, got 'harvard'"),
    ({"abstract": ["x"], "bredth": ["5"]}, None, "unknown form field bredth"),
    ({"abstract": ["x"]}, b"%PDF-1.4", "send an abstract or a PDF, not both"),
])
def test_form_mistakes_are_named(fields, pdf, words):
    with pytest.raises(http_api.ApiError) as error:
        form_message(gw.GenerateRelatedWorkRequest, fields, pdf, "a.pdf")
    assert error.value.status == 400 and words in error.value.message


async def test_form_mistakes_over_http(make_client):
    client, core = await make_client()
    response = await client.post("/api/v1/generate", data={"abstract": QUERY, "depth": "two"})
    assert response.status == 400
    assert "depth must be a whole number" in (await response.json())["error"]["message"]
    response = await client.post("/api/v1/generate", data="{not json",
                                 headers={"Content-Type": "application/json"})
    assert response.status == 400
    assert "not valid JSON" in (await response.json())["error"]["message"]
    response = await client.post("/api/v1/generate", json={"abstract": QUERY, "bredth": 5})
    assert response.status == 400
    assert "bredth" in (await response.json())["error"]["message"]
    response = await client.post("/api/v1/generate", data=b"abstract",
                                 headers={"Content-Type": "text/plain"})
    assert response.status == 415
    assert not core.requests, "no bad request reached the core"


async def test_bodies_over_the_pdf_limit_are_refused(make_client):
    client, core = await make_client(max_pdf_mb=0.05)  # 52 KB: a form body may be 1 MB more
    # Declared too large: refused before the body is read.
    big = b"%PDF-" + b"0" * (2 * MIB)
    form = aiohttp.FormData()
    form.add_field("pdf", big, filename="big.pdf", content_type="application/pdf")
    started = time.monotonic()
    response = await client.post("/api/v1/generate", data=form)
    assert response.status == 413
    error = (await response.json())["error"]
    assert error["code"] == "PAYLOAD_TOO_LARGE"
    assert error["message"] == "the upload is 2 MB; this service accepts a PDF of up to 52 KB"
    assert time.monotonic() - started < 10
    # Under the body limit, but the PDF itself is too large: refused while it is read.
    form = aiohttp.FormData()
    form.add_field("pdf", b"%PDF-" + b"0" * 200_000, filename="big.pdf",
                   content_type="application/pdf")
    response = await client.post("/api/v1/generate", data=form)
    assert response.status == 413
    assert "larger than 52 KB" in (await response.json())["error"]["message"]

    # No declared length (chunked): the PDF part is still cut off at the limit.
    async def chunks():
        body = form_body(b"%PDF-" + b"0" * 300_000)
        for start in range(0, len(body), 8192):
            yield body[start:start + 8192]

    response = await client.post("/api/v1/generate", data=chunks(), headers={
        "Content-Type": "multipart/form-data; boundary=XyZ"})
    assert response.status == 413
    # JSON carries the PDF as base64; past its limit it is refused too.
    response = await client.post("/api/v1/generate", json={"pdf": "A" * (2 * MIB)})
    assert response.status == 413
    assert not core.requests


def form_body(pdf: bytes) -> bytes:
    return (b"--XyZ\r\nContent-Disposition: form-data; name=\"pdf\"; filename=\"a.pdf\"\r\n"
            b"Content-Type: application/pdf\r\n\r\n" + pdf + b"\r\n--XyZ--\r\n")


async def test_keys(make_client):
    client, _ = await make_client(keys={})
    info = await client.get("/api/v1/info")
    assert info.status == 200 and (await info.json())["auth_required"] is True
    for headers, words in (({}, "needs an API key"),
                           ({"X-API-Key": "wrong-key-0123456789"}, "not valid"),
                           ({"Authorization": "Basic " + API_KEY}, "needs an API key")):
        response = await client.post("/api/v1/generate", json={"abstract": QUERY},
                                     headers=headers)
        assert response.status == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        error = (await response.json())["error"]
        assert error["code"] == "UNAUTHENTICATED" and words in error["message"]
    for headers in ({"X-API-Key": API_KEY}, {"Authorization": f"Bearer {API_KEY}"}):
        response = await client.post("/api/v1/search", json={"abstract": QUERY},
                                     headers=headers)
        assert response.status == 200, await response.text()
        assert (await response.json())["longlist"][0]["paper"]["id"] == "2004.07180"


async def test_rate_limit_says_when_to_retry(make_client):
    client, _ = await make_client(keys={"requests_per_minute": 2})
    key = {"X-API-Key": API_KEY}
    for _ in range(2):
        assert (await client.post("/api/v1/search", json={"abstract": QUERY},
                                  headers=key)).status == 200
    response = await client.post("/api/v1/search", json={"abstract": QUERY}, headers=key)
    assert response.status == 429
    retry_after = int(response.headers["Retry-After"])
    assert 1 <= retry_after <= 30, "one request's worth of a 2-a-minute bucket"
    error = (await response.json())["error"]
    assert error["code"] == "RESOURCE_EXHAUSTED" and error["retry_after_s"] == retry_after
    assert "2 requests per minute" in error["message"]


async def test_concurrency_limit_holds_for_the_whole_stream(make_client):
    client, core = await make_client(keys={"max_concurrent": 1})
    key = {"X-API-Key": API_KEY, "Accept": "text/event-stream"}
    core.block = True
    first = await client.post("/api/v1/generate", json={"abstract": QUERY}, headers=key)
    await asyncio.wait_for(core.blocked.wait(), 10)
    second = await client.post("/api/v1/generate", json={"abstract": QUERY}, headers=key)
    assert second.status == 429 and second.headers["Retry-After"] == "5"
    assert "lab already has 1 requests running" in (await second.json())["error"]["message"]
    first.close()
    await asyncio.wait_for(core.cancelled.wait(), 10)


async def test_a_client_that_goes_away_cancels_the_work(make_client):
    client, core = await make_client()
    core.block = True
    response = await client.post("/api/v1/generate", json={"abstract": QUERY},
                                 headers={"Accept": "text/event-stream"})
    assert (await response.content.readuntil(b"\n\n")).startswith(b"event: progress")
    await asyncio.wait_for(core.blocked.wait(), 10)
    response.close()  # the connection drops, as when the tab is closed
    await asyncio.wait_for(core.cancelled.wait(), 10)


async def test_page_routes_and_api_errors(make_client):
    client, _ = await make_client()
    page = await client.get("/")
    html = await page.text()
    assert page.status == 200 and 'src="/static/app.js"' in html
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    for asset, kind in (("app.js", "javascript"), ("style.css", "text/css")):
        response = await client.get(f"/static/{asset}")
        assert response.status == 200 and kind in response.headers["Content-Type"]
    assert (await client.get("/static/../http_api.py")).status in (403, 404)
    missing = await client.get("/api/v1/nothing")
    assert missing.status == 404
    assert (await missing.json())["error"]["code"] == "NOT_FOUND"
    wrong_method = await client.get("/api/v1/generate")
    assert wrong_method.status == 405
    assert (await wrong_method.json())["error"]["code"] == "METHOD_NOT_ALLOWED"
    answer = await client.post("/api/v1/answer", data={"question": QUESTION})
    assert answer.status == 200 and (await answer.json())["input_kind"] == "question"


def test_the_page_loads_nothing_from_elsewhere():
    for asset in http_api.WEB_DIR.iterdir():
        text = asset.read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text.replace(
            "https://arxiv.org/abs/", "")), f"{asset.name} refers to another host"
        assert "@import" not in text and "<iframe" not in text


# --- the real gateway over the whole stack -------------------------------------------------------


def assert_citations_resolve(result: dict) -> None:
    shortlisted = {p["paper"]["id"] for p in result["shortlist"]}
    markers = {r["marker"]: r for r in result["references"]}
    assert markers and {r["paper_id"] for r in result["references"]} <= shortlisted
    used = set(re.findall(r"\[\d+\]", result["text"]))
    assert used and used <= set(markers), "every marker in the text has a reference"
    for reference in result["references"]:
        assert f"{{{reference['key']}," in result["bibtex"]


async def post(url: str, path: str, **kwargs) -> tuple[int, dict | str, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + path, timeout=aiohttp.ClientTimeout(total=300),
                                **kwargs) as response:
            if response.content_type == "text/event-stream":
                return response.status, await response.text(), dict(response.headers)
            return response.status, await response.json(), dict(response.headers)


async def test_stack_json_generate(gateway_stack):
    status, result, _ = await post(gateway_stack.http_url, "/api/v1/generate", json={
        "abstract": QUERY, "options": {"breadth": 5, "depth": 1}})
    assert status == 200, result
    assert len(result["shortlist"]) == 5 and len(result["longlist"]) == 15
    assert result["generation_error"] == "" and result["input_kind"] == "abstract"
    assert_citations_resolve(result)


async def test_stack_streamed_generate(gateway_stack):
    status, body, headers = await post(
        gateway_stack.http_url, "/api/v1/generate", data={"abstract": QUERY, "breadth": "5"},
        headers={"Accept": "text/event-stream"})
    assert status == 200 and headers["X-Accel-Buffering"] == "no"
    events = parse_sse(body)
    names = [name for name, _ in events]
    assert names[0] == "progress" and names[-1] == "result" and names.count("result") == 1
    assert "error" not in names
    progress = [data for name, data in events if name == "progress"]
    percents = [p["percent"] for p in progress]
    assert percents == sorted(percents) and percents[-1] == 100
    stages = [p["stage"] for p in progress]
    assert stages.index("STAGE_FETCHING") < stages.index("STAGE_WRITING") < stages.index(
        "STAGE_DONE")
    # Deltas come once the papers are summarized, before the result.
    summarized_at = max(i for i, (name, data) in enumerate(events)
                        if name == "progress" and data["stage"] == "STAGE_SUMMARIZING")
    assert summarized_at < names.index("delta") < names.index("result")
    text = ""
    for name, data in events:
        if name == "reset":
            text = ""
        elif name == "delta":
            text += data["text"]
    result = events[-1][1]
    assert text == result["text"]
    assert_citations_resolve(result)


async def test_stack_pdf_upload(gateway_stack):
    paper = next(p for p in arxiv_fixture_papers() if p["id"] == "2301.13298")
    form = aiohttp.FormData()
    form.add_field("pdf", (PDFS / paper["file"]).read_bytes(), filename=paper["file"],
                   content_type="application/pdf")
    form.add_field("breadth", "5")
    status, body, _ = await post(gateway_stack.http_url, "/api/v1/generate", data=form,
                                 headers={"Accept": "text/event-stream"})
    assert status == 200
    events = parse_sse(body)
    assert f"pages of {paper['file']} embedded" in events[1][1]["message"]
    result = events[-1][1]
    assert events[-1][0] == "result" and result["input_kind"] == "pdf"
    assert_citations_resolve(result)


async def test_stack_not_a_pdf(gateway_stack):
    form = aiohttp.FormData()
    form.add_field("pdf", NOT_A_PDF, filename="notes.zip", content_type="application/zip")
    status, body, _ = await post(gateway_stack.http_url, "/api/v1/generate", data=form,
                                 headers={"Accept": "text/event-stream"})
    assert status == 400
    assert body["error"] == {"code": "INVALID_ARGUMENT",
                             "message": "notes.zip is not a PDF: upload the PDF of your paper"}


async def test_stack_search_answer_info(gateway_stack):
    async with aiohttp.ClientSession() as session:
        async with session.get(gateway_stack.http_url + "/api/v1/info") as response:
            info = await response.json()
    assert info["breadth"] == {"min": 5, "max": 20, "default": 10}
    assert info["depth"]["default"] == 2 and info["diversity"]["default"] == 0
    assert info["papers"] == 67 and info["auth_required"] is False
    status, reply, _ = await post(gateway_stack.http_url, "/api/v1/search",
                                  json={"abstract": QUERY, "options": {"breadth": 5}})
    assert status == 200 and [p["rank"] for p in reply["longlist"]] == list(range(1, 16))
    status, result, _ = await post(gateway_stack.http_url, "/api/v1/answer",
                                   json={"question": QUESTION, "options": {"breadth": 5}})
    assert status == 200 and result["input_kind"] == "question"
    assert_citations_resolve(result)
    status, error, _ = await post(gateway_stack.http_url, "/api/v1/generate",
                                  json={"abstract": QUERY, "options": {"breadth": 50}})
    assert status == 400 and "breadth must be between 5 and 20" in error["error"]["message"]


@pytest.fixture(scope="module")
def keyed_http_url(gateway_stack, tmp_path_factory):
    keys = write_keys_file(tmp_path_factory.mktemp("http-keys") / "keys.json",
                           requests_per_minute=2)
    gateway = start_gateway(gateway_stack, {"api_keys_file": str(keys)}, name="gateway-http-keys")
    yield f"http://127.0.0.1:{gateway.settings['http_port']}"
    gateway.stop()


async def test_stack_keys_and_rate_limit(keyed_http_url):
    request = {"abstract": QUERY, "options": {"breadth": 5}}
    status, body, headers = await post(keyed_http_url, "/api/v1/search", json=request)
    assert status == 401 and "needs an API key" in body["error"]["message"]
    for _ in range(2):
        status, body, _ = await post(keyed_http_url, "/api/v1/search", json=request,
                                     headers={"Authorization": f"Bearer {API_KEY}"})
        assert status == 200, body
    status, body, headers = await post(keyed_http_url, "/api/v1/search", json=request,
                                       headers={"X-API-Key": API_KEY})
    assert status == 429 and 1 <= int(headers["Retry-After"]) <= 30
    assert f"retry in {headers['Retry-After']} s" in body["error"]["message"]


@pytest.fixture(scope="module")
def slow_llm():
    # Slow enough that a cancellation reaches the generator before the first answer, even on a
    # loaded machine.
    with ScriptedOpenAi(Reply(text="A summary.", delay_s=6.0)).running() as server:
        yield server


async def test_stack_closing_the_page_stops_the_work(gateway_stack, slow_llm, tmp_path):
    """Summaries go to a slow LLM one at a time; the browser goes away during the first. Without
    cancellation the other four would reach the LLM one after another."""
    settings = {"backend": "openai", "openai_base_url": slow_llm.base_url,
                "openai_model": "scripted", "max_concurrent_requests": "1", "max_retries": "0"}
    with running_service("generator", tmp_path, settings) as generator:
        gateway = start_gateway(gateway_stack, {"generator_addr": generator.addr},
                                name="gateway-http-cancel")
        try:
            url = f"http://127.0.0.1:{gateway.settings['http_port']}/api/v1/generate"
            async with aiohttp.ClientSession() as session:
                response = await session.post(url, json={
                    "abstract": QUERY, "options": {"breadth": 5, "depth": 1}},
                    headers={"Accept": "text/event-stream"})
                assert response.status == 200
                deadline = time.monotonic() + 120
                while not slow_llm.requests:
                    assert time.monotonic() < deadline, "the LLM was never asked"
                    await asyncio.sleep(0.02)
                response.close()
            reached = len(slow_llm.requests)
            await asyncio.sleep(13)  # two LLM answers' time
            logs = (gateway_stack.log("gateway-http-cancel")[-4000:] + "\n"
                    + (tmp_path / "generator.log").read_text()[-4000:])
            assert len(slow_llm.requests) == reached == 1, logs
            assert "request cancelled by the caller" in gateway_stack.log("gateway-http-cancel")
        finally:
            gateway.stop()
            slow_llm.reset()
