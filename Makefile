# `make demo` and `make test` set everything up on a fresh machine (Python >= 3.11 with venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test test-all vignettes benchmarks studies lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.core-installed

## demo: install the package and run the main job (NSW trial + CPS external controls)
demo: $(VENV)/.core-installed
	MPLBACKEND=Agg $(BIN)/causalkit demo --out demo_output

## test: install the package with [dev] and run the test suite (slow studies excluded)
test: $(VENV)/.dev-installed
	MPLBACKEND=Agg $(BIN)/python -m pytest $(PYTEST_ARGS)

## test-all: the test suite including the study-sized (slow) tests
test-all: $(VENV)/.dev-installed
	MPLBACKEND=Agg $(BIN)/python -m pytest --runslow $(PYTEST_ARGS)

## vignettes: execute every vignette and render it to vignettes/html/
vignettes: $(VENV)/.dev-installed
	MPLBACKEND=Agg $(BIN)/python vignettes/render.py

## benchmarks: run every speed benchmark script
benchmarks: $(VENV)/.dev-installed
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check causalkit tests

clean:
	rm -rf $(VENV) demo_output results .pytest_cache
