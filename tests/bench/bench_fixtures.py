"""A small hand-made results object, shaped like what `citeweave bench all` collects."""

from __future__ import annotations

import copy

MACHINE = {
    "cpu_model": "Test CPU 9000",
    "cpu_flags": ["avx2"],
    "cpu_count": 2,
    "memory_gib": 23.4,
    "python": "3.11.9",
    "platform": "Linux-test",
    "date": "2026-01-02T03:04:05+00:00",
    "load_average_at_start": [0.42, 0.5, 0.6],
}


def _point(store: str, n: int, p50: float, measured_at: str = "2026-01-02T03:10:00+00:00") -> dict:
    return {
        "store": store, "store_version": "9.9.9", "n_vectors": n, "queries": 50,
        "insert_rows_per_s": 777.0, "search_p50_ms": p50, "search_p95_ms": p50 * 1.5,
        "store_search_p50_ms": p50 * 0.9, "restart_to_serving_s": 12.5,
        "measured_at": measured_at, "load_avg_1m_at_start": 0.42,
    }


RESULTS = {
    "schema": 1,
    "machine": MACHINE,
    "quick": False,
    "started_at": "2026-01-02T03:04:05+00:00",
    "finished_at": "2026-01-02T03:30:00+00:00",
    "wall_s": 1555.0,
    "load_average_at_end": [1.25, 1.0, 0.75],
    "benchmarks": {
        "embedder": {
            "measured_at": "2026-01-02T03:04:05+00:00", "wall_s": 300.0,
            "result": {
                "model": "all-mpnet-base-v2", "backend": "onnx-cpu", "n_texts": 200,
                "mean_chars": 1366.0, "request_size": 32, "concurrency": 4,
                "texts_per_s": 2.585, "baseline_texts_per_s": 1.423, "speedup": 1.817,
                "min_cosine": 0.999999, "load_avg_1m_before": 0.42, "load_avg_1m_after": 1.1,
                "batch_sweep": {
                    "model": "all-MiniLM-L6-v2", "backend": "onnx-cpu", "n_texts": 128,
                    "mean_chars": 1300.0, "service_default_batch_size": 4,
                    "points": [
                        {"batch_size": 1, "texts_per_s": 21.5, "baseline_texts_per_s": 11.25,
                         "speedup": 1.91, "load_avg_1m_before": 0.5},
                        {"batch_size": 4, "texts_per_s": 31.75, "baseline_texts_per_s": 17.5,
                         "speedup": 1.81, "load_avg_1m_before": 0.5},
                        {"batch_size": 64, "texts_per_s": 26.5, "baseline_texts_per_s": 19.0,
                         "speedup": 1.39, "load_avg_1m_before": 0.5},
                    ],
                },
            },
        },
        "retriever": {
            "measured_at": "2026-01-02T03:10:00+00:00", "wall_s": 600.0,
            "result": {
                "queries": 50,
                "points": [
                    _point("milvus-lite", 10_000, 28.5),
                    _point("milvus-lite", 100_000, 181.25),
                    _point("milvus-server", 10_000, 21.0),
                    _point("milvus-server", 100_000, 38.75),
                ],
                "selection_60": {"vectorized_ms": 0.91, "loop_ms": 31.0, "speedup": 34.2},
                "selection_1000": {"vectorized_ms": 4.4, "loop_ms": 2784.0, "speedup": 632.7},
                "selection_same_picks": True,
            },
        },
        "sync": {
            "measured_at": "2026-01-02T03:20:00+00:00", "wall_s": 500.0,
            "result": {
                "source": "/data/arxiv-cs-74k.jsonl.gz", "records": 74728,
                "model": "all-mpnet-base-v2", "backend": "onnx-cpu", "batch_size": 128,
                "repeats": 3, "nochange_embed_calls": 0,
                "import_records_per_s": 690.5, "nochange_records_per_s": 30380.0,
                "nochange_uncached_records_per_s": 11419.0,
                "nochange_baseline_records_per_s": 2724.0, "nochange_speedup": 11.15,
                "changed_records_per_s": 2.189, "changed_marginal_records_per_s": 2.314,
                "changed_baseline_records_per_s": 2.188, "changed_speedup": 1.06,
            },
        },
    },
}


def results() -> dict:
    """A fresh deep copy, so a test may change it."""
    return copy.deepcopy(RESULTS)
