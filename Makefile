# Two commands matter: `make run` (the main job) and `make test` (every check).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast lint typecheck pytest bench docs clean

# pytest runs in PYTEST_WORKERS processes (pytest-xdist). Many tests wait on subprocesses and
# servers, so more workers than cores pay; each worker costs its imports, its collection and
# its fork server (a whole run on 2 cores: 4 workers 485 s of CPU and 406 s of wall, 5 workers
# 529 s and 416 s). --dist loadgroup keeps each xdist_group on one worker
# (tests/conftest.py marks them): every Ray test shares one cluster, and a module with a
# module-scoped server or browser starts it once. Python may write bytecode (also rewritten
# test modules): every worker and subprocess reuses it.
PYTEST_WORKERS ?= 4
# More pytest options for one run, e.g. make pytest PYTEST_ARGS=--durations=20
PYTEST_ARGS ?=
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)
# The fast set (make test-fast, under a minute): the unit tests of the lower layers.
FAST_TESTS ?= tests/core tests/stores tests/governance tests/test_architecture.py

# No --compile-bytecode: it compiles all 19,000 modules of the dependencies (20 s of CPU, most
# of a fresh install's), where a fresh `make test` imports about 2,500 of them, each compiled
# once on its first import (about 4 s) and written for every later process (see PYTEST).
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python -m toolcards.demo

lint: install
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: install
	$(BIN)/mypy --strict src/toolcards

# In a checkout without assertion-rewritten test modules in __pycache__ (a fresh clone), one
# collection writes them first; each xdist worker then loads them instead of rewriting every
# module itself (about 4 s of CPU per worker). A collection error shows in the run after it.
pytest: install
	find tests -name '*-pytest-*.pyc' -print -quit | grep -q . \
		|| PYTHONDONTWRITEBYTECODE= $(BIN)/pytest --collect-only -q > /dev/null 2>&1 || true
	COVERAGE_CORE=sysmon $(PYTEST)

test-fast: install
	$(PYTEST) -m 'not slow' $(FAST_TESTS)

# The checks run side by side (pytest leaves a core idle part of the time: tests waiting on
# servers and timeouts); their output interleaves as it comes, so a hang shows where it is.
test: install
	$(MAKE) --no-print-directory -j4 lint typecheck docs pytest

bench: install
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q

clean:
	rm -rf $(VENV) $(FLOOR_VENV) site .mypy_cache .ruff_cache

# Regenerate the dashboard screenshots in docs/img (the browser tests take them).
.PHONY: screenshots
screenshots: install
	TOOLCARDS_SCREENSHOTS=docs/img $(BIN)/pytest tests/dashboard/test_browser.py -q

conformance: install
	$(BIN)/python tests/surfaces/conformance/run.py --transport http
	$(BIN)/python tests/surfaces/conformance/run.py --transport stdio

# The suite on the lowest versions pyproject.toml allows (uv's lowest-direct resolution: every
# direct dependency at its declared floor), in a fresh .venv-floor. It proves the floors true.
FLOOR_VENV := .venv-floor
FLOOR_PYTEST_ARGS ?= -n 4 --dist loadgroup
.PHONY: test-floor
test-floor:
	rm -rf $(FLOOR_VENV)
	$(PY) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install -q --disable-pip-version-check uv
	$(FLOOR_VENV)/bin/uv pip install -q --compile-bytecode --python $(FLOOR_VENV)/bin/python \
		--resolution lowest-direct -e '.[all,dev]'
	env -u PYTHONPATH PYTHONDONTWRITEBYTECODE= COVERAGE_CORE=sysmon \
		$(FLOOR_VENV)/bin/pytest $(FLOOR_PYTEST_ARGS)
