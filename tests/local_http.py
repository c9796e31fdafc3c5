"""Serving a test's own HTTP server (a scripted LLM endpoint, a snapshot mirror) on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import HTTPServer


@contextmanager
def serving(server: HTTPServer) -> Iterator[HTTPServer]:
    """Runs server in a daemon thread until the block ends, then stops it and frees its port."""
    # A short poll interval: shutdown() waits for the loop to notice, once per test server.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
