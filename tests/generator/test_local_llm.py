"""The local OpenAI-compatible LLM: a real llama-cpp-python server with the Qwen2.5-Coder GGUF.

`make test` runs `make install-llm` first, so nothing here skips: a missing install fails loudly.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from openai import OpenAI

from services.generator import local_llm

REPO = local_llm.REPO


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "services.generator.local_llm", *args],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=60,
    )


def _require_installed() -> None:
    if not local_llm.is_installed():
        pytest.fail("the local LLM is not installed; run `make install-llm`")


def test_path_prints_the_assembled_gguf():
    _require_installed()
    result = _cli("path")
    assert result.returncode == 0, result.stderr
    path = result.stdout.strip()
    assert path == str(local_llm.model_path())
    assert path.endswith(f"-{local_llm.model_pin().version}.gguf")
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"


def test_path_without_the_model_exits_1_with_the_install_command(tmp_path):
    env = dict(os.environ, CITEWEAVE_CACHE_DIR=str(tmp_path))
    result = _cli("path", env=env)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "not installed" in result.stderr and "make install-llm" in result.stderr
    assert str(tmp_path) in result.stderr


def test_install_returns_at_once_when_cached():
    _require_installed()
    result = _cli("install")
    assert result.returncode == 0, result.stderr
    assert "already installed" in result.stdout and "already assembled" in result.stdout


@pytest.mark.timeout(300)
def test_chat_completion_through_openai(tmp_path):
    _require_installed()
    with local_llm.running_llm_server(tmp_path / "llm.log", n_ctx=2048) as llm:
        assert llm.base_url.startswith("http://127.0.0.1:") and llm.base_url.endswith("/v1")
        client = OpenAI(base_url=llm.base_url, api_key="unused", timeout=240)
        assert [m.id for m in client.models.list().data] == [llm.model]
        reply = client.chat.completions.create(
            model=llm.model,
            messages=[
                {"role": "system", "content": "You answer in one short sentence."},
                {"role": "user", "content": "What is the capital of France?"},
            ],
            max_tokens=32,
            temperature=0.0,
        )
        process = llm.process
    answer = reply.choices[0].message.content
    assert answer and answer.strip(), reply
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    # The whole process group is gone after the context manager.
    assert process.poll() is not None


@pytest.mark.timeout(900)
def test_summarize_and_synthesize_through_the_local_llm(tmp_path):
    """The generator against the real small model: whatever it writes, every citation of the
    result names a shortlisted paper and every marker in the text resolves."""
    import re

    import grpc

    from citeweave.generator.v1 import generator_pb2 as pb
    from citeweave.generator.v1 import generator_pb2_grpc
    from tests.conftest import running_service
    from tests.generator.test_generator_service import _demo_papers

    _require_installed()
    papers = _demo_papers(3)
    source = ("We study multimodal training for recognising dynamic hand gestures from video and "
              "depth data, and compare it with unimodal models.")
    with local_llm.running_llm_server(tmp_path / "llm.log", n_ctx=4096) as llm:
        settings = {
            "openai_base_url": llm.base_url, "openai_model": llm.model, "backend": "openai",
            "context_tokens": "4096", "summary_max_tokens": "160", "synthesis_max_tokens": "500",
            "max_concurrent_requests": "1", "timeout_s": "400", "max_retries": "0",
        }
        with running_service("generator", tmp_path, settings) as service, \
                grpc.insecure_channel(service.addr) as channel:
            stub = generator_pb2_grpc.GeneratorServiceStub(channel)
            summaries = [
                stub.Summarize(pb.SummarizeRequest(source_text=source, paper=p), timeout=600)
                for p in papers
            ]
            events = list(stub.Synthesize(pb.SynthesizeRequest(
                source_text=source, citation_style=pb.CITATION_STYLE_NUMERIC,
                summaries=[pb.PaperSummary(paper=p, summary=s.summary)
                           for p, s in zip(papers, summaries)],
            ), timeout=800))
    assert any(s.backend == pb.BACKEND_OPENAI for s in summaries), [s.fallback_reason for s in summaries]
    for summary in summaries:
        assert summary.summary.strip()
        assert summary.backend == pb.BACKEND_OPENAI or summary.fallback_reason
        assert not re.search(r"\[[^\]]*\]", summary.summary)  # no citation survives in a summary
    result = events[-1].result
    report = result.report
    ids = {p.id for p in papers}
    assert report.backend == pb.BACKEND_OPENAI or report.fallback_reason
    assert report.papers_shortlisted == 3 and report.papers_cited >= 1
    assert {c.paper_id for c in result.citations} <= ids
    for citation in result.citations:
        assert result.text[citation.start:citation.end] == citation.marker
    numbers = {int(n) for group in re.findall(r"\[([\d, ]+)\]", result.text)
               for n in group.split(",")}
    assert numbers == {int(r.marker.strip("[]")) for r in result.references}
    assert {r.paper_id for r in result.references} == {c.paper_id for c in result.citations}
    # No key of the prompt, and nothing that looks like one, reaches the text.
    assert not re.search(r"\[[a-z]+\d{4}[a-z0-9]*\]", result.text)
    if report.backend == pb.BACKEND_OPENAI:
        assert report.usage.prompt_tokens > 0 and report.usage.completion_tokens > 0
