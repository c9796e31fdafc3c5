"""The generator as a real process over gRPC, against a scripted OpenAI-compatible endpoint that
answers with hostile outputs. Whatever the endpoint does, every citation in a result resolves to a
shortlisted paper, and an LLM failure ends in the extractive writer's text, saying why."""

from __future__ import annotations

import gzip
import json
import re
import time
from pathlib import Path

import grpc
import pytest

from citeweave.generator.v1 import generator_pb2 as pb
from citeweave.generator.v1 import generator_pb2_grpc
from services.common.corpus import row_from_arxiv
from tests.conftest import running_service, start_up_failure_log
from tests.generator.scripted_openai import Reply, ScriptedOpenAi

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo" / "sample-10k.jsonl.gz"
API_KEY = "sk-test-secret-0123456789"
PAPER_COUNT = 4


def _demo_papers(n: int) -> list[pb.SourcePaper]:
    papers = []
    with gzip.open(DEMO, "rt", encoding="utf-8") as lines:
        for line in lines:
            row = row_from_arxiv(json.loads(line))
            if len(row.authors) >= 1 and len(row.abstract) > 400:
                papers.append(pb.SourcePaper(
                    id=row.id, title=row.title, abstract=row.abstract, authors=row.authors,
                    year=row.year, categories=row.categories,
                ))
            if len(papers) == n:
                return papers
    raise AssertionError("the demo corpus has too few usable papers")


@pytest.fixture(scope="module")
def papers() -> list[pb.SourcePaper]:
    return _demo_papers(PAPER_COUNT)


@pytest.fixture(scope="module")
def llm() -> ScriptedOpenAi:
    with ScriptedOpenAi().running() as server:
        yield server


@pytest.fixture(scope="module")
def generator(tmp_path_factory, llm):
    tmp = tmp_path_factory.mktemp("generator")
    key_file = tmp / "openai-key"
    key_file.write_text(API_KEY + "\n")
    settings = {
        "openai_base_url": llm.base_url, "openai_model": "scripted-model",
        "openai_api_key_file": str(key_file), "timeout_s": "1.5", "max_retries": "1",
        "output_retries": "1", "max_concurrent_requests": "2", "context_tokens": "4096",
        "synthesis_max_tokens": "800",
    }
    with running_service("generator", tmp, settings) as service:
        yield service


@pytest.fixture
def stub(generator, llm):
    llm.reset()
    with grpc.insecure_channel(generator.addr) as channel:
        yield generator_pb2_grpc.GeneratorServiceStub(channel)


def _synthesize(stub, papers, backend=pb.BACKEND_OPENAI, style=pb.CITATION_STYLE_NUMERIC,
                mode=pb.MODE_RELATED_WORK, timeout=60, summary_chars=300):
    request = pb.SynthesizeRequest(
        source_text="We study multimodal training for gesture recognition and graph models.",
        mode=mode, citation_style=style, backend=backend,
        summaries=[pb.PaperSummary(paper=p, summary=(p.abstract * 10)[:summary_chars])
                   for p in papers],
    )
    events = list(stub.Synthesize(request, timeout=timeout))
    assert events[-1].WhichOneof("event") == "result"
    return events, events[-1].result


def _shown_text(events) -> str:
    """What a client displays: the deltas since the last reset."""
    text = ""
    for event in events:
        kind = event.WhichOneof("event")
        if kind == "reset":
            text = ""
        elif kind == "text_delta":
            text += event.text_delta
    return text


def _prompt_keys(llm: ScriptedOpenAi) -> list[str]:
    prompt = llm.requests[-1].body["messages"][-1]["content"]
    return re.findall(r"^\[([a-z0-9]+)\] \"", prompt, flags=re.MULTILINE)


