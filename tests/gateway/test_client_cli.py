"""citeweave.client and `citeweave generate` / `citeweave answer` against the real gateway and
every service behind it (tests/gateway/gateway_stack.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citeweave.client import (
    Client, CiteweaveClientError, Progress, Range, Result, TextDelta, TextReset,
)
from services.cli.generate import error_line
from services.cli.main import app
from services.common.launcher import free_port
from tests.gateway.gateway_stack import (
    API_KEY, PDFS, QUERY, QUESTION, REPO, start_gateway, write_keys_file,
)

STAGES = {"embedding", "longlist", "fetching", "pages", "shortlist", "summarizing", "writing",
          "done"}
CANCELLED_LINE = "request cancelled by the caller"


def _check_result(result: Result) -> None:
    assert result.text and not result.generation_error
    shortlist_ids = {p.id for p in result.shortlist}
    assert result.references
    assert {r.paper_id for r in result.references} <= shortlist_ids
    assert set(result.timings) <= STAGES and all(s >= 0 for s in result.timings.values())


def _wait_for(predicate, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _admitted_search(client: Client, timeout_s: float = 15.0) -> list:
    """A search, retried while the endpoint still counts a request just cancelled as running."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return client.search(QUERY, breadth=5)
        except CiteweaveClientError as error:
            if error.code != "RESOURCE_EXHAUSTED" or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "services.cli.main", *args], cwd=REPO, capture_output=True,
        text=True, timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "CITEWEAVE_API_KEY": "", **(env or {})},
    )


# --- without a server --------------------------------------------------------------------------


def test_bad_arguments_fail_before_any_call() -> None:
    with Client(f"127.0.0.1:{free_port()}") as client:
        with pytest.raises(ValueError, match="exactly one"):
            client.generate()
        with pytest.raises(ValueError, match="exactly one"):
            client.search(QUERY, pdf=b"%PDF")
        with pytest.raises(ValueError, match="style"):
            client.generate(QUERY, style="harvard")
        with pytest.raises(ValueError, match="backend"):
            client.answer(QUESTION, backend="llama")


def test_dead_address_is_unavailable() -> None:
    with Client(f"127.0.0.1:{free_port()}", timeout_s=10) as client:
        with pytest.raises(CiteweaveClientError) as unary:
            client.info()
        with pytest.raises(CiteweaveClientError) as streaming:
            client.generate_section(QUERY)
    assert unary.value.code == streaming.value.code == "UNAVAILABLE"
    assert unary.value.retry_after_s is None


def test_cli_against_a_dead_address_says_what_to_do(tmp_path: Path) -> None:
    abstract = tmp_path / "abstract.txt"
    abstract.write_text(QUERY)
    addr = f"127.0.0.1:{free_port()}"
    run = _cli("generate", "--abstract-file", str(abstract), "--gateway-addr", addr)
    assert run.returncode == 1, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: UNAVAILABLE"), run.stderr
    assert f"is the gateway running at {addr}?" in errors[0] and "citeweave up" in errors[0]
    run = _cli("answer", QUESTION, env={"CITEWEAVE_GATEWAY_ADDR": addr})
    assert run.returncode == 1 and "citeweave up" in run.stderr


def test_cli_bad_options_exit_2(tmp_path: Path) -> None:
    abstract = tmp_path / "abstract.txt"
    abstract.write_text(QUERY)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    for args in (
        ["generate"],  # neither --abstract-file nor --pdf
        ["generate", "--abstract-file", str(abstract), "--pdf", str(abstract)],
        ["generate", "--abstract-file", str(tmp_path / "missing.txt")],
        ["generate", "--abstract-file", str(empty)],
        ["generate", "--abstract-file", str(abstract), "--breadth", "50"],
        ["generate", "--abstract-file", str(abstract), "--backend", "llama"],
        ["answer", QUESTION, "--style", "harvard"],
        ["answer", " "],
    ):
        assert CliRunner().invoke(app, args).exit_code == 2, args


