"""`citeweave bench all`: every benchmark, its JSON saved, plots drawn, docs/performance.md updated.

Each benchmark runs as its own `citeweave bench NAME --json` process (a million vectors or a
loaded model do not linger into the next one, and the one-JSON-object-last contract is what is
read back). The collected results go to `<out>/bench/latest.json` with a description of the
machine, the PNG plots to `<out>/img/`, and the generated section of `<out>/performance.md`
between its markers is rewritten; the hand-written text around it stays.

A benchmark or a retriever point (store, corpus size) that this run did not measure is carried
over from the previous latest.json with its own date, when that was measured on the same machine
type: the 1M-vector point takes ~35 min on this machine, so `make bench` does not re-run it
(docs/performance.md). `--quick` runs small versions for development and writes under
var/bench/quick/ unless told otherwise, so it never overwrites the published figures.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench import machine
from bench.output import dumps, last_json_object

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = ("embedder", "retriever", "sync", "fetcher", "pipeline")
DOCS = REPO / "docs"
QUICK_OUT = REPO / "var" / "bench" / "quick"
# What a quick run asks of each benchmark: minutes, not half an hour; figures not comparable.
QUICK_KWARGS: dict[str, dict] = {
    "embedder": {"n_texts": 16, "rounds": 2, "batch_sizes": (1, 4, 16), "sweep_texts": 32},
    "retriever": {"sizes": (2_000, 10_000), "stores": ("lite",), "queries": 30},
    "sync": {"n_records": 3_000, "n_changed": 8, "repeats": 1, "rounds": 1},
    "fetcher": {"repeats": 1, "rounds": 2, "model": "all-MiniLM-L6-v2"},
    # MiniLM needs a corpus embedded with it: the 60-record fixture slice, embedded by the sync.
    "pipeline": {"breadth": 5, "rounds": 1, "latency_s": 0.2, "model": "all-MiniLM-L6-v2",
                 "corpus": REPO / "tests" / "fixtures" / "arxiv" / "slice-a.jsonl.gz",
                 "conditions": ("cold",)},
}


def _log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def bench_kwargs(name: str, quick: bool = False, sizes: Sequence[int] | None = None,
                 stores: Sequence[str] | None = None,
                 batch_sizes: Sequence[int] | None = None) -> dict:
    """The keyword arguments of bench.<name>_bench.run() for these command-line options;
    explicit options win over --quick."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose {', '.join(BENCHMARKS)} or all")
    kwargs = dict(QUICK_KWARGS[name]) if quick else {}
    if name == "retriever":
        if sizes:
            kwargs["sizes"] = tuple(sizes)
        if stores:
            kwargs["stores"] = tuple(stores)
    if name == "embedder" and batch_sizes is not None:
        kwargs["batch_sizes"] = tuple(batch_sizes)
    return kwargs


def run_one(name: str, **kwargs) -> dict:
    """One benchmark in this process: what `citeweave bench NAME` prints."""
    if name == "embedder":
        from bench.embedder_bench import run
    elif name == "retriever":
        from bench.retriever_bench import run
    elif name == "sync":
        from bench.sync_bench import run
    elif name == "fetcher":
        from bench.fetcher_bench import run
    elif name == "pipeline":
        from bench.pipeline_bench import run
    else:
        raise ValueError(f"unknown benchmark {name!r}; choose {', '.join(BENCHMARKS)} or all")
    return run(**kwargs)


def cli_args(name: str, quick: bool, sizes: str | None, stores: str | None,
             batch_sizes: str | None) -> list[str]:
    """The `citeweave bench NAME --json ...` command line that runs one benchmark."""
    args = [sys.executable, "-m", "services.cli.main", "bench", name, "--json"]
    if quick:
        args.append("--quick")
    if name == "retriever" and sizes:
        args += ["--sizes", sizes]
    if name == "retriever" and stores:
        args += ["--stores", stores]
    if name == "embedder" and batch_sizes:
        args += ["--batch-sizes", batch_sizes]
    return args


def run_subprocess(args: list[str]) -> tuple[dict, float]:
    """Runs one benchmark command (progress passes through on stderr) and returns its JSON."""
    start = time.perf_counter()
    completed = subprocess.run(args, cwd=REPO, stdout=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - start
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:])} exited with code {completed.returncode}")
    return last_json_object(completed.stdout), wall


def _same_machine(a: dict, b: dict) -> bool:
    keys = ("cpu_model", "cpu_count", "memory_gib")
    return all(a.get(k) == b.get(k) for k in keys)


def merge_previous(fresh: dict, previous: dict | None) -> dict:
    """Carries over what this run did not measure from the previous results of the same machine
    type: whole benchmarks, and retriever points (store, corpus size), each marked as carried
    over and keeping its own date."""
    if not previous or not _same_machine(fresh["machine"], previous.get("machine", {})):
        return fresh
    benchmarks = fresh["benchmarks"]
    for name, entry in previous.get("benchmarks", {}).items():
        if name not in benchmarks:
            benchmarks[name] = {**entry, "carried_over": True}
    new_retriever = benchmarks.get("retriever")
    old_retriever = previous.get("benchmarks", {}).get("retriever")
    if new_retriever and old_retriever and new_retriever is not old_retriever \
            and not new_retriever.get("carried_over"):
        points = new_retriever["result"].setdefault("points", [])
        measured = {(p["store"], p["n_vectors"]) for p in points}
        for point in old_retriever["result"].get("points", []):
            if (point["store"], point["n_vectors"]) not in measured:
                points.append({**point, "carried_over": True})
        points.sort(key=lambda p: (p["store"], p["n_vectors"]))
    return fresh


