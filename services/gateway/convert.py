"""From the pipeline's internal results to the public gateway messages."""

from __future__ import annotations

from citeweave.gateway.v1 import gateway_pb2 as gw
from citeweave.generator.v1 import generator_pb2 as gpb
from citeweave.retriever.v1 import retriever_pb2
from services.common.corpus import paper_link
from services.gateway.depth import ABSTRACT_ONLY, DeepPaper
from services.gateway.writing import backend_name

STAGE_BY_NAME = {
    "embedding": gw.STAGE_EMBEDDING,
    "longlist": gw.STAGE_LONGLIST,
    "fetching": gw.STAGE_FETCHING,
    "pages": gw.STAGE_PAGES,
    "shortlist": gw.STAGE_SHORTLIST,
    "summarizing": gw.STAGE_SUMMARIZING,
    "writing": gw.STAGE_WRITING,
    "done": gw.STAGE_DONE,
}


def stage_name(stage: int) -> str:
    """STAGE_FETCHING -> "fetching"."""
    return gw.Stage.Name(stage).removeprefix("STAGE_").lower()


def public_paper(paper: retriever_pb2.Paper) -> gw.Paper:
    return gw.Paper(
        id=paper.id, title=paper.title, authors=list(paper.authors), year=paper.year,
        url=paper_link(paper.id, paper.url), abstract=paper.abstract, categories=list(paper.categories),
    )


def longlist_paper(scored: retriever_pb2.ScoredPaper) -> gw.RankedPaper:
    return gw.RankedPaper(
        paper=public_paper(scored.paper), score=scored.similarity, rank=scored.rank,
        reason=scored.reason, abstract_similarity=scored.similarity,
    )


def ranked_paper(paper: DeepPaper, rank: int) -> gw.RankedPaper:
    """A paper after the depth stage: its depth score and the pages chosen."""
    return gw.RankedPaper(
        paper=public_paper(paper.scored.paper), score=paper.score, rank=rank,
        reason=paper.scored.reason,
        chosen_pages=[gw.ChosenPage(number=p.number, similarity=p.similarity, reason=p.reason)
                      for p in paper.pages],
        abstract_only=paper.text_source == ABSTRACT_ONLY,
        fallback_reason=paper.fallback_reason,
        abstract_similarity=paper.scored.similarity,
    )


def timings(seconds: dict[str, float]) -> list[gw.StageTiming]:
    return [gw.StageTiming(stage=STAGE_BY_NAME[name], duration_ms=value * 1000)
            for name, value in seconds.items()]


def fill_generation(result: gw.GenerationResult, synthesis: gpb.SynthesisResult) -> None:
    """Sets the GenerationResult fields that come from the generator's SynthesisResult."""
    report = synthesis.report
    result.text = synthesis.text
    result.bibtex = synthesis.bibtex
    result.references.extend(
        gw.Reference(paper_id=r.paper_id, marker=r.marker, formatted=r.formatted, url=r.url,
                     key=r.key) for r in synthesis.references)
    result.report.CopyFrom(gw.GenerationReport(
        backend=backend_name(report.backend), fallback_reason=report.fallback_reason,
        papers_cited=report.papers_cited, papers_shortlisted=report.papers_shortlisted,
        citations_removed=len(report.removed_citations), note=report.note,
    ))
