"""`citeweave eval generation`: the held-out rule, write_section against a scripted generator,
the reference lists the metrics read, and the whole evaluation on a small configuration through
the real services (the demo's mpnet vectors make the embedder serve mpnet)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from rich.console import Console

from citeweave.generator.v1 import generator_pb2 as gpb
from citeweave.retriever.v1 import retriever_pb2 as rpb
from services.common.corpus import read_jsonl, row_from_arxiv
from services.evaluation.generation_eval import (
    DEMO_CORPUS, HELD_OUT_MIN_ABSTRACT_CHARS, GenerationOptions, evaluate_generation,
    held_out_papers, metric_references, write_corpus_without,
)
from services.evaluation.generation_metrics import score_output
from services.gateway.depth import ChosenPage, DeepPaper, Shortlist
from services.gateway.writing import write_section

REPO = Path(__file__).resolve().parents[2]


# --- the held-out papers ----------------------------------------------------------------------


def test_the_held_out_papers_are_a_deterministic_rule_and_absent_from_the_synced_corpus(tmp_path):
    first = held_out_papers(DEMO_CORPUS, 20)
    assert [p.id for p in held_out_papers(DEMO_CORPUS, 20)] == [p.id for p in first]
    ids = [p.id for p in first]
    assert len(set(ids)) == 20
    assert all(len(p.abstract) >= HELD_OUT_MIN_ABSTRACT_CHARS for p in first)
    # The rule: of the eligible papers, those whose sha256(id) sorts first.
    rows = [row_from_arxiv(r) for r in read_jsonl(DEMO_CORPUS)]
    eligible = sorted((r for r in rows if len(r.abstract) >= HELD_OUT_MIN_ABSTRACT_CHARS),
                      key=lambda r: hashlib.sha256(r.id.encode()).hexdigest())
    assert ids == [r.id for r in eligible[:20]]
    assert [p.id for p in held_out_papers(DEMO_CORPUS, 5)] == ids[:5]

    corpus = tmp_path / "corpus.jsonl"
    assert write_corpus_without(DEMO_CORPUS, set(ids), corpus) == len(rows) - 20
    synced = [r["id"] for r in read_jsonl(corpus)]
    assert len(synced) == len(rows) - 20 and not set(ids) & set(synced)
    # Lines are copied byte for byte, so every kept record keeps its snapshot hash.
    assert {r.id: r for r in map(row_from_arxiv, read_jsonl(corpus))} == {
        r.id: r for r in rows if r.id not in set(ids)}


def test_too_many_held_out_papers_are_refused(tmp_path):
    corpus = tmp_path / "tiny.jsonl"
    corpus.write_text(json.dumps({"id": "2401.00001", "title": "T", "abstract": "short"}) + "\n")
    with pytest.raises(ValueError, match="1 were asked"):
        held_out_papers(corpus, 1)


# --- write_section against a scripted generator -----------------------------------------------


def _deep(paper_id: str, score: float, pages: int = 0, vector: tuple = ()) -> DeepPaper:
    scored = rpb.ScoredPaper(
        paper=rpb.Paper(id=paper_id, title=f"Title {paper_id}", abstract=f"Abstract {paper_id}.",
                        authors=["Ada Lovelace"], year=2024, categories=["cs.CL"]),
        similarity=score, vector=list(vector),
    )
    chosen = [ChosenPage(n, f"page {n} of {paper_id}", 0.5, "") for n in range(1, pages + 1)]
    return DeepPaper(scored=scored, score=score, pages=chosen)


class ScriptedGenerator:
    """Summarize and Synthesize as a grpc.aio stub would answer them."""

    def __init__(self, fail_on: str | None = None):
        self.fail_on = fail_on
        self.in_flight = self.max_in_flight = 0
        self.summarized: list[gpb.SummarizeRequest] = []
        self.synthesized: list[gpb.SynthesizeRequest] = []

    async def Summarize(self, request, timeout=None):
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.02)
            if request.paper.id == self.fail_on:
                raise grpc.aio.AioRpcError(grpc.StatusCode.INVALID_ARGUMENT, grpc.aio.Metadata(),
                                           grpc.aio.Metadata(),
                                           details="bad paper")
            self.summarized.append(request)
            return gpb.SummarizeResponse(paper_id=request.paper.id, summary=f"S {request.paper.id}",
                                         backend=gpb.BACKEND_EXTRACTIVE)
        finally:
            self.in_flight -= 1

    def Synthesize(self, request, timeout=None):
        self.synthesized.append(request)

        async def events():
            yield gpb.SynthesizeResponse(text_delta="Draft that ")
            yield gpb.SynthesizeResponse(text_delta="fails.")
            yield gpb.SynthesizeResponse(reset=gpb.TextReset(reason="the LLM timed out"))
            yield gpb.SynthesizeResponse(text_delta="Final [1]")
            yield gpb.SynthesizeResponse(text_delta=" text.")
            yield gpb.SynthesizeResponse(result=gpb.SynthesisResult(text="Final [1] text."))

        return events()


async def test_write_section_summarizes_concurrently_and_honours_a_reset():
    papers = [_deep(f"2401.0000{i}", 0.9 - i / 10, pages=i % 3, vector=(0.6, 0.8) if i == 0 else ())
              for i in range(6)]
    generator = ScriptedGenerator()
    events = []
    written = await write_section(
        generator, "Our abstract.", Shortlist(papers, papers, {}, []),
        style=gpb.CITATION_STYLE_AUTHOR_YEAR, backend=gpb.BACKEND_EXTRACTIVE, concurrency=2,
        progress=lambda *event: events.append(event),
    )
    assert generator.max_in_flight == 2
    assert [s.paper_id for s in written.summaries] == [p.id for p in papers]
    assert {r.paper.id: len(r.pages) for r in generator.summarized} == {
        p.id: len(p.pages) for p in papers}
    assert all(r.backend == gpb.BACKEND_EXTRACTIVE and r.mode == gpb.MODE_RELATED_WORK
               for r in generator.summarized)
    request = generator.synthesized[0]
    assert request.citation_style == gpb.CITATION_STYLE_AUTHOR_YEAR
    assert [s.summary for s in request.summaries] == [f"S {p.id}" for p in papers]
    assert [s.relevance for s in request.summaries] == pytest.approx([p.score for p in papers])
    assert list(request.summaries[0].vector) == pytest.approx([0.6, 0.8])
    assert not request.summaries[1].vector
    assert request.summaries[2].pages[1].text == "page 2 of 2401.00002"
    assert written.text == written.result.text == "Final [1] text."
    assert written.resets == 1
    assert set(written.seconds) == {"summarize", "synthesize"}
    assert [e[:3] for e in events if e[0] == "summarizing"] == [
        ("summarizing", k, 6) for k in range(1, 7)]
    assert ("writing", 0, 0, "starting over: the LLM timed out") in events
    assert events[-1][:3] == ("writing", len("Final [1] text."), 0)


async def test_a_generator_error_propagates_and_nothing_is_synthesized():
    papers = [_deep(f"2401.0000{i}", 0.5) for i in range(4)]
    generator = ScriptedGenerator(fail_on="2401.00002")
    with pytest.raises(grpc.RpcError) as error:
        await write_section(generator, "Our abstract.", Shortlist(papers, papers, {}, []))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert not generator.synthesized
    with pytest.raises(ValueError, match="shortlist is empty"):
        await write_section(generator, "Our abstract.", Shortlist([], [], {}, []))


# --- reference lists for the metrics ----------------------------------------------------------


def test_author_year_references_resolve_the_markers_the_generator_prints():
    papers = [_deep("2401.00001", 0.9), _deep("2401.00002", 0.8)]
    papers[1].scored.paper.authors[:] = ["Grace Brewster Murray Hopper", "Alan Turing"]
    shortlist = Shortlist(papers, papers, {}, [])
    result = gpb.SynthesisResult(
        text="Engines compute (Lovelace, 2024). Compilers help (Hopper and Turing, 2024).",
        references=[gpb.Reference(paper_id="2401.00001", marker="(Lovelace, 2024)"),
                    gpb.Reference(paper_id="2401.00002", marker="(Hopper and Turing, 2024)")],
    )
    refs = metric_references(result, shortlist, "author-year")
    assert [tuple(r) for r in refs] == [("2401.00001", "Lovelace", "2024"),
                                        ("2401.00002", "Hopper", "2024")]
    abstracts = {p.id: p.scored.paper.abstract for p in papers}
    scores = score_output(result.text, refs, abstracts)
    assert scores.n_citations == 2 and scores.citation_validity == 1.0 and scores.coverage == 1.0

    numeric = gpb.SynthesisResult(references=[gpb.Reference(paper_id="2401.00002", marker="[1]")])
    assert metric_references(numeric, shortlist, "numeric") == {1: "2401.00002"}


# --- the command ------------------------------------------------------------------------------


def test_an_impossible_combination_fails_before_starting_anything():
    result = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "eval", "generation", "--backend", "openai"],
        cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "needs --local-llm or --llm-url" in result.stderr
    assert "starting embedder" not in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_held_out_abstracts_end_to_end_with_the_extractive_backend(tmp_path):
    outputs = tmp_path / "outputs.jsonl"
    options = GenerationOptions(held_out=2, breadth=5, depth=2, backend="extractive",
                                embedding_cache=None, outputs=outputs, log_dir=tmp_path / "logs")
    report = evaluate_generation(options, Console(stderr=True))
    summary = report.summary
    held = summary["held_out_ids"]
    assert held == [p.id for p in held_out_papers(DEMO_CORPUS, 2)]
    assert summary["store"]["papers"] == summary["store"]["lines_synced"]
    assert summary["store"]["embedded"] == 0 and summary["store"]["sync_failed"] == 0
    assert summary["outputs"] == 2
    assert summary["metrics"]["citation_validity"] == 1.0
    assert 0 < summary["metrics"]["coverage"] <= 1
    assert summary["metrics"]["support"] is not None
    assert summary["backend_used"] == {"extractive": 2} and summary["synthesis_fallbacks"] == 0
    assert summary["summary_fallbacks"] == 0 and summary["streamed_text_mismatches"] == 0
    # Offline: no PDF anywhere, every paper judged on its abstract.
    assert summary["shortlisted_full_text"] == 0
    assert list(summary["seconds_mean"]) == ["shortlist", "summarize", "synthesize", "total",
                                             "score"]
    for record in report.outputs:
        shortlisted = {p["id"] for p in record.shortlist}
        assert len(shortlisted) == 5 and not shortlisted & set(held)
        assert {r["paper_id"] for r in record.references} <= shortlisted
        assert record.references and record.scores["citation_validity"] == 1.0
        assert record.text.strip()
    written = [json.loads(line) for line in outputs.read_text().splitlines()]
    assert [w["held_out_id"] for w in written] == held
    assert all(w["text"] and w["references"] for w in written)
    # Nothing went to the network: the fetcher only ever looked in its empty PDF directory.
    fetches = [json.loads(line) for line in (tmp_path / "logs" / "fetcher.log").read_text()
               .splitlines() if '"message": "fetch"' in line]
    assert fetches and all(f["outcome"] == "not_found" for f in fetches)