def collect(names: Sequence[str], quick: bool = False, sizes: str | None = None,
            stores: str | None = None, batch_sizes: str | None = None,
            from_files: dict[str, Path] | None = None) -> dict:
    """Runs the named benchmarks one after another and gathers their JSON objects."""
    from_files = from_files or {}
    results: dict = {
        "schema": 1,
        "machine": machine.describe(),
        "quick": quick,
        "started_at": _now(),
        "benchmarks": {},
    }
    start = time.perf_counter()
    for name in names:
        if name in from_files:
            path = from_files[name]
            _log(f"{name}: taking the result saved in {path}")
            result = last_json_object(path.read_text())
            measured_at = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
            results["benchmarks"][name] = {
                "result": result, "measured_at": measured_at.isoformat(timespec="seconds"),
                "source": str(path), "wall_s": None,
            }
            continue
        args = cli_args(name, quick, sizes, stores, batch_sizes)
        _log(f"{name}: {' '.join(args[2:])} (load {os.getloadavg()[0]:.1f})")
        measured_at = _now()
        result, wall = run_subprocess(args)
        results["benchmarks"][name] = {
            "result": result, "measured_at": measured_at, "command": " ".join(args[3:]),
            "wall_s": round(wall, 1),
        }
        _log(f"{name}: done in {wall / 60:.1f} min")
    results.update(
        finished_at=_now(),
        wall_s=round(time.perf_counter() - start, 1),
        load_average_at_end=machine.load_average(),
    )
    return results


def publish(results: dict, out: Path, previous_path: Path | None = None) -> dict:
    """Saves latest.json (merged with the previous one), draws the plots, rewrites the doc."""
    from bench import plots, report

    json_path = out / "bench" / "latest.json"
    previous_path = previous_path or json_path
    previous = json.loads(previous_path.read_text()) if previous_path.is_file() else None
    results = merge_previous(results, previous)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(json.loads(dumps(results)), indent=1) + "\n")
    images = plots.draw_all(results, out / "img")
    doc = out / "performance.md"
    if not doc.is_file() and out != DOCS:
        # A quick run previews the section in a copy of the real document.
        doc.write_text((DOCS / "performance.md").read_text())
    report.write(doc, results, images)
    results["written"] = {
        "json": str(json_path), "doc": str(doc), "images": [str(p) for p in images.values()],
    }
    _log(f"wrote {json_path}, {doc} and {len(images)} plots")
    return results


def run(names: Sequence[str] = BENCHMARKS, quick: bool = False, sizes: str | None = None,
        stores: str | None = None, batch_sizes: str | None = None, out: Path | None = None,
        from_files: dict[str, Path] | None = None) -> dict:
    out = out or (QUICK_OUT if quick else DOCS)
    results = collect(names, quick, sizes, stores, batch_sizes, from_files)
    return publish(results, out)


def parse_only(text: str | None) -> list[str]:
    if not text:
        return list(BENCHMARKS)
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown or not names:
        raise ValueError(f"--only {text!r}: choose from {', '.join(BENCHMARKS)}")
    return names


def _parse_from(items: list[str]) -> dict[str, Path]:
    parsed = {}
    for item in items:
        name, _, path = item.partition("=")
        if name not in BENCHMARKS or not path:
            raise ValueError(f"--from {item!r}: write NAME=FILE with NAME one of {BENCHMARKS}")
        parsed[name] = Path(path)
    return parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="comma-separated: embedder,retriever,sync")
    parser.add_argument("--quick", action="store_true", help="small runs for development")
    parser.add_argument("--sizes", default=None, help="retriever corpus sizes, e.g. 10k,100k")
    parser.add_argument("--stores", default=None, help="retriever stores: lite,server")
    parser.add_argument("--batch-sizes", default=None, help="embedder sweep, e.g. 1,4,16")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for bench/latest.json, img/ and performance.md "
                             "(default docs/, or var/bench/quick/ with --quick)")
    parser.add_argument("--from", dest="from_files", action="append", default=[],
                        metavar="NAME=FILE",
                        help="take a benchmark's JSON from a saved run instead of running it")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the plots and the doc section from the saved "
                             "latest.json (after changing bench/plots.py or bench/report.py)")
    args = parser.parse_args(argv)
    if args.replot:
        out = args.out or DOCS
        saved = json.loads((out / "bench" / "latest.json").read_text())
        print(dumps(publish(saved, out)), flush=True)
        return 0
    result = run(parse_only(args.only), args.quick, args.sizes, args.stores, args.batch_sizes,
                 args.out, _parse_from(args.from_files))
    print(dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
