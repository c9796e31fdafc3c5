"""The fetcher as a real process over real gRPC, against a LocalArxiv on 127.0.0.1: a longlist in
parallel, batched metadata, the disk cache, every fallback cause, retries, bad ids, ExtractPdf,
the PDF-directory mode and bad settings."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from citeweave.fetcher.v1 import fetcher_pb2 as pb
from citeweave.fetcher.v1 import fetcher_pb2_grpc
from tests.conftest import running_service, start_up_failure_log
from pdf_factory import encrypted_pdf, not_pdf, sample_paper, scanned_pdf, truncated_pdf
from services.common.clients import sync_channel
from services.common.errors import InvalidArgument
from services.common.launcher import ServiceProcess, free_port
from services.fetcher.ids import parse_id
from services.fetcher.local_arxiv import LocalArxiv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pdfs"
SPECTER = FIXTURES / "2004.07180_SPECTER_2020.acl-main.207.pdf"
DEEPCT = FIXTURES / "noarxiv_DeepCT-SIGIR20_10.1145-3397271.3401204.pdf"
DEEPCT_ID = DEEPCT.stem  # not an arXiv id: accepted only with a PDF directory
FAST_STOP = {"drain_s": "0", "grace_s": "2"}
MAX_PDF_MB = 2
DOWNLOAD_TIMEOUT_S = 1.5
LATENCY_S = 0.3
INVALID = grpc.StatusCode.INVALID_ARGUMENT
FULL, ABSTRACT = pb.TEXT_SOURCE_FULL_TEXT, pb.TEXT_SOURCE_ABSTRACT_ONLY

LONGLIST = [f"2401.{n:05d}" for n in range(1, 31)]
STALLS, MISSING, HTML, TOO_LARGE, STREAMED_TOO_LARGE = (
    "2402.00001", "2402.00002", "2402.00003", "2402.00004", "2402.00005"
)
ENCRYPTED, SCANNED, FLAKY, BROKEN_SERVER = "2402.00006", "2402.00007", "2402.00008", "2402.00009"
RATE_LIMITED, RATE_LIMITED_LONG = "2402.00010", "2402.00011"
SAME_PAPER, DEADLINE, API_DOWN, SKIPPED = "2402.00012", "2402.00013", "2402.00014", "2402.00015"
OLD_STYLE = "hep-th/9901001"


class Fetcher:
    def __init__(self, process: ServiceProcess, stub: fetcher_pb2_grpc.FetcherServiceStub):
        self.process = process
        self.stub = stub

    def fetch(self, paper_id: str, timeout: float = 30, **fields) -> pb.FetchPaperResponse:
        return self.stub.FetchPaper(pb.FetchPaperRequest(id=paper_id, **fields), timeout=timeout)

    def fetch_all(self, ids: list[str]) -> list[pb.FetchPaperResponse]:
        """All at once, as the gateway fetches a longlist."""
        futures = [self.stub.FetchPaper.future(pb.FetchPaperRequest(id=i), timeout=60) for i in ids]
        return [future.result() for future in futures]

    def error(self, call, request) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as caught:
            call(request, timeout=30)
        return caught.value


@contextmanager
def fetcher(tmp_path: Path, **settings) -> Iterator[Fetcher]:
    with running_service("fetcher", tmp_path, {**FAST_STOP, **settings}) as process:
        with sync_channel(process.addr) as channel:
            yield Fetcher(process, fetcher_pb2_grpc.FetcherServiceStub(channel))


def _too_large_pdf() -> bytes:
    return b"%PDF-1.4\n" + b"0" * (MAX_PDF_MB * 1024 * 1024 + 1024)


@pytest.fixture(scope="module")
def arxiv() -> Iterator[LocalArxiv]:
    with LocalArxiv() as server:
        for n, paper_id in enumerate(LONGLIST):
            # Distinct bytes per paper (its metadata title), so each is its own download and blob.
            server.add(paper_id, title=f"Longlist paper {n}",
                       pdf=sample_paper(metadata_title=f"Longlist paper {n}"))
        server.add("2004.07180", title="SPECTER", pdf=SPECTER)
        server.add(OLD_STYLE, title="An old-style paper", pdf=sample_paper())
        for paper_id in (STALLS, MISSING, HTML, FLAKY, BROKEN_SERVER, RATE_LIMITED,
                         RATE_LIMITED_LONG, SAME_PAPER, DEADLINE, API_DOWN, SKIPPED):
            server.add(paper_id, title=f"Paper {paper_id}", pdf=sample_paper())
        server.add(TOO_LARGE, pdf=_too_large_pdf())
        server.add(STREAMED_TOO_LARGE, pdf=_too_large_pdf())
        server.add(ENCRYPTED, pdf=encrypted_pdf())
        server.add(SCANNED, pdf=scanned_pdf())
        server.add("2402.00020v3", title="Third version", pdf=sample_paper())
        server.stall[STALLS] = 30.0
        server.stall[DEADLINE] = 30.0
        server.missing.add(MISSING)
        server.html.add(HTML)
        server.no_length.add(STREAMED_TOO_LARGE)
        server.fail_first[FLAKY] = 2
        server.fail_first[BROKEN_SERVER] = 1000
        server.rate_limited[RATE_LIMITED] = (1, 1.0)
        server.rate_limited[RATE_LIMITED_LONG] = (1, 3600.0)
        yield server


@pytest.fixture(scope="module")
def service(arxiv, tmp_path_factory) -> Iterator[Fetcher]:
    tmp = tmp_path_factory.mktemp("fetcher")
    with fetcher(
        tmp,
        arxiv_api_url=arxiv.api_url,
        pdf_url_template=arxiv.pdf_url_template,
        arxiv_delay_s="0",
        arxiv_retries="1",
        metadata_batch_window_ms="100",
        cache_dir=str(tmp / "cache"),
        download_timeout_s=str(DOWNLOAD_TIMEOUT_S),
        retry_backoff_s="0.05",
        max_pdf_mb=str(MAX_PDF_MB),
    ) as service:
        yield service


# -- a longlist ---------------------------------------------------------------------------


def test_longlist_in_parallel_then_from_the_cache(service, arxiv):
    arxiv.reset_counters()
    arxiv.delay_s = LATENCY_S
    try:
        first = service.fetch_all(LONGLIST)
    finally:
        arxiv.delay_s = 0.0
    assert [r.text_source for r in first] == [FULL] * len(LONGLIST), [
        r.fallback_reason for r in first]
    assert [r.metadata.title for r in first] == [
        f"Longlist paper {n}" for n in range(len(LONGLIST))]
    assert all(r.metadata.id == f"{i}v1" and r.pages and not r.from_cache
               for i, r in zip(LONGLIST, first))
    assert all(r.metadata.pdf_url == arxiv.pdf_url_template.replace("{id}", f"{i}v1")
               for i, r in zip(LONGLIST, first))
    # Downloads overlapped (the server saw several at once), and each paper was asked for once.
    assert arxiv.max_in_flight > 1
    assert arxiv.pdf_requests() == len(LONGLIST)
    # Metadata went out in a few batched API requests, not one per paper.
    assert arxiv.api_requests <= 5, arxiv.api_batches
    assert sorted(i for batch in arxiv.api_batches for i in batch) == sorted(LONGLIST)

    arxiv.reset_counters()
    second = service.fetch_all(LONGLIST)
    assert all(r.from_cache and r.text_source == FULL and r.download_ms == 0 for r in second)
    assert [len(r.pages) for r in second] == [len(r.pages) for r in first]
    assert arxiv.pdf_requests() == 0
    assert arxiv.api_requests == 0, "records come from the cache too"


def test_one_download_for_concurrent_requests_of_one_paper(service, arxiv):
    arxiv.delay_s = LATENCY_S
    try:
        responses = service.fetch_all([SAME_PAPER] * 4)
    finally:
        arxiv.delay_s = 0.0
    assert all(r.text_source == FULL for r in responses)
    assert arxiv.pdf_requests(f"{SAME_PAPER}v1") == 1


def test_full_text_of_a_real_paper(service):
    response = service.fetch("2004.07180v1")
    assert response.text_source == FULL
    assert response.metadata.id == "2004.07180v1" and response.metadata.title == "SPECTER"
    assert response.metadata.authors and response.metadata.year == 2024
    assert response.page_count >= len(response.pages) > 5
    assert [p.number for p in response.pages] == sorted(p.number for p in response.pages)
    assert any(d.reason == pb.DROP_REASON_REFERENCES for d in response.dropped_parts)
    assert response.pdf_bytes == SPECTER.stat().st_size
    assert response.extract_ms > 0


def test_old_style_id_and_latest_version(service, arxiv):
    old = service.fetch(OLD_STYLE)
    assert old.text_source == FULL and old.metadata.id == f"{OLD_STYLE}v1"
    latest = service.fetch("2402.00020")
    assert latest.metadata.id == "2402.00020v3" and latest.text_source == FULL
    assert arxiv.pdf_requests("2402.00020v3") == 1, "the PDF of the version the record names"


def test_skip_metadata(service, arxiv):
    before = arxiv.api_requests
    response = service.fetch(SKIPPED, skip_metadata=True)
    assert response.text_source == FULL
    assert response.metadata.id == SKIPPED and not response.metadata.title
    assert response.metadata.pdf_url == arxiv.pdf_url_template.replace("{id}", SKIPPED)
    assert arxiv.api_requests == before


# -- fallbacks: the call answers OK with the abstract and the cause ---------------------------


@pytest.mark.parametrize(
    ("paper_id", "cause", "words"),
    [
        (MISSING, pb.FALLBACK_CAUSE_NOT_FOUND, "HTTP 404"),
        (HTML, pb.FALLBACK_CAUSE_NOT_PDF, "is not a PDF"),
        (TOO_LARGE, pb.FALLBACK_CAUSE_TOO_LARGE, f"over the {MAX_PDF_MB} MiB limit"),
        (STREAMED_TOO_LARGE, pb.FALLBACK_CAUSE_TOO_LARGE, f"over the {MAX_PDF_MB} MiB limit"),
        (ENCRYPTED, pb.FALLBACK_CAUSE_ENCRYPTED, "password"),
        (SCANNED, pb.FALLBACK_CAUSE_NO_TEXT, "scan"),
        (BROKEN_SERVER, pb.FALLBACK_CAUSE_UNAVAILABLE, "gave up after 3 attempts"),
        (RATE_LIMITED_LONG, pb.FALLBACK_CAUSE_UNAVAILABLE, "retry after 3600s"),
    ],
    ids=["404", "html", "too-large", "too-large-streamed", "encrypted", "scanned", "http-500",
         "long-retry-after"],
)
def test_pdf_problems_fall_back_to_the_abstract(service, paper_id, cause, words):
    response = service.fetch(paper_id)
    assert response.text_source == ABSTRACT
    assert response.fallback_cause == cause, response.fallback_reason
    assert words in response.fallback_reason
    assert response.metadata.abstract == f"The abstract of paper {paper_id}."
    assert not response.pages


def test_stalled_download_times_out(service):
    response = service.fetch(STALLS)
    assert response.text_source == ABSTRACT
    assert response.fallback_cause == pb.FALLBACK_CAUSE_TIMEOUT
    assert f"within {DOWNLOAD_TIMEOUT_S:g}s" in response.fallback_reason
    assert response.metadata.title == f"Paper {STALLS}"


def test_the_callers_deadline_bounds_the_download(service):
    """A deadline shorter than the download timeout: the fallback still arrives in time."""
    response = service.fetch(DEADLINE, timeout=1.0)
    assert response.text_source == ABSTRACT
    assert response.fallback_cause == pb.FALLBACK_CAUSE_TIMEOUT
    assert "deadline" in response.fallback_reason


def test_server_errors_are_retried(service, arxiv):
    response = service.fetch(FLAKY)
    assert response.text_source == FULL
    assert arxiv.pdf_requests(f"{FLAKY}v1") == 3, "two 500s, then the PDF"


def test_short_retry_after_is_honoured(service, arxiv):
    response = service.fetch(RATE_LIMITED)
    assert response.text_source == FULL
    assert arxiv.pdf_requests(f"{RATE_LIMITED}v1") == 2


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value", "base", "version"),
    [
        ("2401.01234", "2401.01234", "2401.01234", None),
        ("2401.01234v12", "2401.01234v12", "2401.01234", 12),
        ("0704.0001", "0704.0001", "0704.0001", None),
        ("arXiv:2401.01234v2", "2401.01234v2", "2401.01234", 2),
        ("hep-th/9901001v3", "hep-th/9901001v3", "hep-th/9901001", 3),
        ("math.AG/0309136", "math.AG/0309136", "math.AG/0309136", None),
        ("cond-mat/0102536", "cond-mat/0102536", "cond-mat/0102536", None),
    ],
)
def test_arxiv_ids(raw, value, base, version):
    paper_id = parse_id(raw, local_ids=False)
    assert (paper_id.arxiv, paper_id.value, paper_id.base, paper_id.version) == (
        True, value, base, version)
    assert paper_id.versioned == (version is not None)


@pytest.mark.parametrize("raw", ["2401.0123", "1412.01234", "2401.123456", "2400.01234",
                                 "2401.01234v0", "hep-th/990100", "HEP-TH/9901001", "x/../y"])
def test_not_arxiv_ids(raw):
    with pytest.raises(InvalidArgument, match="an arXiv id looks like"):
        parse_id(raw, local_ids=False)


def test_corpus_ids_need_a_pdf_directory():
    assert parse_id("W2963403868", local_ids=True).arxiv is False
    assert parse_id("acl/2020.acl-main.207", local_ids=True).file_stem == "acl_2020.acl-main.207"
    with pytest.raises(InvalidArgument, match="CITEWEAVE_FETCHER_PDF_DIR"):
        parse_id("W2963403868", local_ids=False)


@pytest.mark.parametrize(
    "bad_id", ["", "not-an-id", "2401.1", "2413.00001", "../../etc/passwd", "hep-th/99"]
)
def test_malformed_id_is_invalid_argument(service, bad_id):
    error = service.error(service.stub.FetchPaper, pb.FetchPaperRequest(id=bad_id))
    assert error.code() == INVALID
    assert "an arXiv id looks like 2401.01234" in error.details()


def test_unknown_arxiv_id_is_not_found(service):
    error = service.error(service.stub.FetchPaper, pb.FetchPaperRequest(id="2401.99999"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert error.details() == "arXiv has no paper 2401.99999"


def test_arxiv_api_down_is_unavailable(service, arxiv):
    arxiv.api_status = 503
    try:
        error = service.error(service.stub.FetchPaper, pb.FetchPaperRequest(id=API_DOWN))
        with_skip = service.fetch(API_DOWN, skip_metadata=True)
    finally:
        arxiv.api_status = None
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert arxiv.url in error.details() and "HTTP 503" in error.details()
    assert "skip_metadata" in error.details()
    assert with_skip.text_source == FULL


# -- ExtractPdf ---------------------------------------------------------------------------------


def test_extract_pdf_of_a_fixture(service):
    response = service.stub.ExtractPdf(
        pb.ExtractPdfRequest(pdf=SPECTER.read_bytes(), filename=SPECTER.name), timeout=60
    )
    assert response.page_count >= len(response.pages) > 5
    assert "SPECTER" in response.title
    assert any(d.reason == pb.DROP_REASON_REFERENCES for d in response.dropped_parts)
    assert response.extract_ms > 0


@pytest.mark.parametrize(
    ("pdf", "filename", "fragments"),
    [
        (b"", "", ["pdf is empty"]),
        (not_pdf(), "page.html", ["page.html: ", "not a PDF"]),
        (encrypted_pdf(), "locked.pdf", ["locked.pdf: ", "password"]),
        (scanned_pdf(), "", ["scan"]),
        (truncated_pdf(), "cut.pdf", ["cut.pdf: "]),
        (_too_large_pdf(), "big.pdf", ["'big.pdf' is 2.0 MiB", f"the limit is {MAX_PDF_MB} MiB"]),
    ],
    ids=["empty", "not-a-pdf", "encrypted", "scanned", "truncated", "too-large"],
)
def test_extract_pdf_rejects(service, pdf, filename, fragments):
    error = service.error(service.stub.ExtractPdf, pb.ExtractPdfRequest(pdf=pdf, filename=filename))
    assert error.code() == INVALID
    for fragment in fragments:
        assert fragment in error.details()


# -- a PDF directory instead of downloads --------------------------------------------------------


@pytest.fixture(scope="module")
def local_service(tmp_path_factory) -> Iterator[Fetcher]:
    """Reads PDFs from a directory; the arXiv API address is a closed port."""
    tmp = tmp_path_factory.mktemp("fetcher-dir")
    pdfs = tmp / "pdfs"
    pdfs.mkdir()
    shutil.copy(SPECTER, pdfs / "2004.07180.pdf")
    shutil.copy(DEEPCT, pdfs / DEEPCT.name)
    shutil.copy(DEEPCT, pdfs / "acm_10.1145-3397271.pdf")  # the id "acm/10.1145-3397271"
    with fetcher(
        tmp,
        pdf_dir=str(pdfs),
        arxiv_api_url=f"http://127.0.0.1:{free_port()}/api/query?{{}}",
        arxiv_retries="0",
        arxiv_delay_s="0",
        cache_dir=str(tmp / "cache"),
    ) as service:
        yield service


def test_pdf_dir_serves_a_corpus_id(local_service):
    response = local_service.fetch(DEEPCT_ID)
    assert response.text_source == FULL and response.pages
    assert response.metadata.id == DEEPCT_ID and not response.metadata.title
    assert response.metadata.pdf_url.startswith("file://")
    assert response.metadata.pdf_url.endswith(DEEPCT.name)
    assert not response.from_cache
    slashed = local_service.fetch("acm/10.1145-3397271")
    assert slashed.text_source == FULL
    assert slashed.metadata.pdf_url.endswith("acm_10.1145-3397271.pdf")


def test_pdf_dir_serves_an_arxiv_id_with_or_without_version(local_service):
    for paper_id in ("2004.07180", "2004.07180v1"):
        response = local_service.fetch(paper_id, skip_metadata=True)
        assert response.text_source == FULL, response.fallback_reason
        assert response.metadata.pdf_url.endswith("/2004.07180.pdf")


def test_pdf_dir_missing_file_falls_back(local_service):
    response = local_service.fetch("corpus-0001")
    assert response.text_source == ABSTRACT
    assert response.fallback_cause == pb.FALLBACK_CAUSE_NOT_FOUND
    assert "corpus-0001.pdf" in response.fallback_reason


@pytest.mark.parametrize("bad_id", ["../secret", "/etc/passwd", "a b", "x" * 201, "a\\b"])
def test_pdf_dir_refuses_unsafe_ids(local_service, bad_id):
    error = local_service.error(local_service.stub.FetchPaper, pb.FetchPaperRequest(id=bad_id))
    assert error.code() == INVALID
    assert "letters, digits and . _ - /" in error.details()


def test_unreachable_arxiv_api_is_unavailable(local_service):
    error = local_service.error(
        local_service.stub.FetchPaper, pb.FetchPaperRequest(id="2004.07180"))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "unreachable" in error.details() and "skip_metadata" in error.details()


# -- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        ({"pdf_url_template": "https://arxiv.org/pdf/"},
         ["CITEWEAVE_FETCHER_PDF_URL_TEMPLATE='https://arxiv.org/pdf/'", "must contain {id}"]),
        ({"arxiv_api_url": "https://export.arxiv.org/api/query"},
         ["CITEWEAVE_FETCHER_ARXIV_API_URL=", "must contain {}"]),
        ({"max_pdf_mb": "64"},
         ["CITEWEAVE_FETCHER_MAX_PDF_MB (64) must be below CITEWEAVE_FETCHER_MAX_MESSAGE_MB (64)"]),
        ({"pdf_dir": "/nonexistent/pdfs"},
         ["CITEWEAVE_FETCHER_PDF_DIR='/nonexistent/pdfs'", "is not a directory"]),
        ({"download_timeout_s": "0"},
         ["CITEWEAVE_FETCHER_DOWNLOAD_TIMEOUT_S='0'", "greater than 0"]),
    ],
    ids=["template-without-id", "api-url-without-braces", "pdf-over-message", "no-pdf-dir",
         "zero-timeout"],
)
def test_bad_setting_stops_start_up_with_a_message(tmp_path, settings, fragments):
    text = start_up_failure_log("fetcher", settings, tmp_path)
    for fragment in fragments:
        assert fragment in text
