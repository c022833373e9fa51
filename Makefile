# gpucap: two commands. `make demo` runs the daemon against simulated clouds; `make test` runs
# the whole suite. Both create .venv when it is missing and install pinned versions
# (constraints.txt) into it.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test install install-dev proto lint typecheck clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[all]'
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/gpucap daemon --demo

test: install-dev
	$(BIN)/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

# Regenerate schema/gen from schema/proto (tests fail when the committed copy is stale).
proto: install-dev
	$(BIN)/python -m schema.codegen

lint: install-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

typecheck: install-dev
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
