"""`citeweave bench pipeline`: its registration, how it reduces runs to medians and ratios, and the
JSON contract of a quick run. Tiny sizes: these check shapes, never speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import run_all
from bench.output import dumps, last_json_object
from bench.pipeline_bench import STAGES, _summary

REPO = Path(__file__).resolve().parents[2]


def _run(variant: str, total: float, stages: dict[str, float], round_: int) -> dict:
    return {"condition": "cold", "variant": variant, "round": round_, "total_s": total,
            "stages_s": stages, "texts_embedded": 10, "texts_from_cache": 0,
            "max_downloads_in_flight": 8 if variant == "parallel" else 1}


def test_pipeline_is_registered_with_quick_arguments():
    assert "pipeline" in run_all.BENCHMARKS
    assert run_all.parse_only("pipeline") == ["pipeline"]
    quick = run_all.bench_kwargs("pipeline", quick=True)
    assert quick["rounds"] >= 1 and quick["corpus"].is_file()
    assert run_all.bench_kwargs("pipeline") == {}


def test_summary_takes_medians_per_variant_and_ratios_of_the_concurrent_stages():
    def stages(fetching: float, summarizing: float) -> dict[str, float]:
        return {"embedding": 0.1, "longlist": 0.1, "fetching": fetching,
                "summarizing": summarizing, "writing": 0.2}

    runs = [
        _run("parallel", 3.0, stages(2.0, 0.5), 1), _run("sequential", 12.0, stages(10.0, 1.5), 1),
        _run("parallel", 5.0, stages(4.0, 0.5), 2), _run("sequential", 14.0, stages(12.0, 1.5), 2),
        _run("parallel", 4.0, stages(3.0, 0.5), 3), _run("sequential", 13.0, stages(11.0, 1.5), 3),
    ]
    summary = _summary(runs)
    assert summary["parallel"]["total_s"] == 4.0 and summary["sequential"]["total_s"] == 13.0
    assert set(summary["parallel"]["stages_s"]) == set(STAGES)
    assert summary["parallel"]["stages_s"]["fetching"] == 3.0
    assert summary["parallel_speedup"] == round((11.0 + 1.5) / (3.0 + 0.5), 2)
    assert summary["fetching_speedup"] == round(11.0 / 3.0, 2)
    assert summary["summarizing_speedup"] == 3.0
    assert summary["end_to_end_speedup"] == round(13.0 / 4.0, 2)
    assert summary["parallel"]["runs_total_s"] == [3.0, 5.0, 4.0]


@pytest.mark.slow
def test_cli_pipeline_bench_quick_prints_the_issue_keys():
    """`citeweave bench pipeline --json --quick`, as `bench all --quick` runs it: MiniLM, the
    60-record fixture corpus, breadth 5 (15 papers), one round."""
    completed = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "bench", "pipeline", "--json", "--quick"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "[pipeline-bench]" in completed.stderr  # progress goes to stderr
    result = json.loads(dumps(last_json_object(completed.stdout)))
    assert result["breadth"] == 5 and result["longlist_size"] == 15
    assert result["generator_backend"] == "extractive"
    for key in ("total_s", "sequential_total_s", "parallel_speedup", "fetching_speedup",
                "summarizing_speedup", "end_to_end_speedup", "kept_pages", "corpus_papers"):
        assert isinstance(result[key], (int, float)) and result[key] > 0, key
    for stages in (result["stages_s"], result["sequential_stages_s"]):
        assert set(stages) == set(STAGES)
        assert all(isinstance(v, (int, float)) and v > 0 for v in stages.values()), stages
    cold = result["conditions"]["cold"]
    assert cold["parallel"]["total_s"] == result["total_s"]
    assert cold["sequential"]["total_s"] == result["sequential_total_s"]
    # Cold means cold: every run embedded its page texts, none came from the embedder's cache.
    assert all(n > 0 for n in cold["parallel"]["texts_embedded"])
    assert cold["parallel"]["texts_from_cache"] == [0]
    assert cold["sequential"]["max_downloads_in_flight"] == 1
    runs = result["runs"]
    assert {(r["variant"], r["condition"]) for r in runs} == {("parallel", "cold"),
                                                              ("sequential", "cold")}
    assert all(r["pdf_downloads"] == 15 and r["references"] > 0 for r in runs)
    assert all(r["page_texts"] == result["kept_pages"] for r in runs)
    assert set(result["cold_warm"]) >= {"fetcher_pdf_cache", "cold_page_embeddings"}
