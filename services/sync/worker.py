"""`python -m services.sync.worker`: one sync run in this process, for Kubernetes Jobs.

    python -m services.sync.worker --source SRC [--format auto|arxiv|jsonl]
        [--shard-index I] [--shard-count N] [--batch-size B] [--delete-missing] [--dry-run]
        [--limit L]

The same run as the sync service's Sync call (SyncApp's warm-up, SyncRun), without a server:
an Indexed Job starts N of these with `--shard-count N`, each taking its shard from
JOB_COMPLETION_INDEX, so N pods keep several embedder replicas busy. Settings are the sync
service's CITEWEAVE_SYNC_* variables. Logs are JSON lines: progress every log_interval_s, then
the summary.

Exit codes, for a Job's podFailurePolicy: 0 done; 1 a peer or the source's server failed
(UNAVAILABLE, timeouts: retrying can help, and a rerun continues where this one stopped);
2 bad arguments, settings or source (retrying cannot help); 143 stopped by SIGTERM at the next
batch, the writes already made stay.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import threading
from pathlib import Path

import grpc

from citeweave.sync.v1 import sync_pb2
from services.common.errors import CiteweaveError
from services.common.logs import configure_logging
from services.common.server import load_settings
from services.sync.app import SyncApp
from services.sync.download import is_url
from services.sync.job import Peers, SyncRun, check_request
from services.sync.peers import Cancelled
from services.sync.settings import SyncSettings
from services.sync.sources import FORMAT_CHOICES, Source

NAME = "sync-worker"
EXIT_PEER, EXIT_USAGE, EXIT_TERMINATED = 1, 2, 128 + signal.SIGTERM
# Codes that say the request or the configuration is wrong: a retry would fail the same way.
USAGE_CODES = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
})

log = logging.getLogger(f"citeweave.{NAME}")


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one log line instead of usage text on stderr
        raise UsageError(message)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number, 0 or more")
    return int(text)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m services.sync.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True,
                        help="A path (made absolute here) or an http(s) URL.")
    parser.add_argument("--format", choices=FORMAT_CHOICES, default="auto")
    parser.add_argument("--shard-index", type=_count, default=None,
                        help="Default: $JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs), else 0.")
    parser.add_argument("--shard-count", type=_count, default=0, help="0 or 1: no sharding.")
    parser.add_argument("--batch-size", type=_count, default=0, help="0: the settings' batch_size.")
    parser.add_argument("--delete-missing", action="store_true")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--limit", type=_count, default=0, help="0: every record.")
    args = parser.parse_args(argv)
    if args.shard_index is None:
        index = os.environ.get("JOB_COMPLETION_INDEX", "0")
        if not index.isdigit():
            raise UsageError(f"JOB_COMPLETION_INDEX={index!r} is not a shard index "
                             "(a whole number, 0 or more)")
        args.shard_index = int(index)
    if args.batch_size > 4096:
        raise UsageError(f"--batch-size must be at most 4096, got {args.batch_size}")
    return args


def build_request(args: argparse.Namespace) -> sync_pb2.SyncRequest:
    source = args.source
    if "://" not in source:
        source = str(Path(source).resolve())
    return sync_pb2.SyncRequest(
        source_path=source,
        format=FORMAT_CHOICES[args.format],
        options=sync_pb2.SyncOptions(
            delete_missing=args.delete_missing, dry_run=args.dry_run, batch_size=args.batch_size,
            limit=args.limit, shard_index=args.shard_index, shard_count=args.shard_count,
        ),
    )


def _log_failure(event: sync_pb2.SyncResponse) -> None:
    if event.WhichOneof("event") == "failure":  # progress is logged by the run itself
        f = event.failure
        log.warning("bad line", extra={"line": f.line_number, "id": f.record_id, "reason": f.reason})


async def _warm_up(app: SyncApp) -> Peers:
    await app.warm_up()
    return await app.peers()


def sync_once(settings: SyncSettings, request: sync_pb2.SyncRequest) -> sync_pb2.SyncSummary:
    check_request(request)
    if not is_url(request.source_path):
        Source.open(Path(request.source_path), request.format)  # a bad path fails before the wait
    app = SyncApp(settings)
    try:
        peers = asyncio.run(_warm_up(app))
        cancelled = threading.Event()

        def stop(signum, _frame) -> None:
            log.info("stopping at the next batch", extra={"signal": signal.Signals(signum).name})
            cancelled.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, stop)
        return SyncRun(request, peers, settings, _log_failure, cancelled).run()
    finally:
        asyncio.run(app.close())


def main(argv: list[str] | None = None) -> int:
    configure_logging(NAME)
    try:
        request = build_request(parse_args(argv))
    except UsageError as exc:
        log.error(f"invalid argument: {exc}")
        return EXIT_USAGE
    settings = load_settings(SyncSettings, NAME)  # exit 2 with a line per bad setting
    configure_logging(NAME, settings.log_level)
    try:
        sync_once(settings, request)
    except Cancelled:
        log.warning("stopped by a signal; the batches written stay, and running the same "
                    "shard again continues where this run stopped")
        return EXIT_TERMINATED
    except CiteweaveError as exc:
        log.error(exc.message, extra={"code": exc.code.name})
        return EXIT_USAGE if exc.code in USAGE_CODES else EXIT_PEER
    except grpc.RpcError as exc:
        log.error(f"a peer call failed: {exc.code().name}: {exc.details()}")
        return EXIT_PEER
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