def test_error_lines_say_what_to_do() -> None:
    addr = "127.0.0.1:50050"
    down = error_line(CiteweaveClientError("UNAVAILABLE", "the fetcher (127.0.0.1:50053) is "
                                           "unavailable: failed to connect to all addresses"), addr)
    assert "is the gateway running" not in down and "citeweave up" in down
    limited = error_line(CiteweaveClientError("RESOURCE_EXHAUSTED", "over its limit", 7.0), addr)
    assert limited == "RESOURCE_EXHAUSTED: over its limit (retry after 7 s)"
    said = error_line(CiteweaveClientError("RESOURCE_EXHAUSTED", "over; retry in 7 s", 7.0), addr)
    assert said == "RESOURCE_EXHAUSTED: over; retry in 7 s"


# --- against the gateway -----------------------------------------------------------------------


def test_generate_streams_progress_then_one_result(gateway_stack) -> None:
    with Client(gateway_stack.grpc_addr) as client:
        events = list(client.generate(QUERY, breadth=5, depth=1))
    progress = [e for e in events if isinstance(e, Progress)]
    percents = [p.percent for p in progress]
    assert percents == sorted(percents) and percents[-1] == 100, percents
    assert {p.stage for p in progress} <= STAGES and progress[-1].stage == "done"
    assert "fetching" in {p.stage for p in progress}
    results = [e for e in events if isinstance(e, Result)]
    assert len(results) == 1 and events[-1] is results[0]
    result = results[0]
    _check_result(result)
    assert len(result.shortlist) == 5 and len(result.longlist) == 15
    assert result.proto.input_kind == "abstract" and result.backend == "extractive"
    assert result.bibtex.count("@misc{") == len(result.references)
    # The deltas since the last reset are the text (the result is the authority).
    text = ""
    for event in events:
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, TextReset):
            text = ""
    assert text == result.text


def test_generate_section_from_a_pdf_path(gateway_stack) -> None:
    pdf = PDFS / "2004.07180_SPECTER_2020.acl-main.207.pdf"
    with Client(gateway_stack.grpc_addr) as client:
        result = client.generate_section(pdf=pdf, breadth=5, depth=1, style="author-year")
    _check_result(result)
    assert result.proto.input_kind == "pdf"
    assert all(r.marker.startswith("(") for r in result.references)


@pytest.mark.parametrize("how", ["with", "break"])
def test_leaving_a_stream_early_cancels_the_call(gateway_stack, how: str) -> None:
    cancelled_before = gateway_stack.log("gateway").count(CANCELLED_LINE)
    with Client(gateway_stack.grpc_addr) as client:
        if how == "with":
            with client.generate(QUERY) as stream:
                first = next(stream)
            assert list(stream) == []  # closed: nothing more, no error
        else:
            for first in client.generate(QUERY):  # the dropped stream cancels on its own
                break
        assert isinstance(first, Progress) and first.percent < 100
        assert _wait_for(
            lambda: gateway_stack.log("gateway").count(CANCELLED_LINE) > cancelled_before
        ), "the gateway did not cancel the request"
        assert _admitted_search(client)  # the cancelled request no longer holds a slot


def test_answer(gateway_stack) -> None:
    with Client(gateway_stack.grpc_addr) as client:
        stream = client.answer(QUESTION, breadth=5, depth=1)
        seen: list = []
        result = stream.result(on_event=seen.append)
    _check_result(result)
    assert result.proto.input_kind == "question"
    assert seen[-1] is result and any(isinstance(e, Progress) for e in seen)


def test_search_returns_the_longlist(gateway_stack) -> None:
    with Client(gateway_stack.grpc_addr) as client:
        papers = client.search(QUERY, breadth=5, diversity=0.3)
    assert [p.rank for p in papers] == list(range(1, 16))
    assert all(p.id and p.title for p in papers)
    assert "2004.07180" in {p.id for p in papers}  # SPECTER is about exactly this
    assert all(not p.chosen_pages for p in papers)  # no full text in a search


