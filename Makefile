# Two commands do all the set-up on a fresh machine with Python 3.11+:
#   make demo   — builds .venv, starts the embedded stack and runs the demo
#   make test   — builds .venv and runs the whole test suite on the embedded stack
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck check schemas bench bench-formats bench-dense bench-purge bench-growth bench-emission bench-throughput eval-readpath eval-packs eval-facts clean up docs

$(STAMP): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e clients/python -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/govindex demo

up: $(STAMP)
	$(BIN)/govindex up

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check services tests bench clients deploy docs/hooks
	$(BIN)/ruff format --check services tests bench clients deploy docs/hooks
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site (docs/, mkdocs.yml), strict: a broken link or anchor fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -d build/docs

check: lint typecheck test

# Benchmarks compare against other libraries, installed here only (never a runtime dependency).
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet langchain-text-splitters
	$(BIN)/python bench/chunking.py

# Extraction and code parsing per format, against markitdown (docs/benchmarks/formats.md).
bench-formats: $(STAMP)
	$(BIN)/python -m pip install --quiet 'markitdown[pdf,docx,pptx,xlsx]'
	$(BIN)/python bench/formats.py

bench-purge: $(STAMP)
	$(BIN)/python bench/purge_latency.py

bench-growth: $(STAMP)
	$(BIN)/python bench/growth.py

bench-throughput: $(STAMP)
	$(BIN)/python bench/throughput.py

bench-emission: $(STAMP)
	$(BIN)/python bench/emission.py

# Dense retrieval on pgvector against the in-process ranking (docs/benchmarks/dense.md).
bench-dense: $(STAMP)
	$(BIN)/python bench/dense.py

eval-readpath: $(STAMP)
	$(BIN)/python bench/eval_readpath.py

# Pack quality on a labelled incident-investigation corpus (docs/benchmarks/packs.md).
eval-packs: $(STAMP)
	$(BIN)/python bench/eval_packs.py

# Facts at a time on a labelled catalog, ownership and deployment history (docs/benchmarks/facts.md).
eval-facts: $(STAMP)
	$(BIN)/python bench/eval_facts.py

schemas: $(STAMP)
	$(BIN)/govindex schemas --write

clean:
	# As root the embedded PostgreSQL keeps its data outside the state dir (see README).
	if [ -f .govindex/postgres.location ]; then rm -rf "$$(dirname "$$(cat .govindex/postgres.location)")"; fi
	rm -rf $(VENV) .govindex .pytest_cache .mypy_cache .ruff_cache
