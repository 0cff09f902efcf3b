# Two commands set everything up on a fresh machine: `make run` and `make test`.
# `make test` runs every test (CI: .ci/run); `make test-fast` leaves out those marked slow (whole runs,
# processes, Ray, a browser, and a few reference checks of several seconds), for a quick check while changing code.
# Both run the test files on TEST_WORKERS processes (pytest-xdist, a file's tests in one process; TEST_WORKERS=0:
# in this process), each limited to one thread by tests/conftest.py.
PY ?= python3
TEST_WORKERS ?= 2
VENV := .venv
BIN := $(VENV)/bin
SCENARIO ?= quickstart

.PHONY: run test test-fast install install-dev system-deps clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	$(BIN)/edgefl run $(SCENARIO)

# Debian packages some tests use: the real Fashion-MNIST files and a headless browser for the report.
# Installed where apt works (as root); elsewhere those tests skip with a message saying how to get them.
APT_PACKAGES := dataset-fashion-mnist chromium
system-deps:
	@if [ -d /usr/share/datasets/fashion-mnist ] && command -v chromium >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing $(APT_PACKAGES) with apt-get"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES)) >/dev/null 2>&1 \
			|| echo "note: apt-get could not install $(APT_PACKAGES); the tests that need them will be skipped"; \
	else \
		echo "note: no root apt-get here; tests needing $(APT_PACKAGES) will be skipped"; \
	fi

test: install-dev system-deps
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

test-fast: install-dev
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile -m "not slow"

clean:
	rm -rf $(VENV) runs build *.egg-info
