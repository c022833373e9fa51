# gpucap: two commands. `make demo` runs the daemon against simulated clouds; `make test` runs
# the whole suite. Both create .venv when it is missing and install pinned versions
# (constraints.txt) into it.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test install install-dev proto lint typecheck breaking clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The first install takes minutes: pip's own progress shows it (no --quiet).
$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	@echo "installing gpucap, the three cloud SDKs and the simulator into $(VENV) (first run only)"
	$(BIN)/python -m pip install --progress-bar on -c constraints.txt -e '.[all,sim]'
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml constraints.txt
	@echo "installing gpucap with its test and development tools into $(VENV)"
	$(BIN)/python -m pip install --progress-bar on -c constraints.txt -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/gpucap daemon --demo

# scripts/with-test-services starts PostgreSQL (a throwaway one when none answers) and
# installs the Debian tools the tests run (Prometheus, cloud-init, shellcheck, systemd) when
# missing, saying each in one line.
test: install-dev
	scripts/with-test-services $(BIN)/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

# Regenerate schema/gen from schema/proto (tests fail when the committed copy is stale).
proto: install-dev
	$(BIN)/python -m schema.codegen

lint: install-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

typecheck: install-dev
	$(BIN)/mypy

# buf lint and buf breaking on the gRPC contract, against main (scripts/proto-breaking). buf
# comes from the npm registry (its package carries the binary), pinned, into the venv.
BUF_VERSION = 1.75.0
BUF = $(VENV)/buf-$(BUF_VERSION)/node_modules/.bin/buf
$(BUF):
	npm install --silent --no-save --no-audit --no-fund --prefix $(VENV)/buf-$(BUF_VERSION) @bufbuild/buf@$(BUF_VERSION)

breaking: $(BUF)
	scripts/proto-breaking $(BUF)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
