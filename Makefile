# Set-up and everyday commands. `make demo` and `make test` bootstrap everything from a clean clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
PLUGINS := $(sort $(wildcard plugins/streaming-*))
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed

.PHONY: setup demo test test-fast lint docs compat bench clean

setup: $(STAMP) $(NODE_STAMP)

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml) requirements-dev.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt torch==2.13.0
	$(PIP) install -q -c constraints.txt -r requirements-dev.txt
	$(PIP) install -q -c constraints.txt -e . $(addprefix -e ,$(PLUGINS))
	touch $@

$(NODE_STAMP): package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

demo: $(STAMP)
	$(PY) examples/demo.py

test: setup
	./compat/setup.sh
	$(PY) -m ruff check .
	CI=$${CI:-true} $(PY) -m pytest -q
	$(MAKE) compat

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(PY) -m ruff check .

docs: $(STAMP)
	$(PY) -m mkdocs build --strict --quiet --site-dir site

compat: $(STAMP)
	./compat/run.sh

bench: $(STAMP)
	./compat/setup.sh --bench
	$(PY) -m benchmarks.run

clean:
	rm -rf $(VENV) .venv-ref node_modules site .pytest_cache