def _assert_integrity(result: pb.SynthesisResult, papers) -> None:
    ids = {p.id for p in papers}
    assert {c.paper_id for c in result.citations} <= ids
    for citation in result.citations:
        assert result.text[citation.start:citation.end] == citation.marker
    markers = set(re.findall(r"\[[\d, ]+\]", result.text))
    assert markers == {c.marker for c in result.citations if c.marker.startswith("[")}
    assert {r.paper_id for r in result.references} == {c.paper_id for c in result.citations}
    assert result.report.papers_cited == len({c.paper_id for c in result.citations})


def _good_text(keys: list[str]) -> str:
    return (
        f"Multimodal training improves unimodal recognition [{keys[0]}], and related models "
        f"combine several sources [{keys[1]}; {keys[2]}]. A further study extends the idea "
        f"[{keys[3]}]. Together these works frame our approach [{keys[0]}; {keys[3]}].\n\n"
        "They also leave open questions that we address."
    )


def _keys(stub, llm, papers) -> list[str]:
    """Runs one scripted synthesis to learn the keys the generator shows the model."""
    llm.add(Reply(text="I'm sorry, I cannot do that."), Reply(text="I'm sorry, I cannot do that."))
    _synthesize(stub, papers)
    keys = _prompt_keys(llm)
    llm.requests.clear()
    assert len(keys) == len(papers)
    return keys


