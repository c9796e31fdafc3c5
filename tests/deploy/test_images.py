"""Static checks of the container images in deploy/docker/ (no Docker engine needed or used).

Each Dockerfile is parsed into stages and instructions, then checked against the repository:
what it copies exists and is not .dockerignore'd, what it runs is a real service module, what it
installs is pyproject's pinned set, what it exposes and configures matches the settings classes.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.cli.stack import SERVICE_ORDER, settings_class

REPO = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO / "deploy" / "docker"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
UID = "10001"
# Where the images keep what a service writes: volumes on Kubernetes (read-only root file system).
STATE_ROOT = "/var/lib/citeweave/"
# Settings that name a place the service writes to; each image must point them at a volume path.
WRITABLE_SETTINGS = {
    "retriever": ["milvus_uri"],
    "fetcher": ["cache_dir"],
    "sync": ["state_dir", "topic_model_dir", "download_dir"],
}
BUILD_TOOLS = {"gcc", "g++", "make", "build-essential", "cmake", "clang", "python3.11-dev",
               "python3-dev", "git", "curl", "wget", "python3.11-venv"}


# ---- a small Dockerfile parser ------------------------------------------------------------------

@dataclass
class Instruction:
    keyword: str  # upper case
    args: str  # the rest of the logical line, continuations joined
    line: int

    def json_args(self) -> list[str] | None:
        """The exec (JSON array) form, or None for the shell form."""
        try:
            value = json.loads(self.args)
        except ValueError:
            return None
        return value if isinstance(value, list) else None

    def flags_and_words(self) -> tuple[dict[str, str], list[str]]:
        """`--name=value` flags and the remaining words (JSON form understood)."""
        words = self.json_args()
        flags: dict[str, str] = {}
        if words is None:
            words = shlex.split(self.args)
            while words and words[0].startswith("--"):
                name, _, value = words.pop(0)[2:].partition("=")
                flags[name] = value
        return flags, words


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def env(self) -> dict[str, str]:
        """ENV key=value pairs of this stage, in order (later wins)."""
        env: dict[str, str] = {}
        for instr in self.all("ENV"):
            words = shlex.split(instr.args)
            if len(words) >= 2 and "=" not in words[0]:  # legacy `ENV KEY value`
                env[words[0]] = " ".join(words[1:])
                continue
            for word in words:
                key, sep, value = word.partition("=")
                assert sep, f"line {instr.line}: ENV word {word!r} has no '='"
                env[key] = value
        return env


@dataclass
class Dockerfile:
    path: Path
    args: dict[str, str]  # ARG defaults declared before the first FROM
    stages: list[Stage]

    @property
    def runtime(self) -> Stage:
        return self.stages[-1]

    @property
    def service(self) -> str:
        return self.path.name.removesuffix(".Dockerfile").removesuffix("-cuda")


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Joins backslash continuations; drops comments and blank lines (also inside a continuation,
    as Docker does). Returns (first line number, text)."""
    out: list[tuple[int, str]] = []
    buffer: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer.append(stripped[:-1].rstrip())
            continue
        buffer.append(stripped)
        out.append((start, " ".join(buffer)))
        buffer = []
    assert not buffer, "the file ends inside a line continuation"
    return out


def substitute(value: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: variables.get(m[1], m[0]), value)


def parse(path: Path) -> Dockerfile:
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for number, line in logical_lines(path.read_text()):
        keyword, _, rest = line.partition(" ")
        instr = Instruction(keyword.upper(), rest.strip(), number)
        if instr.keyword == "FROM":
            words = shlex.split(substitute(instr.args, args))
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].lower() == "as" else None
            stages.append(Stage(base=words[0], name=name))
        elif not stages:
            assert instr.keyword == "ARG", f"{path.name}:{number}: only ARG may precede FROM"
            key, _, default = instr.args.partition("=")
            args[key] = default
        else:
            stages[-1].instructions.append(instr)
    return Dockerfile(path, args, stages)


# ---- .dockerignore, with Docker's matching rules -------------------------------------------------

def _pattern_regex(pattern: str) -> re.Pattern:
    """Go filepath.Match syntax plus `**` (any number of path segments), as Docker uses."""
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
            continue
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        out += {"*": "[^/]*", "?": "[^/]"}.get(c, re.escape(c))
        i += 1
    return re.compile(out + r"\Z")


def dockerignore_rules() -> list[tuple[bool, re.Pattern]]:
    rules = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        rules.append((negated, _pattern_regex(pattern)))
    return rules


