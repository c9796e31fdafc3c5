"""The benchmark output contract: one JSON object, last on stdout; and each bench module's run()
returns a JSON-serializable dict. Tiny sizes: these check shapes, never speed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_fixtures import MACHINE, results

from bench import run_all
from bench.embedder_bench import parse_batch_sizes
from bench.output import BenchOutputError, dumps, last_json_object
from bench.retriever_bench import parse_sizes, parse_stores

REPO = Path(__file__).resolve().parents[2]
SLICE = REPO / "tests" / "fixtures" / "arxiv" / "slice-a.jsonl.gz"


def _roundtrip(result: dict) -> dict:
    """What the collector would read back: strict JSON, no NaN."""
    assert isinstance(result, dict)
    return json.loads(json.dumps(json.loads(dumps(result)), allow_nan=False))


# -- the output contract ----------------------------------------------------------------------


def test_last_json_object_reads_the_last_non_empty_line():
    stdout = 'a library chatted {"not": "this"}\n{"x": 1}\n{"rate": 2.5, "n": [1, 2]}\n\n'
    assert last_json_object(stdout) == {"rate": 2.5, "n": [1, 2]}


@pytest.mark.parametrize("stdout", ["", "\n\n", "done\n", '{"x": 1}\nprogress 50%\n', "[1, 2]\n"])
def test_last_json_object_refuses_anything_else(stdout):
    with pytest.raises(BenchOutputError):
        last_json_object(stdout)


def test_dumps_writes_strict_json_from_numpy_and_nan():
    text = dumps({"p50": np.float64(1.5), "n": np.int64(3), "v": np.arange(2), "bad": math.nan,
                  "nested": [{"inf": math.inf}]})
    assert "\n" not in text
    assert json.loads(text) == {"p50": 1.5, "n": 3, "v": [0, 1], "bad": None,
                                "nested": [{"inf": None}]}


# -- options --------------------------------------------------------------------------------


def test_option_parsers():
    assert parse_sizes("10000, 100k,1M") == [10_000, 100_000, 1_000_000]
    assert parse_stores("lite,server") == ["lite", "server"]
    assert parse_batch_sizes("1,4,16") == [1, 4, 16] and parse_batch_sizes("none") == []
    assert run_all.parse_only(None) == ["embedder", "retriever", "sync", "fetcher", "pipeline"]
    for bad in (lambda: parse_sizes("10x"), lambda: parse_sizes("500"),
                lambda: parse_stores("lite,cloud"), lambda: parse_batch_sizes("0"),
                lambda: run_all.parse_only("embedder,gpu")):
        with pytest.raises(ValueError):
            bad()


def test_quick_kwargs_are_overridden_by_explicit_options():
    kwargs = run_all.bench_kwargs("retriever", quick=True, sizes=[5000], stores=None)
    assert kwargs["sizes"] == (5000,) and kwargs["stores"] == ("lite",)
    assert run_all.bench_kwargs("embedder", batch_sizes=[]) == {"batch_sizes": ()}
    assert run_all.bench_kwargs("sync") == {}


# -- carrying over what a run did not measure -----------------------------------------------


def _fresh_retriever_only(machine: dict = MACHINE) -> dict:
    data = results()
    retriever = data["benchmarks"]["retriever"]
    retriever["result"]["points"] = [
        p for p in retriever["result"]["points"] if p["n_vectors"] == 10_000
    ]
    for p in retriever["result"]["points"]:
        p["search_p50_ms"] = 99.0
    return {**data, "machine": dict(machine), "benchmarks": {"retriever": retriever}}


def test_merge_carries_over_benchmarks_and_retriever_points_not_measured():
    merged = run_all.merge_previous(_fresh_retriever_only(), results())
    assert merged["benchmarks"]["embedder"]["carried_over"] is True
    assert merged["benchmarks"]["sync"]["carried_over"] is True
    assert not merged["benchmarks"]["retriever"].get("carried_over")
    points = {(p["store"], p["n_vectors"]): p for p in merged["benchmarks"]["retriever"]["result"]["points"]}
    assert len(points) == 4
    assert points[("milvus-lite", 10_000)]["search_p50_ms"] == 99.0  # the fresh one wins
    assert not points[("milvus-lite", 10_000)].get("carried_over")
    assert points[("milvus-lite", 100_000)]["carried_over"] is True
    assert points[("milvus-lite", 100_000)]["search_p50_ms"] == 181.25


def test_merge_does_not_carry_over_from_another_machine():
    other = _fresh_retriever_only({**MACHINE, "cpu_count": 64})
    merged = run_all.merge_previous(other, results())
    assert set(merged["benchmarks"]) == {"retriever"}
    assert len(merged["benchmarks"]["retriever"]["result"]["points"]) == 2


# -- the benchmarks themselves, tiny -------------------------------------------------------


def test_cli_retriever_bench_prints_one_json_object_last(tmp_path):
    """`citeweave bench retriever --json` on 1,000 vectors in Milvus Lite, as `bench all` runs it."""
    completed = subprocess.run(
        [sys.executable, "-m", "services.cli.main", "bench", "retriever", "--json",
         "--sizes", "1000", "--stores", "lite"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = _roundtrip(last_json_object(completed.stdout))
    assert "[retriever-bench]" in completed.stderr  # progress goes to stderr
    [point] = result["points"]
    assert point["store"] == "milvus-lite" and point["n_vectors"] == 1000
    assert point["paper_count"] == 1000 and point["list_hashes_rows"] == 1000
    assert point["search_p50_ms"] > 0 and point["longlist_size"] == 30
    assert result["search_p50_ms"] == point["search_p50_ms"]  # the headline is that point
    assert result["selection_same_picks"] is True


@pytest.mark.slow
def test_embedder_run_returns_a_json_serializable_dict_with_the_sweep():
    from bench.embedder_bench import run
    from services.embedder.models import MINILM

    result = _roundtrip(run(n_texts=4, model=MINILM, rounds=1, batch_sizes=(1, 2),
                            sweep_model=MINILM, sweep_texts=4))
    assert result["model"] == MINILM and result["n_texts"] == 4
    assert result["texts_per_s"] > 0 and result["min_cosine"] > 0.99
    sweep = result["batch_sweep"]
    assert sweep["model"] == MINILM
    assert [p["batch_size"] for p in sweep["points"]] == [1, 2]
    assert all(p["texts_per_s"] > 0 and p["baseline_texts_per_s"] > 0 for p in sweep["points"])


@pytest.mark.slow
def test_sync_run_returns_a_json_serializable_dict_with_its_rates():
    from bench.sync_bench import run
    from services.embedder.models import MINILM

    result = _roundtrip(run(model=MINILM, n_changed=2, repeats=1, rounds=1, source=SLICE))
    assert result["records"] == 60 and result["store_paper_count"] == 60
    for key in ("import_records_per_s", "nochange_records_per_s", "nochange_uncached_records_per_s",
                "nochange_baseline_records_per_s", "changed_records_per_s",
                "changed_marginal_records_per_s", "changed_baseline_records_per_s"):
        assert isinstance(result[key], (int, float)) and result[key] > 0, key
    assert result["nochange_embed_calls"] == 0


@pytest.mark.slow
def test_fetcher_run_returns_the_issue_keys():
    """A small depth-stage run: 6 papers from a mirror answering after 0.2 s, MiniLM."""
    from bench.fetcher_bench import run
    from services.embedder.models import MINILM

    result = _roundtrip(run(papers=6, latency_s=0.2, repeats=1, rounds=1, model=MINILM))
    assert result["papers"] == 6 and result["pages"] == 72 and result["kept_pages"] > 6
    for key in ("pages_per_s", "baseline_pages_per_s", "parallel_s", "sequential_s",
                "parallel_speedup", "cold_parallel_s"):
        assert isinstance(result[key], (int, float)) and result[key] > 0, key
    # Six sequential fetches wait 6 x 0.2 s for the mirror alone.
    assert result["sequential_s"] > 1.2