def test_well_behaved_llm_text_is_streamed_and_resolved(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    llm.add(Reply(text=_good_text(keys)))
    events, result = _synthesize(stub, papers)
    assert result.report.backend == pb.BACKEND_OPENAI and not result.report.fallback_reason
    assert _shown_text(events) == result.text
    assert result.text.startswith("Multimodal training improves unimodal recognition [1]")
    assert "[2, 3]" in result.text and "[1, 4]" in result.text
    assert result.report.papers_cited == 4 and not result.report.uncited_paper_ids
    assert [r.marker for r in result.references] == ["[1]", "[2]", "[3]", "[4]"]
    assert result.references[0].url == f"https://arxiv.org/abs/{papers[0].id}"
    assert result.bibtex.count("@misc{") == 4 and "archivePrefix = {arXiv}" in result.bibtex
    assert result.report.usage.completion_tokens > 0
    _assert_integrity(result, papers)
    # The key came from the mounted secret file, in the Authorization header.
    assert llm.requests[-1].headers["authorization"] == f"Bearer {API_KEY}"
    assert llm.requests[-1].body["stream"] is True


def test_author_year_style(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    llm.add(Reply(text=_good_text(keys)))
    _, result = _synthesize(stub, papers, style=pb.CITATION_STYLE_AUTHOR_YEAR)
    first = papers[0]
    surname = first.authors[0].split()[-1]
    assert f"({surname}" in result.text and f"{first.year})" in result.text
    assert not re.search(r"\[\d", result.text)


def test_invented_references_and_foreign_keys_are_removed(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    hostile = (
        f"Prior work [{keys[0]}] and [smith2021invented] shaped the field, as did "
        f"[2105.00001] and arXiv:1706.03762 (Vaswani et al., 2017). "
        f"Graph work [{keys[1]}; doe2020fake] and [7] complete it [{keys[2]}; {keys[3]}].\n\n"
        "References\n[1] Smith, J. (2021). An invented paper. arXiv:2101.99999.\n"
        "[2] Doe, J. (2020). Fake results.\n"
    )
    llm.add(Reply(text=hostile))
    _, result = _synthesize(stub, papers)
    assert result.report.backend == pb.BACKEND_OPENAI
    for gone in ("smith2021invented", "2105.00001", "1706.03762", "Vaswani", "doe2020fake",
                 "[7]", "References", "invented paper"):
        assert gone not in result.text
    reasons = [r.reason for r in result.report.removed_citations]
    assert reasons.count("unknown key") == 2
    assert reasons.count("not in the shortlist") == 3
    assert any(r.startswith("numbered citation") for r in reasons)
    assert sum(r.startswith("reference list") for r in reasons) == 2
    _assert_integrity(result, papers)
    assert result.report.papers_cited == 4


def test_a_real_title_with_a_fake_year(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    title = papers[0].title
    surname = papers[0].authors[0].split()[-1]
    llm.add(Reply(text=(
        f'The paper "{title}" (2031) by {surname} et al. (2031) and ({surname} et al., 2031) '
        f"matters [{keys[0]}]. Others follow [{keys[1]}; {keys[2]}; {keys[3]}]."
    )))
    _, result = _synthesize(stub, papers)
    assert "2031" not in result.text
    assert title in result.text
    reasons = [r.reason for r in result.report.removed_citations]
    assert "year written by the model, not taken from a corpus record" in reasons
    assert reasons.count("year does not match the corpus record") == 2
    _assert_integrity(result, papers)
    assert str(papers[0].year) in result.bibtex


def test_rate_limit_then_success_is_retried(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    llm.add(Reply(status=429, headers={"Retry-After": "0"}, body='{"error": {"message": "slow down"}}'),
            Reply(text=_good_text(keys)))
    _, result = _synthesize(stub, papers)
    assert result.report.backend == pb.BACKEND_OPENAI
    assert len(llm.requests) == 2


def test_server_error_then_success_is_retried(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    llm.add(Reply(status=503, body='{"error": {"message": "overloaded"}}'), Reply(text=_good_text(keys)))
    _, result = _synthesize(stub, papers)
    assert result.report.backend == pb.BACKEND_OPENAI and len(llm.requests) == 2


def _assert_fallback(result, papers, reason_part: str) -> None:
    report = result.report
    assert report.backend == pb.BACKEND_EXTRACTIVE
    assert report.requested_backend == pb.BACKEND_OPENAI
    assert reason_part in report.fallback_reason, report.fallback_reason
    assert "extractive" in report.note
    assert report.papers_cited == len(papers)
    _assert_integrity(result, papers)


def test_a_stalled_endpoint_times_out_and_falls_back(stub, llm, papers):
    llm.add(Reply(text="never sent", delay_s=30), Reply(text="never sent", delay_s=30))
    events, result = _synthesize(stub, papers)
    _assert_fallback(result, papers, "timeout")
    assert _shown_text(events) == result.text


def test_malformed_json_falls_back(stub, llm, papers):
    broken = 'data: {"id": "x", "choices": [{"delta": {"content": "Hel\n\n'
    llm.add(Reply(raw_stream=broken), Reply(raw_stream=broken))
    _, result = _synthesize(stub, papers)
    _assert_fallback(result, papers, "malformed")


def test_empty_choices_fall_back(stub, llm, papers):
    llm.add(Reply(text="ignored", empty_choices=True), Reply(text="ignored", empty_choices=True))
    _, result = _synthesize(stub, papers)
    _assert_fallback(result, papers, "empty")
    assert len(llm.requests) == 2  # one retry of an empty answer


def test_refusal_falls_back(stub, llm, papers):
    refusal = "I'm sorry, but I can't help with writing a related work section about this topic."
    llm.add(Reply(text=refusal), Reply(text=refusal))
    _, result = _synthesize(stub, papers)
    _assert_fallback(result, papers, "refusal")
    assert "sorry" not in result.text


def test_text_that_cites_nothing_falls_back(stub, llm, papers):
    plain = "Gesture recognition and graph models are active areas with many open questions. " * 3
    llm.add(Reply(text=plain), Reply(text=plain))
    _, result = _synthesize(stub, papers)
    _assert_fallback(result, papers, "cites none")


def test_context_overflow_is_retried_with_a_shorter_prompt(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    overflow = json.dumps({"error": {"message": "This model's maximum context length is 2048 "
                                                "tokens. However, you requested 5000 tokens.",
                                     "code": "context_length_exceeded"}})
    llm.add(Reply(status=400, body=overflow), Reply(text=_good_text(keys)))
    # Long summaries: the first prompt fills the configured context, the retry gets half of it.
    _, result = _synthesize(stub, papers, summary_chars=4000)
    assert result.report.backend == pb.BACKEND_OPENAI
    first, second = (len(r.body["messages"][-1]["content"]) for r in llm.requests)
    assert second < first


def test_failure_mid_stream_resets_the_shown_text(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    llm.add(Reply(text=_good_text(keys) * 3, fail_after_chunks=30, stall_s=0))
    events, result = _synthesize(stub, papers)
    kinds = [e.WhichOneof("event") for e in events]
    assert "reset" in kinds
    assert kinds.index("text_delta") < kinds.index("reset")
    _assert_fallback(result, papers, "")
    assert _shown_text(events) == result.text


def test_summaries_with_the_llm_and_their_fallback(stub, llm, papers):
    paper = papers[0]
    llm.add(Reply(text=f"The paper studies gestures [{paper.id}] (Someone et al., 2019)."))
    request = pb.SummarizeRequest(
        source_text="We study gestures.", paper=paper, backend=pb.BACKEND_OPENAI,
        pages=[pb.PageText(number=3, text="Page three says the method uses depth cameras. " * 50)],
    )
    response = stub.Summarize(request, timeout=30)
    assert response.backend == pb.BACKEND_OPENAI and not response.fallback_reason
    assert response.summary == "The paper studies gestures."
    assert "[page 3]" in llm.requests[-1].body["messages"][-1]["content"]
    llm.add(Reply(status=500, body="{}"), Reply(status=500, body="{}"))
    fallback = stub.Summarize(request, timeout=30)
    assert fallback.backend == pb.BACKEND_EXTRACTIVE and "server error" in fallback.fallback_reason
    assert fallback.excerpts and all(
        e.text in paper.abstract or e.text in request.pages[0].text for e in fallback.excerpts
    )


def test_summaries_run_concurrently_within_the_limit(stub, llm, papers):
    llm.default = Reply(text="A faithful summary of the paper.", delay_s=0.4)
    try:
        from concurrent.futures import ThreadPoolExecutor

        def summarize(paper):
            return stub.Summarize(pb.SummarizeRequest(
                source_text="We study gestures.", paper=paper, backend=pb.BACKEND_OPENAI), timeout=30)

        with ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(summarize, papers * 2))
    finally:
        llm.default = Reply(text="")
    assert all(r.backend == pb.BACKEND_OPENAI for r in responses)
    assert llm.max_in_flight == 2  # max_concurrent_requests


def test_the_key_is_never_logged(generator, stub, llm, papers):
    llm.add(Reply(status=401, body='{"error": {"message": "bad key"}}'))
    _synthesize(stub, papers)
    assert API_KEY not in Path(generator.log_path).read_text()


def test_info_names_backends_and_model(stub):
    info = stub.GetInfo(pb.GetInfoRequest(), timeout=10)
    assert info.default_backend == pb.BACKEND_EXTRACTIVE
    assert set(info.backends) == {pb.BACKEND_EXTRACTIVE, pb.BACKEND_OPENAI}
    assert info.model == "scripted-model" and info.max_concurrent_requests == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.ClearField("summaries"), "summaries is empty"),
        (lambda r: setattr(r, "source_text", "  "), "source_text is empty"),
        (lambda r: r.summaries.append(r.summaries[0]), "appears twice"),
        (lambda r: setattr(r, "citation_style", 9), "citation_style 9 is not one of"),
        (lambda r: r.summaries[0].paper.ClearField("id"), "id is empty"),
        (lambda r: setattr(r, "max_paragraphs", 99), "max_paragraphs 99"),
        (lambda r: r.summaries[0].vector.extend([float("nan")]), "NaN"),
    ],
)
def test_bad_synthesis_requests_are_invalid_argument(stub, papers, change, message):
    request = pb.SynthesizeRequest(
        source_text="An abstract.", summaries=[pb.PaperSummary(paper=p) for p in papers]
    )
    change(request)
    with pytest.raises(grpc.RpcError) as error:
        list(stub.Synthesize(request, timeout=10))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in error.value.details()


def test_bad_summary_requests_are_invalid_argument(stub, papers):
    too_many = pb.SummarizeRequest(source_text="x", paper=papers[0],
                                   pages=[pb.PageText(number=i, text="t") for i in range(21)])
    no_paper = pb.SummarizeRequest(source_text="x")
    for request, message in ((too_many, "21 pages"), (no_paper, "paper is missing")):
        with pytest.raises(grpc.RpcError) as error:
            stub.Summarize(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert message in error.value.details()


def test_openai_backend_without_an_endpoint_is_failed_precondition(tmp_path, papers):
    with running_service("generator", tmp_path) as service, grpc.insecure_channel(service.addr) as ch:
        stub = generator_pb2_grpc.GeneratorServiceStub(ch)
        with pytest.raises(grpc.RpcError) as error:
            list(stub.Synthesize(pb.SynthesizeRequest(
                source_text="x", backend=pb.BACKEND_OPENAI,
                summaries=[pb.PaperSummary(paper=p) for p in papers]), timeout=10))
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "CITEWEAVE_GENERATOR_OPENAI_BASE_URL" in error.value.details()
        info = stub.GetInfo(pb.GetInfoRequest(), timeout=10)
        assert list(info.backends) == [pb.BACKEND_EXTRACTIVE] and info.model == ""


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"backend": "openai"}, "backend=openai needs CITEWEAVE_GENERATOR_OPENAI_BASE_URL"),
        ({"openai_base_url": "127.0.0.1:8000/v1", "openai_model": "m"}, "must be an http:// or https:// URL"),
        ({"openai_base_url": "http://127.0.0.1:8000/v1"}, "openai_model is empty"),
        ({"openai_api_key_file": "/nonexistent/key"}, "is not a readable file"),
        ({"context_tokens": "1024", "synthesis_max_tokens": "1000"}, "raise context_tokens"),
    ],
    ids=["openai-without-url", "url-without-scheme", "url-without-model", "missing-key-file",
         "context-too-small"],
)
def test_bad_setting_stops_start_up_with_a_message(tmp_path, settings, fragment):
    assert fragment in start_up_failure_log("generator", settings, tmp_path)


def test_an_answer_that_repeats_its_prompt_falls_back(stub, llm, papers):
    keys = _keys(stub, llm, papers)
    source = "We study multimodal training for gesture recognition and graph models."
    echo_source = f"{source} " * 4 + f"[{keys[0]}] is related."
    echo_papers = f'Grouping papers by theme.\n\n[{keys[0]}] "{papers[0].title}"\nA summary.'
    llm.add(Reply(text=echo_source), Reply(text=echo_papers))
    _, first = _synthesize(stub, papers)
    _assert_fallback(first, papers, "repeats the source text")
    _, second = _synthesize(stub, papers)
    _assert_fallback(second, papers, "repeats the prompt's paper list")


def test_callers_that_leave_together_cost_no_further_llm_requests(stub, llm, papers):
    """Eight summaries wait for the two LLM slots; the caller cancels them all while the first
    two are at the endpoint. The slots those two free must not go to a summary whose own
    cancellation is still on its way (a gateway request's summaries leave in one burst)."""
    llm.default = Reply(text="A faithful summary of the paper.", delay_s=1.2)
    try:
        calls = [stub.Summarize.future(pb.SummarizeRequest(
            source_text="We study gestures.", paper=paper, backend=pb.BACKEND_OPENAI), timeout=30)
            for paper in (papers * 2)[:8]]
        deadline = time.monotonic() + 20
        while len(llm.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(llm.requests) == 2, "both slots should be in use"
        for call in calls:
            call.cancel()
        time.sleep(2.0)  # longer than an answer: a waiter that got a slot would have asked by now
    finally:
        llm.default = Reply(text="")
    assert len(llm.requests) == 2