def ignored(relative: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    """Whether the build context leaves out this path: the last rule matching the path or one of
    its parent directories decides."""
    parts = relative.strip("/").split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for negated, regex in rules:
        if any(regex.match(p) for p in prefixes):
            excluded = not negated
    return excluded


# ---- fixtures and helpers -------------------------------------------------------------------------

DOCKERFILES = sorted(DOCKER_DIR.glob("*.Dockerfile"))
IDS = [p.name for p in DOCKERFILES]


@pytest.fixture(params=DOCKERFILES, ids=IDS)
def dockerfile(request) -> Dockerfile:
    return parse(request.param)


EMBEDDER_FILES = [p for p in DOCKERFILES if p.name.startswith("embedder")]


@pytest.fixture(params=EMBEDDER_FILES, ids=[p.name for p in EMBEDDER_FILES])
def embedder_dockerfile(request) -> Dockerfile:
    return parse(request.param)


def pyproject_pins() -> dict[str, str]:
    pins = {}
    for dep in PYPROJECT["project"]["dependencies"]:
        name, sep, version = dep.partition("==")
        assert sep, f"pyproject dependency {dep!r} is not pinned with =="
        pins[normalize(name.split("[")[0])] = version
    return pins


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def copies(stage: Stage) -> list[tuple[dict[str, str], list[str], str]]:
    """(flags, sources, destination) of each COPY/ADD of a stage."""
    out = []
    for instr in stage.all("COPY") + stage.all("ADD"):
        flags, words = instr.flags_and_words()
        assert len(words) >= 2, f"line {instr.line}: COPY needs a source and a destination"
        out.append((flags, words[:-1], words[-1]))
    return out


def context_copies(df: Dockerfile) -> list[tuple[Stage, list[str], str]]:
    """COPY/ADD from the build context (not --from another stage or image), every stage."""
    return [(s, src, dest) for s in df.stages for flags, src, dest in copies(s) if "from" not in flags]


def run_commands(stage: Stage) -> list[list[str]]:
    """Each RUN split into its simple commands (on &&, ;, |), as word lists."""
    commands = []
    for instr in stage.all("RUN"):
        lexer = shlex.shlex(instr.args, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True  # quotes respected, operators split off
        words: list[str] = []
        for token in lexer:
            if token in ("&&", "||", ";", "|", "&"):
                commands.append(words)
                words = []
            else:
                words.append(token)
        commands.append(words)
    return [c for c in commands if c]


def pip_installs(df: Dockerfile) -> list[list[str]]:
    out = []
    for stage in df.stages:
        for words in run_commands(stage):
            if "pip" in words and "install" in words:
                out.append(words[words.index("install") + 1:])
            elif words[:1] in (["uv"], ["conda"], ["pipx"]):
                out.append(words)  # fails below: only pip, from pyproject
    return out


# ---- the tests ------------------------------------------------------------------------------------

def test_every_service_has_an_image():
    names = {p.name for p in DOCKERFILES}
    expected = {f"{name}.Dockerfile" for name in SERVICE_ORDER} | {"embedder-cuda.Dockerfile"}
    assert names == expected


def test_parser_joins_continuations_and_skips_comments(tmp_path):
    path = tmp_path / "x.Dockerfile"
    path.write_text("ARG B=img:1\nFROM ${B} AS one\nRUN a \\\n# inside\n  && b\n"
                    "FROM one\nCOPY --from=one /x \\\n /y\n")
    df = parse(path)
    assert [s.base for s in df.stages] == ["img:1", "one"]
    assert df.stages[0].all("RUN")[0].args == "a && b"
    assert copies(df.stages[1]) == [({"from": "one"}, ["/x"], "/y")]


def test_dockerignore_rules_follow_docker():
    rules = [(False, _pattern_regex("deploy")), (True, _pattern_regex("deploy/docker/x.py")),
             (False, _pattern_regex("**/__pycache__"))]
    assert ignored("deploy/k8s/a.yaml", rules)
    assert not ignored("deploy/docker/x.py", rules)
    assert ignored("services/a/__pycache__/m.pyc", rules)
    assert not ignored("services/a/m.py", rules)


def test_multi_stage_with_a_slim_or_cuda_runtime(dockerfile):
    assert len(dockerfile.stages) >= 2, "builder and runtime stages"
    base = dockerfile.runtime.base
    if dockerfile.path.name.endswith("-cuda.Dockerfile"):
        assert base.startswith("nvidia/cuda:"), base
        assert "python3.11" in " ".join(" ".join(c) for c in run_commands(dockerfile.runtime))
    else:
        assert re.fullmatch(r"python:3\.11-slim(-\w+)?", base), base
    # requires-python is 3.11 only; the images must agree.
    assert PYPROJECT["project"]["requires-python"].startswith(">=3.11,<3.12")


def test_copy_sources_exist_and_are_in_the_build_context(dockerfile):
    rules = dockerignore_rules()
    checked = 0
    for stage, sources, _ in context_copies(dockerfile):
        for source in sources:
            path = REPO / source
            assert path.exists(), f"{dockerfile.path.name}: COPY source {source} does not exist"
            assert not ignored(source, rules), f"{source} is excluded by .dockerignore"
            files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            kept = [p for p in files if not ignored(p.relative_to(REPO).as_posix(), rules)]
            assert kept, f"{source}: every file under it is excluded by .dockerignore"
            checked += 1
    assert checked


def test_copy_from_names_an_earlier_stage(dockerfile):
    seen: set[str] = set()
    for stage in dockerfile.stages:
        for flags, _, _ in copies(stage):
            if "from" in flags:
                assert flags["from"] in seen, f"COPY --from={flags['from']}: no earlier stage"
        if stage.name:
            seen.add(stage.name)


def test_entrypoint_is_the_service_module_and_it_is_in_the_image(dockerfile):
    entrypoints = dockerfile.runtime.all("ENTRYPOINT")
    assert len(entrypoints) == 1
    assert entrypoints[0].json_args() == ["python", "-m", f"services.{dockerfile.service}"]
    main = REPO / "services" / dockerfile.service / "__main__.py"
    assert main.is_file() and (main.parent / "__init__.py").is_file()
    # The runtime stage copies the module's source from the context...
    rules = dockerignore_rules()
    relative = main.relative_to(REPO).as_posix()
    assert not ignored(relative, rules)
    assert any(relative == s or relative.startswith(s.rstrip("/") + "/")
               for stage, sources, _ in context_copies(dockerfile) if stage is dockerfile.runtime
               for s in sources), f"the runtime stage does not copy {relative}"
    # ...and finds it: PYTHONPATH holds the package roots pyproject declares.
    env = dockerfile.runtime.env()
    roots = [r.rstrip("/") for r in env["PYTHONPATH"].split(":")]
    workdir = dockerfile.runtime.all("WORKDIR")[-1].args
    expected = [workdir if w == "." else f"{workdir}/{w}"
                for w in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]]
    assert roots == expected
    # `python` resolves to the venv the builder filled.
    assert env["PATH"].startswith("/opt/venv/bin:")
    assert any(f.get("from") == "builder" and sources == ["/opt/venv"] and dest == "/opt/venv"
               for f, sources, dest in copies(dockerfile.runtime))


def test_runtime_runs_as_a_fixed_non_root_user(dockerfile):
    users = dockerfile.runtime.all("USER")
    assert users, "the runtime stage sets no USER"
    # Numeric, so Kubernetes' runAsNonRoot can check it without /etc/passwd.
    assert users[-1].args in (UID, f"{UID}:{UID}")
    assert dockerfile.runtime.instructions.index(users[-1]) > max(
        dockerfile.runtime.instructions.index(i) for i in dockerfile.runtime.all("RUN"))


def test_runtime_stage_installs_no_build_tools(dockerfile):
    for words in run_commands(dockerfile.runtime):
        assert not ("pip" in words and "install" in words), "pip install belongs to the builder"
        if words[:1] in (["apt-get"], ["apt"]) and "install" in words:
            assert not BUILD_TOOLS & set(words), words


def test_installs_exactly_pyprojects_pins(dockerfile):
    pins = pyproject_pins()
    installs = pip_installs(dockerfile)
    assert installs, "nothing is installed"
    via_pyproject = False
    for words in installs:
        assert words[0] not in ("uv", "conda", "pipx"), f"not pip: {words}"
        # Only binary wheels (no compiler in any stage) from a requirements file or pinned lines.
        assert "--only-binary=:all:" in words, words
        i = 0
        while i < len(words):
            word = words[i]
            if word in ("-r", "--requirement"):
                assert words[i + 1] in ("requirements.txt", "torch.txt"), words
                via_pyproject = True
                i += 2
                continue
            if word in ("--index-url", "-i", "--extra-index-url", "-c", "--constraint"):
                i += 2
                continue
            if word.startswith("-"):
                assert not word.startswith(("--pre", "-U", "--upgrade", "-e", "--editable")), word
                i += 1
                continue
            name, sep, version = word.partition("==")
            assert sep, f"{dockerfile.path.name}: unpinned pip install {word!r}"
            assert pins.get(normalize(name.split("[")[0])) == version, (
                f"{word} differs from pyproject.toml's pin")
            i += 1
    assert via_pyproject
    # The requirement files are written from pyproject.toml by the helper the builder copies.
    text = dockerfile.path.read_text()
    assert "requirements.py pyproject.toml > requirements.txt" in text
    assert "requirements.py pyproject.toml --only torch > torch.txt" in text
    # Any version written literally in a Dockerfile (e.g. torch==X) is pyproject's.
    for name, version in re.findall(r"([A-Za-z0-9_.-]+)==([0-9][A-Za-z0-9.+!_-]*)", text):
        assert pins.get(normalize(name)) == version, f"{name}=={version} differs from pyproject"


def test_requirements_helper_prints_pyprojects_pins(tmp_path):
    helper = DOCKER_DIR / "requirements.py"
    run = lambda *a: subprocess.run([sys.executable, str(helper), *a], capture_output=True,  # noqa: E731
                                    text=True)
    everything = run(str(REPO / "pyproject.toml"))
    assert everything.returncode == 0, everything.stderr
    assert everything.stdout.split() == [d.replace(" ", "")
                                         for d in PYPROJECT["project"]["dependencies"]]
    torch = run(str(REPO / "pyproject.toml"), "--only", "torch")
    assert torch.stdout.split() == [f"torch=={pyproject_pins()['torch']}"]
    # A loose pin stops the build instead of floating.
    loose = tmp_path / "pyproject.toml"
    loose.write_text('[project]\ndependencies = ["torch==2.13.0", "numpy>=2"]\n')
    failed = run(str(loose))
    assert failed.returncode != 0 and "numpy>=2" in failed.stderr


def test_exposes_the_settings_default_ports(dockerfile):
    exposed = [int(p.split("/")[0]) for i in dockerfile.runtime.all("EXPOSE") for p in i.args.split()]
    fields = settings_class(dockerfile.service).model_fields
    expected = [fields["port"].default]
    if "http_port" in fields:
        expected.append(fields["http_port"].default)
    assert sorted(exposed) == sorted(expected)


def test_environment_is_container_ready_and_names_real_settings(dockerfile):
    env = dockerfile.runtime.env()
    prefix = f"CITEWEAVE_{dockerfile.service.upper()}_"
    assert env[f"{prefix}HOST"] == "0.0.0.0"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["HF_HUB_OFFLINE"] == "1"
    cls = settings_class(dockerfile.service)
    for key, value in env.items():
        if key.startswith("CITEWEAVE_") and key != "CITEWEAVE_CACHE_DIR":
            assert key.startswith(prefix), f"{key}: another service's setting"
            name = key.removeprefix(prefix).lower()
            assert name in cls.model_fields, f"{key} is no setting of {cls.__name__}"
    # The image's settings are valid as a whole (validators run; no file-system checks trip).
    settings = {k.removeprefix(prefix).lower(): v for k, v in env.items() if k.startswith(prefix)}
    cls(**settings)
    # Whatever the service writes goes to a volume path, set explicitly (defaults are relative to
    # the working directory or under ~, both on the read-only root file system).
    for name in WRITABLE_SETTINGS.get(dockerfile.service, []):
        value = env.get(prefix + name.upper())
        assert value and value.startswith(STATE_ROOT), f"{prefix}{name.upper()} = {value!r}"


def test_embedder_model_is_baked_read_only(embedder_dockerfile):
    dockerfile = embedder_dockerfile
    env = dockerfile.runtime.env()
    cache = env["CITEWEAVE_CACHE_DIR"]
    assert env["CITEWEAVE_EMBEDDER_CACHE_DIR"] == cache
    assert not cache.startswith(STATE_ROOT), "the model is image content, not a volume"
    model_copies = [(f, s, d) for f, s, d in copies(dockerfile.runtime) if f.get("from") == "model"]
    assert [(s, d) for _, s, d in model_copies] == [([cache], cache)]
    model = next(s for s in dockerfile.stages if s.name == "model")
    assert model.env()["CITEWEAVE_CACHE_DIR"] == cache
    commands = [" ".join(c) for c in run_commands(model)]
    assert "python -m services.embedder.models install" in commands
    if env.get("CITEWEAVE_EMBEDDER_BACKEND") != "torch":
        # ONNX backends read the export from the read-only cache: every one must be built.
        assert "python -m services.embedder.models export --model all-mpnet-base-v2 --int8" in commands
        assert "python -m services.embedder.models export --model all-MiniLM-L6-v2" in commands


def _local_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("services"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("services")}
    return names


def test_model_stage_copies_every_module_it_runs(embedder_dockerfile):
    """The model stage copies a few files (so code changes elsewhere keep its layer cached): they
    must include every services module the install and export commands import."""
    dockerfile = embedder_dockerfile
    model = next(s for s in dockerfile.stages if s.name == "model")
    copied = {src for flags, sources, _ in copies(model) if "from" not in flags for src in sources}
    assert "pyproject.toml" in copied  # the model's part list
    todo = ["services.embedder.models"]
    if any("export" in c for c in run_commands(model)):
        todo.append("services.embedder.onnx_export")
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        spec = importlib.util.find_spec(module)
        path = Path(spec.origin).relative_to(REPO).as_posix()
        assert path in copied, f"the model stage runs {module} but does not copy {path}"
        parts = module.split(".")
        for n in range(1, len(parts)):  # the packages on the way
            init = "/".join(parts[:n]) + "/__init__.py"
            assert init in copied, f"the model stage does not copy {init}"
        todo.extend(_local_imports(REPO / path))
