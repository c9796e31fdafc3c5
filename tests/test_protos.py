"""The committed stubs are exactly what protoc generates from protos/."""

from __future__ import annotations

import filecmp
import re
from pathlib import Path

from scripts.gen_protos import PROTO_ROOT, generate

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "services" / "common"


def test_committed_stubs_match_regeneration(tmp_path: Path) -> None:
    fresh = generate(tmp_path)
    assert fresh, "no stubs generated"
    stale = []
    for path in fresh:
        relative = path.relative_to(tmp_path)
        committed = COMMITTED / relative
        if not committed.exists() or not filecmp.cmp(path, committed, shallow=False):
            stale.append(str(relative))
    extra = {
        str(p.relative_to(COMMITTED))
        for p in (COMMITTED / "citeweave").rglob("*_pb2*.py*")
        if "__pycache__" not in p.parts  # bytecode caches are not stubs
    } - {str(p.relative_to(tmp_path)) for p in fresh}
    assert not stale and not extra, (
        f"stubs out of date (run `make protos` and commit): changed {stale}, stale {sorted(extra)}"
    )


def test_every_service_has_a_versioned_contract() -> None:
    for service in ("embedder", "retriever", "fetcher", "generator", "sync", "gateway"):
        proto = PROTO_ROOT / "citeweave" / service / "v1" / f"{service}.proto"
        text = proto.read_text()
        assert f"package citeweave.{service}.v1;" in text
        assert re.search(r"service \w+Service \{", text), f"{proto}: service name must end in Service"


def test_enums_start_with_unspecified_and_rpcs_have_own_messages() -> None:
    for proto in PROTO_ROOT.rglob("*.proto"):
        text = proto.read_text()
        for name, body in re.findall(r"enum (\w+) \{([^}]*)\}", text):
            prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()
            first = re.search(r"(\w+)\s*=\s*0;", body)
            assert first and first.group(1) == f"{prefix}_UNSPECIFIED", f"{proto}: enum {name}"
        for rpc, request, response in re.findall(
            r"rpc (\w+)\((?:stream )?(\w+)\) returns \((?:stream )?(\w+)\)", text
        ):
            assert request == f"{rpc}Request", f"{proto}: {rpc} takes {request}"
            assert response == f"{rpc}Response", f"{proto}: {rpc} returns {response}"