def test_info(gateway_stack) -> None:
    with Client(gateway_stack.grpc_addr) as client:
        info = client.info()
    assert info.breadth == Range(5, 20, 10) and info.depth == Range(1, 5, 2)
    assert info.diversity == Range(0, 1, 0)
    assert not info.auth_required and info.papers == 67
    assert info.max_abstract_chars > 0 and info.max_pdf_bytes > 0


def test_errors_map_to_client_errors(gateway_stack) -> None:
    with Client(gateway_stack.grpc_addr) as client:
        with pytest.raises(CiteweaveClientError) as unary:
            client.search(QUERY, breadth=50)
        with pytest.raises(CiteweaveClientError) as streaming:
            list(client.generate("word " * 5000))
    assert unary.value.code == streaming.value.code == "INVALID_ARGUMENT"
    assert "breadth" in unary.value.message
    assert str(streaming.value).startswith("INVALID_ARGUMENT: ")


def test_keys_and_limits(gateway_stack, tmp_path: Path) -> None:
    keys = write_keys_file(tmp_path / "keys.json", max_concurrent=1)
    gateway = start_gateway(gateway_stack, {"api_keys_file": str(keys)}, name="gateway-keys")
    try:
        for key in (None, "wrong-key-0123456789abcdef"):
            with Client(gateway.addr, api_key=key) as client:
                assert client.info().auth_required  # open: it says a key is needed
                with pytest.raises(CiteweaveClientError) as denied:
                    client.search(QUERY)
            assert denied.value.code == "UNAUTHENTICATED"
        run = _cli("answer", QUESTION, "--gateway-addr", gateway.addr)
        assert run.returncode == 1 and "UNAUTHENTICATED" in run.stderr
        assert "--api-key" in run.stderr and "CITEWEAVE_API_KEY" in run.stderr

        with Client(gateway.addr, api_key=API_KEY) as client:
            assert client.info().auth_required
            with client.generate(QUERY) as running:
                next(running)  # admitted: the tenant's one slot is taken
                with pytest.raises(CiteweaveClientError) as limited:
                    client.search(QUERY)
            assert limited.value.code == "RESOURCE_EXHAUSTED"
            assert limited.value.retry_after_s == 5
            assert _admitted_search(client)  # closing the stream gave the slot back
    finally:
        gateway_stack.stop("gateway-keys")


def test_cli_generate_json_and_bibtex(gateway_stack, tmp_path: Path) -> None:
    abstract = tmp_path / "abstract.txt"
    abstract.write_text(QUERY)
    bib = tmp_path / "refs.bib"
    run = _cli("generate", "--abstract-file", str(abstract), "--breadth", "5", "--depth", "1",
               "--json", "--bibtex", str(bib), "--gateway-addr", gateway_stack.grpc_addr)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["text"] and result["input_kind"] == "abstract"
    assert result["generation_error"] == ""  # every field, as the HTTP API answers
    shortlist = {p["paper"]["id"] for p in result["shortlist"]}
    assert {r["paper_id"] for r in result["references"]} <= shortlist
    assert bib.read_text().count("@misc{") == len(result["references"]) > 0


def test_cli_answer_prints_the_text_and_references(gateway_stack) -> None:
    run = _cli("answer", QUESTION, "--breadth", "5", "--depth", "1",
               env={"CITEWEAVE_GATEWAY_ADDR": gateway_stack.grpc_addr})
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("Answer\n")
    text, references = run.stdout.split("\nReferences\n")
    lines = references.strip().splitlines()
    assert lines and all(line.startswith(f"[{n}] ") for n, line in enumerate(lines, start=1))
    assert "[1]" in text and "https://" in references
    assert "shortlisted papers cited" in run.stderr
