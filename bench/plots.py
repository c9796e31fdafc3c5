"""PNG plots of the collected benchmark results (matplotlib, Agg: no display needed).

Figures are built with matplotlib's object API (Figure, not pyplot), so nothing global is
touched and a plot can be drawn from any thread or test.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot; no display on these machines
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

SEARCH_LATENCY_PNG = "bench-search-latency.png"
EMBEDDER_BATCH_PNG = "bench-embedder-batch.png"
SYNC_RATES_PNG = "bench-sync-rates.png"
DPI = 110
STORE_LABELS = {"milvus-lite": "Milvus Lite", "milvus-server": "Milvus server"}
STORE_COLORS = {"milvus-lite": "tab:blue", "milvus-server": "tab:orange"}


def _count(value: float, _pos=None) -> str:
    """10000 -> 10k, 1000000 -> 1M: corpus sizes read at a glance."""
    for scale, suffix in ((1_000_000, "M"), (1_000, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _chars(value) -> str:
    return f"{value:,.0f}" if isinstance(value, (int, float)) else "?"


def _footer(fig: Figure, results: dict) -> None:
    m = results.get("machine", {})
    text = (f"{m.get('cpu_model', '?')}, {m.get('cpu_count', '?')} cores, "
            f"{m.get('memory_gib', '?')} GiB; {results.get('started_at', '?')[:16].replace('T', ' ')} UTC")
    fig.text(0.01, 0.01, text, fontsize=7, color="0.4")


def _result(results: dict, name: str) -> dict | None:
    entry = results.get("benchmarks", {}).get(name)
    return entry["result"] if entry else None


def plot_search_latency(results: dict, path: Path) -> Path | None:
    retriever = _result(results, "retriever")
    points = (retriever or {}).get("points") or []
    if not points:
        return None
    fig = Figure(figsize=(7.5, 4.8), dpi=DPI)
    ax = fig.add_subplot()
    for store in sorted({p["store"] for p in points}):
        mine = sorted((p for p in points if p["store"] == store), key=lambda p: p["n_vectors"])
        sizes = [p["n_vectors"] for p in mine]
        color = STORE_COLORS.get(store, None)
        label = STORE_LABELS.get(store, store)
        version = mine[0].get("store_version")
        if version:
            label += f" {version}"
        ax.plot(sizes, [p["search_p50_ms"] for p in mine], marker="o", color=color,
                label=f"{label}: p50")
        ax.plot(sizes, [p["search_p95_ms"] for p in mine], marker="v", linestyle="--",
                color=color, alpha=0.6, label=f"{label}: p95")
        for p in mine:
            note = f"{p['search_p50_ms']:.0f} ms"
            if p.get("carried_over"):
                note += f"\n({p['measured_at'][:10]})"
            ax.annotate(note, (p["n_vectors"], p["search_p50_ms"]), textcoords="offset points",
                        xytext=(6, -12), fontsize=8, color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(_count))
    # Plain 1-2-5 labels (20, 50, 100 ms) rather than 2x10^1 on every minor tick.
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    all_sizes = [p["n_vectors"] for p in points]
    ax.set_xlim(min(all_sizes) / 1.6, max(all_sizes) * 2.2)  # room for the labels
    ax.set_ylim(min(p["search_p50_ms"] for p in points) / 1.6,
                max(p["search_p95_ms"] for p in points) * 1.25)
    ax.set_xlabel("corpus size (stored 768-d vectors, log scale)")
    ax.set_ylabel("Search latency at the client (ms, log scale)")
    ax.set_title("Retriever Search (HNSW, breadth 10: 60 candidates -> 30, MMR) vs corpus size",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    _footer(fig, results)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path)
    return path


def plot_embedder_batch(results: dict, path: Path) -> Path | None:
    embedder = _result(results, "embedder")
    sweep = (embedder or {}).get("batch_sweep")
    if not sweep or not sweep.get("points"):
        return None
    points = sorted(sweep["points"], key=lambda p: p["batch_size"])
    sizes = [p["batch_size"] for p in points]
    fig = Figure(figsize=(7.5, 4.8), dpi=DPI)
    ax = fig.add_subplot()
    ax.plot(sizes, [p["texts_per_s"] for p in points], marker="o",
            label=f"embedder service ({sweep.get('backend', '?')}, gRPC)")
    ax.plot(sizes, [p["baseline_texts_per_s"] for p in points], marker="s", linestyle="--",
            label="SentenceTransformer.encode (torch CPU), same batch_size")
    for p in points:
        # Above the service's point, or below it where the baseline's marker sits above.
        below = p["baseline_texts_per_s"] > p["texts_per_s"]
        ax.annotate(f"{p['texts_per_s']:.1f}", (p["batch_size"], p["texts_per_s"]),
                    textcoords="offset points", xytext=(0, -13 if below else 6), ha="center",
                    fontsize=8, color="tab:blue")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.set_ylim(0, max(max(p["texts_per_s"], p["baseline_texts_per_s"]) for p in points) * 1.18)
    default = sweep.get("service_default_batch_size")
    if default:
        ax.axvline(default, color="0.5", linestyle=":", linewidth=1)
        # At the top of the axes (x in data, y in axes fraction), clear of the legend.
        ax.annotate(f"service default ({default})", (default, 0.97),
                    xycoords=ax.get_xaxis_transform(), textcoords="offset points",
                    xytext=(4, -4), va="top", fontsize=8, color="0.4")
    ax.set_xlabel("inference batch size (texts per batch, log2 scale)")
    ax.set_ylabel("throughput (texts/s)")
    ax.set_title(f"Embedder throughput vs batch size: {sweep.get('model', '?')}, "
                 f"{sweep.get('n_texts', '?')} abstracts (mean {_chars(sweep.get('mean_chars'))} chars)",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    _footer(fig, results)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path)
    return path


# (label, key of the sync result, is it a baseline)
SYNC_BARS: Sequence[tuple[str, str, bool]] = (
    ("no-change resync, line cache (median)", "nochange_records_per_s", False),
    ("no-change resync, parsing every line", "nochange_uncached_records_per_s", False),
    ("baseline: no-change, one Get per batch", "nochange_baseline_records_per_s", True),
    ("import from snapshot (store writes)", "import_records_per_s", False),
    ("changed records, embed + upsert (marginal)", "changed_marginal_records_per_s", False),
    ("changed records, end to end", "changed_records_per_s", False),
    ("baseline: changed, one Embed + Upsert each", "changed_baseline_records_per_s", True),
)


def plot_sync_rates(results: dict, path: Path) -> Path | None:
    sync = _result(results, "sync")
    if not sync:
        return None
    bars = [(label, float(sync[key]), baseline) for label, key, baseline in SYNC_BARS
            if isinstance(sync.get(key), (int, float)) and sync[key] > 0]
    if not bars:
        return None
    fig = Figure(figsize=(7.5, 4.2), dpi=DPI)
    ax = fig.add_subplot()
    rows = range(len(bars))[::-1]  # first bar on top
    colors = ["0.6" if baseline else "tab:green" for _, _, baseline in bars]
    ax.barh(list(rows), [rate for _, rate, _ in bars], color=colors)
    for row, (_, rate, _) in zip(rows, bars):
        ax.annotate(f"{rate:,.2f}" if rate < 10 else f"{rate:,.0f}", (rate, row),
                    textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.set_yticks(list(rows))
    ax.set_yticklabels([label for label, _, _ in bars], fontsize=8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.set_xlim(min(1.0, min(rate for _, rate, _ in bars) / 2), max(rate for _, rate, _ in bars) * 8)
    ax.set_xlabel("records/s (log scale); grey: the baseline measured in the same run")
    records = sync.get("records")
    records_text = f"{records:,}" if isinstance(records, int) else "?"
    ax.set_title(f"Corpus sync rates: {records_text} arXiv records, "
                 f"{sync.get('model', '?')} ({sync.get('backend', '?')})", fontsize=10)
    ax.grid(True, axis="x", which="major", alpha=0.3)
    _footer(fig, results)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path)
    return path


def draw_all(results: dict, img_dir: Path) -> dict[str, Path]:
    """Every plot the results have data for: {name: path}."""
    img_dir.mkdir(parents=True, exist_ok=True)
    drawn = {}
    for name, draw, filename in (
        ("search_latency", plot_search_latency, SEARCH_LATENCY_PNG),
        ("embedder_batch", plot_embedder_batch, EMBEDDER_BATCH_PNG),
        ("sync_rates", plot_sync_rates, SYNC_RATES_PNG),
    ):
        path = draw(results, img_dir / filename)
        if path is not None:
            drawn[name] = path
    return drawn
