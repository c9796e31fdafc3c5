"""Runs a real Milvus server (PyPI `milvus==2.3.5`) on 127.0.0.1 until killed.

`python milvus_server_process.py BASE_DIR` prints `READY <port>` once the server answers. Run it
in a new session and end the whole process group: the server's own stop() is not clean.
"""

from __future__ import annotations

import sys
import time

from milvus import default_server

# Without these every component advertises the machine's external address, which is not
# reachable here; 127.0.0.1 keeps all traffic local.
COMPONENTS = (
    "rootCoord", "proxy", "queryCoord", "queryNode", "indexCoord", "indexNode", "dataCoord",
    "dataNode",
)


def main() -> None:
    default_server.set_base_dir(sys.argv[1])
    for component in COMPONENTS:
        default_server.config.set(f"{component}.ip", "127.0.0.1")
    default_server.start()
    print(f"READY {default_server.listen_port}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
