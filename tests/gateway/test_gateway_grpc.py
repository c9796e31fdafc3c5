"""The gateway end to end over gRPC, every service a real process: an abstract, a PDF or a
question in, a streamed section whose citations all resolve out; bad input, keys, limits, TLS,
and a disconnecting client whose work stops downstream."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time

import grpc
import pytest

from citeweave.gateway.v1 import gateway_pb2 as gw
from citeweave.gateway.v1 import gateway_pb2_grpc
from services.common.clients import is_serving
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


def _stub(addr: str) -> tuple[grpc.Channel, gateway_pb2_grpc.GatewayServiceStub]:
    channel = grpc.insecure_channel(addr)
    return channel, gateway_pb2_grpc.GatewayServiceStub(channel)


@pytest.fixture
def stub(gateway_stack):
    channel, stub = _stub(gateway_stack.grpc_addr)
    with channel:
        yield stub


def _collect(events) -> tuple[list[gw.Progress], str, gw.GenerationResult]:
    progress, parts, result = [], [], None
    for event in events:
        kind = event.WhichOneof("event")
        if kind == "progress":
            progress.append(event.progress)
        elif kind == "text_delta":
            parts.append(event.text_delta)
        elif kind == "reset":
            parts.clear()
        else:
            assert result is None, "one result per stream"
            result = event.result
    assert result is not None
    return progress, "".join(parts), result


def _assert_citations_resolve(result: gw.GenerationResult) -> None:
    shortlisted = {p.paper.id for p in result.shortlist}
    references = {r.marker: r for r in result.references}
    assert references and set(r.paper_id for r in result.references) <= shortlisted
    markers = set(re.findall(r"\[\d+\]", result.text))
    assert markers and markers <= set(references), "every marker in the text has a reference"
    for reference in result.references:
        assert reference.formatted and reference.key
        assert f"{{{reference.key}," in result.bibtex
        if not reference.paper_id.startswith("10."):
            assert reference.url == f"https://arxiv.org/abs/{reference.paper_id}"


def test_abstract_in_streamed_section_out(stub):
    progress, streamed, result = _collect(stub.GenerateRelatedWork(
        gw.GenerateRelatedWorkRequest(abstract=QUERY, options=gw.RetrievalOptions(breadth=5)),
        timeout=300))
    percents = [p.percent for p in progress]
    assert percents == sorted(percents) and percents[-1] == 100
    stages = [p.stage for p in progress]
    for stage in (gw.STAGE_EMBEDDING, gw.STAGE_LONGLIST, gw.STAGE_FETCHING, gw.STAGE_SHORTLIST,
                  gw.STAGE_SUMMARIZING, gw.STAGE_WRITING, gw.STAGE_DONE):
        assert stage in stages, gw.Stage.Name(stage)
    fetching = [p for p in progress if p.stage == gw.STAGE_FETCHING]
    assert fetching[-1].done == fetching[-1].total == 15
    assert streamed == result.text, "the deltas add up to the final text"
    assert len(result.longlist) == 15 and len(result.shortlist) == 5
    _assert_citations_resolve(result)
    assert result.report.backend == "extractive"
    assert result.report.papers_cited == 5 and not result.generation_error
    with_pdf = {p["id"] for p in arxiv_fixture_papers()}
    for paper in result.shortlist:
        if paper.paper.id in with_pdf:
            assert not paper.abstract_only and len(paper.chosen_pages) == 2
        else:
            assert paper.abstract_only and paper.fallback_reason
    assert any("abstract only" in w for w in result.warnings) == any(
        p.abstract_only for p in result.shortlist)
    timed = {t.stage for t in result.timings}
    assert {gw.STAGE_EMBEDDING, gw.STAGE_LONGLIST, gw.STAGE_FETCHING, gw.STAGE_SUMMARIZING,
            gw.STAGE_WRITING} <= timed
    assert result.input_kind == "abstract"


def test_author_year_style(stub):
    _, _, result = _collect(stub.GenerateRelatedWork(gw.GenerateRelatedWorkRequest(
        abstract=QUERY, options=gw.RetrievalOptions(breadth=5, depth=1),
        citation_style=gw.CITATION_STYLE_AUTHOR_YEAR), timeout=300))
    assert re.search(r"\([A-Z][^()]+, \d{4}[a-z]?\)", result.text)
    assert not re.search(r"\[\d+\]", result.text)


def test_pdf_in(stub):
    longeval = next(p for p in arxiv_fixture_papers() if p["id"] == "2301.13298")
    progress, _, result = _collect(stub.GenerateRelatedWork(gw.GenerateRelatedWorkRequest(
        pdf=(PDFS / longeval["file"]).read_bytes(), filename=longeval["file"],
        options=gw.RetrievalOptions(breadth=5)), timeout=300))
    assert result.input_kind == "pdf"
    assert "pages of" in progress[1].message
    # LongEval is in the corpus: the paper itself is not its own related work.
    assert "2301.13298" not in {p.paper.id for p in result.longlist}
    assert any("2301.13298 is the input paper itself" in w for w in result.warnings)
    _assert_citations_resolve(result)


def test_answer_cites_corpus_papers(stub):
    progress, streamed, result = _collect(stub.Answer(
        gw.AnswerRequest(question=QUESTION, options=gw.RetrievalOptions(breadth=5)), timeout=300))
    assert progress[-1].percent == 100 and streamed == result.text
    assert result.input_kind == "question"
    _assert_citations_resolve(result)


def test_search_papers_is_the_longlist(stub):
    reply = stub.SearchPapers(gw.SearchPapersRequest(abstract=QUERY), timeout=60)
    assert len(reply.longlist) == 30 and [p.rank for p in reply.longlist] == list(range(1, 31))
    assert reply.longlist[0].paper.id == "2004.07180"  # SPECTER is the closest paper


def test_get_info(stub):
    info = stub.GetInfo(gw.GetInfoRequest(), timeout=10)
    assert (info.breadth.min, info.breadth.max, info.breadth.default) == (5, 20, 10)
    assert (info.depth.min, info.depth.max, info.depth.default) == (1, 5, 2)
    assert info.diversity.max == 1 and info.diversity.default == 0
    assert info.papers == 67 and not info.auth_required
    assert "extractive" in info.backends and info.default_backend == "extractive"


@pytest.mark.parametrize("request_, expected", [
    (gw.GenerateRelatedWorkRequest(), "give an abstract"),
    (gw.GenerateRelatedWorkRequest(abstract="   "), "give an abstract"),
    (gw.GenerateRelatedWorkRequest(abstract="x" * 7000), "at most 6,000"),
    (gw.GenerateRelatedWorkRequest(abstract=QUERY, options=gw.RetrievalOptions(breadth=3)),
     "breadth must be between 5 and 20"),
    (gw.GenerateRelatedWorkRequest(abstract=QUERY, options=gw.RetrievalOptions(depth=9)),
     "depth must be between 1 and 5"),
    (gw.GenerateRelatedWorkRequest(abstract=QUERY, options=gw.RetrievalOptions(diversity=1.5)),
     "diversity must be between 0 and 1"),
    (gw.GenerateRelatedWorkRequest(abstract=QUERY, options=gw.RetrievalOptions(
        filters=gw.Filters(date_from="May 2024"))), "YYYY-MM-DD"),
    (gw.GenerateRelatedWorkRequest(pdf=NOT_A_PDF, filename="paper.zip"),
     "paper.zip is not a PDF"),
    (gw.GenerateRelatedWorkRequest(abstract=QUERY, citation_style=7), "citation_style"),
])
def test_bad_requests_are_invalid_argument(stub, request_, expected):
    with pytest.raises(grpc.RpcError) as error:
        list(stub.GenerateRelatedWork(request_, timeout=60))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert expected in error.value.details()


def test_too_many_pdf_pages_is_refused_before_any_work(gateway_stack):
    specter = next(p for p in arxiv_fixture_papers() if p["id"] == "2004.07180")
    gateway = start_gateway(gateway_stack, {"max_pdf_pages": "3"}, name="gateway-pages")
    try:
        channel, stub = _stub(gateway.addr)
        with channel, pytest.raises(grpc.RpcError) as error:
            stub.SearchPapers(gw.SearchPapersRequest(pdf=(PDFS / specter["file"]).read_bytes(),
                                                     filename="specter.pdf"), timeout=60)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "specter.pdf has 13 pages; PDFs of up to 3 pages" in error.value.details()
    finally:
        gateway.stop()


@pytest.fixture(scope="module")
def keyed_gateway(gateway_stack, tmp_path_factory):
    """A second gateway on the same services with API keys: tenant "lab" may start 3 requests a
    minute, 1 at a time; tenant "other" has the defaults."""
    keys = write_keys_file(tmp_path_factory.mktemp("keys") / "keys.json",
                           requests_per_minute=3, max_concurrent=1)
    gateway = start_gateway(gateway_stack, {"api_keys_file": str(keys)}, name="gateway-keys")
    yield gateway
    gateway.stop()


def _info(stub, key: str | None):
    metadata = (("x-api-key", key),) if key else ()
    return stub.GetInfo(gw.GetInfoRequest(), metadata=metadata, timeout=10)


def test_keys_wrong_or_missing_is_unauthenticated(keyed_gateway):
    channel, stub = _stub(keyed_gateway.addr)
    with channel:
        # GetInfo is open: it is where a client learns that it needs a key.
        assert _info(stub, None).auth_required
        for key, words in ((None, "needs an API key"), ("wrong-key-0123456789", "not valid")):
            metadata = (("x-api-key", key),) if key else ()
            with pytest.raises(grpc.RpcError) as error:
                list(stub.GenerateRelatedWork(gw.GenerateRelatedWorkRequest(abstract=QUERY),
                                              metadata=metadata, timeout=30))
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert words in error.value.details()
            with pytest.raises(grpc.RpcError) as error:
                stub.SearchPapers(gw.SearchPapersRequest(abstract=QUERY), metadata=metadata,
                                  timeout=30)
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_rate_and_concurrency_limits_per_key(keyed_gateway):
    channel, stub = _stub(keyed_gateway.addr)
    lab = (("x-api-key", API_KEY),)
    with channel:
        # One request in flight for "lab": a second at the same time is refused.
        first = stub.GenerateRelatedWork(gw.GenerateRelatedWorkRequest(
            abstract=QUERY, options=gw.RetrievalOptions(breadth=5)), metadata=lab, timeout=300)
        next(first)  # the first progress event: the request holds its slot
        with pytest.raises(grpc.RpcError) as busy:
            list(stub.GenerateRelatedWork(gw.GenerateRelatedWorkRequest(abstract=QUERY),
                                          metadata=lab, timeout=30))
        assert busy.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "lab already has 1 requests running" in busy.value.details()
        # Another tenant is not held back by "lab".
        other = stub.SearchPapers(gw.SearchPapersRequest(abstract=QUERY), timeout=60,
                                  metadata=(("x-api-key", "other-key-0123456789abcdef"),))
        assert len(other.longlist) == 30
        _collect(first)
        # One of the three tokens went to the first request (a refused one takes none); the
        # bucket refills at one per 20 s, so within three more requests one is refused.
        passed = 0
        with pytest.raises(grpc.RpcError) as limited:
            for passed in range(1, 4):
                stub.SearchPapers(gw.SearchPapersRequest(abstract=QUERY), metadata=lab, timeout=60)
        assert 2 <= passed <= 3
    assert limited.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "3 requests per minute" in limited.value.details()
    retry_after = dict(limited.value.trailing_metadata())["retry-after"]
    assert 1 <= int(retry_after) <= 20, "one request's worth of a 3-a-minute bucket"
    assert f"retry in {retry_after} s" in limited.value.details()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls(gateway_stack, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    settings = {"tls_cert_file": str(cert), "tls_key_file": str(key)}
    # The launcher's readiness probe speaks plaintext, so this gateway is probed over TLS here.
    from services.common.launcher import ServiceProcess, free_port

    process = ServiceProcess("gateway", free_port(), {
        "embedder_addrs": gateway_stack.addr("embedder"),
        **{f"{s}_addr": gateway_stack.addr(s) for s in ("retriever", "fetcher", "generator")},
        "http_port": str(free_port()), **settings}, log_path=tmp_path / "tls.log").start()
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        deadline = time.monotonic() + 60
        while True:
            with grpc.secure_channel(process.addr, credentials) as channel:
                try:
                    info = gateway_pb2_grpc.GatewayServiceStub(channel).GetInfo(
                        gw.GetInfoRequest(), timeout=2)
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline, process.log_tail()
                    time.sleep(0.5)
        assert info.breadth.default == 10
        assert not is_serving(process.addr), "plaintext is not served when TLS is on"
    finally:
        process.stop()


def test_bad_keys_file_stops_start_up(tmp_path):
    from tests.conftest import start_up_failure_log

    keys = tmp_path / "keys.json"
    keys.write_text('{"short": {"tenant": "lab"}}')
    log = start_up_failure_log("gateway", {"api_keys_file": str(keys)}, tmp_path)
    assert "at least 16 characters" in log


@pytest.fixture(scope="module")
def slow_llm():
    with ScriptedOpenAi(Reply(text="A summary.", delay_s=6.0)).running() as server:
        yield server


def test_client_disconnect_cancels_downstream_work(gateway_stack, slow_llm, tmp_path):
    """Summaries go to a slow LLM one at a time; the client goes away during the first. Without
    cancellation the other four would reach the LLM one after another."""
    settings = {"backend": "openai", "openai_base_url": slow_llm.base_url,
                "openai_model": "scripted", "max_concurrent_requests": "1", "max_retries": "0"}
    with running_service("generator", tmp_path, settings) as generator:
        gateway = start_gateway(gateway_stack, {"generator_addr": generator.addr},
                                name="gateway-cancel")
        try:
            channel, stub = _stub(gateway.addr)
            with channel:
                call = stub.GenerateRelatedWork(gw.GenerateRelatedWorkRequest(
                    abstract=QUERY, options=gw.RetrievalOptions(breadth=5, depth=1)), timeout=300)

                def disconnect_when_the_llm_is_asked() -> None:
                    while not slow_llm.requests:
                        time.sleep(0.02)
                    call.cancel()

                threading.Thread(target=disconnect_when_the_llm_is_asked, daemon=True).start()
                with pytest.raises(grpc.RpcError) as error:
                    list(call)
                assert error.value.code() == grpc.StatusCode.CANCELLED
            reached = len(slow_llm.requests)
            time.sleep(13)  # two LLM answers' time
            assert len(slow_llm.requests) == reached == 1
            assert "request cancelled by the caller" in gateway_stack.log("gateway-cancel")
        finally:
            gateway.stop()
            slow_llm.reset()
