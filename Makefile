# citeweave — local commands. Every target installs what it needs first.
VENV ?= .venv
PY := $(VENV)/bin/python
BOOTSTRAP_PYTHON ?= python3
# The one pinned torch line of pyproject.toml, installed first so the local CPU wheel is used.
TORCH_PIN := $(shell grep -o '"torch==[^"]*"' pyproject.toml | tr -d '"')

.PHONY: install install-llm install-browser demo test bench protos up clean-store

install: $(VENV)/.installed
	@$(PY) -m services.embedder.models install
	@# The ONNX exports are cached under ~/.cache/citeweave/onnx; both calls return at once when done.
	@$(PY) -m services.embedder.models export --model all-mpnet-base-v2
	@$(PY) -m services.embedder.models export --model all-MiniLM-L6-v2

# The local OpenAI-compatible LLM (llama-cpp-python server + Qwen2.5-Coder-0.5B-Instruct GGUF). The
# first run builds llama-cpp-python from source (8-12 min on 2 cores); the wheel and the model are
# then cached under ~/.cache/citeweave/{wheels,models} and later runs return at once.
install-llm: install
	@$(PY) -m services.generator.local_llm install

# The browser test of the web page: Debian's Chromium (installed with apt when running as root, as
# CI does; otherwise the command to run is printed) and playwright-core from npm (pinned in
# tests/browser/package-lock.json). Both return at once when present.
install-browser:
	@test -x /usr/bin/chromium || { if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "the browser test needs Chromium: sudo apt-get install chromium"; fi; }
	@test -d tests/browser/node_modules/playwright-core || npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(BOOTSTRAP_PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: install
	$(VENV)/bin/citeweave demo

up: install
	$(VENV)/bin/citeweave up

test: install install-llm install-browser
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

# Every benchmark (each `citeweave bench NAME --json`), then docs/bench/latest.json, the plots in
# docs/img/ and the generated section of docs/performance.md. ~30 min on 2 cores. Options go in
# BENCH_ARGS, e.g. the 1M-vector point (~35 min on its own, kept by later runs):
#   make bench BENCH_ARGS="--only retriever --stores server --sizes 1M"
BENCH_ARGS ?=
bench: install
	$(VENV)/bin/citeweave bench all --json $(BENCH_ARGS)

protos: $(VENV)/.installed
	$(PY) scripts/gen_protos.py

clean-store:
	rm -rf var/store
