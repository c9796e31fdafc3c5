"""Measures the two selection rules (MMR max vs the paper's min) on the demo corpus.

For queries drawn from the corpus itself (each paper's own vector, the paper excluded), it takes
the top 6*breadth candidates by cosine and picks 3*breadth with each rule at several diversities,
then reports the longlist's mean similarity to the query (relevance) and mean pairwise similarity
(redundancy; lower is more diverse). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from services.retriever.selection import Aggregation, select

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo" / "embeddings-all-mpnet-base-v2.npz"


def _pairwise_mean(vectors: np.ndarray) -> float:
    sims = vectors @ vectors.T
    n = len(vectors)
    return float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


def run(queries: int = 200, breadth: int = 10, seed: int = 0,
        diversities: tuple[float, ...] = (0.0, 0.1, 0.3, 0.5, 0.7)) -> dict:
    data = np.load(DEMO)
    corpus = data["vectors"].astype(np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    query_rows = rng.choice(len(corpus), size=queries, replace=False)
    result: dict = {"queries": queries, "breadth": breadth, "corpus": len(corpus), "rules": {}}
    for aggregation in (Aggregation.MAX, Aggregation.MIN):
        per_w = {}
        for w in diversities:
            relevance, redundancy, overlap = [], [], []
            for row in query_rows:
                sims = corpus @ corpus[row]
                sims[row] = -np.inf  # the query paper itself is not a candidate
                top = np.argsort(-sims)[: 6 * breadth]
                picks = select(sims[top], corpus[top], 3 * breadth, w, aggregation)
                chosen = top[[p.index for p in picks]]
                relevance.append(float(sims[chosen].mean()))
                redundancy.append(_pairwise_mean(corpus[chosen]))
                overlap.append(len(set(chosen) & set(top[: 3 * breadth])) / (3 * breadth))
            per_w[f"{w:g}"] = {
                "mean_similarity_to_query": round(float(np.mean(relevance)), 4),
                "mean_pairwise_similarity": round(float(np.mean(redundancy)), 4),
                "overlap_with_top_k": round(float(np.mean(overlap)), 3),
            }
        result["rules"][aggregation.value] = per_w
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--breadth", type=int, default=10)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.queries, args.breadth), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
