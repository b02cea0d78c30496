# `make demo` and `make test` set everything up on a fresh machine (Python >= 3.11 with venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: demo test test-all smoke docs vignettes benchmarks studies lint clean

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

# two pytest-xdist workers, each test file on one worker (its module fixtures are built once);
# override with e.g. PYTEST_XDIST="-n 8" or PYTEST_XDIST="-n 0" (one process)
PYTEST_XDIST ?= -n 2 --dist loadfile

## test: install the package with [dev] and run the test suite (slow studies excluded)
test: $(VENV)/.dev-installed
	MPLBACKEND=Agg $(BIN)/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

## test-all: the test suite including the study-sized (slow) tests
test-all: $(VENV)/.dev-installed
	MPLBACKEND=Agg $(BIN)/python -m pytest --runslow $(PYTEST_XDIST) $(PYTEST_ARGS)

## smoke: build the sdist and wheel, install the wheel into a fresh venv, run demo + loaders
smoke: $(VENV)/.dev-installed
	bash tools/smoke_wheel.sh $(BIN)/python

## docs: build the API reference offline (warnings and unresolved references are errors), check links
docs: $(VENV)/.dev-installed
	$(BIN)/python -m sphinx -W --keep-going -n -q -b html docs docs/_build/html
	$(BIN)/python tools/check_links.py docs/_build/html

## vignettes: execute every vignette and render it to vignettes/html/
vignettes: $(VENV)/.dev-installed
	$(BIN)/python vignettes/render.py

## benchmarks: run every speed benchmark script
benchmarks: $(VENV)/.dev-installed
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check causalkit tests

clean:
	rm -rf $(VENV) demo_output results .pytest_cache docs/_build docs/generated
