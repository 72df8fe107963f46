# Set-up and everyday commands. `make demo` and `make test` bootstrap everything from a clean clone.
#
# One virtualenv (.venv), two layers, each with its own stamp:
#   runtime  (.venv/.runtime-installed): torch (pinned CPU wheel), the core and every plugin under plugins/ (editable),
#            and what examples/demo.py itself needs (requirements-demo.txt). `make demo` builds only this layer.
#   full     (.venv/.installed): the runtime layer plus requirements-dev.txt (pytest, servers, pyspark, docs tools...).
#            `make test` and the other developer targets build it on top of the runtime layer.
# The full layer is a superset, so `make demo` after `make test` installs nothing, and `make test` after `make demo`
# only adds the dev set. Every install goes through constraints.txt (it pins torch==2.13.0). pip installs torch (it
# takes the local CPU wheel, which uv does not look for) and uv; uv installs the rest (the same packages, resolved
# against the torch already installed, in a minute where pip takes three). uv does not compile the modules it
# installs (that would take most of that minute): the first process that imports one writes its .pyc, so the targets
# here never pass PYTHONDONTWRITEBYTECODE on (where it is set, every process would compile those modules again).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
UV := $(VENV)/bin/uv pip install --python $(PY) --quiet
unexport PYTHONDONTWRITEBYTECODE
PLUGINS := $(sort $(wildcard plugins/streaming-*))
RUNTIME_STAMP := $(VENV)/.runtime-installed
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
# `make test` runs pytest in TEST_WORKERS worker processes (pytest-xdist, each test file whole on one worker; 2 by
# default, 0 for one serial run; the longest files first, see conftest.py). The tests marked `compat` run the reference (mosaicml-streaming 0.13): under xdist
# they get a serial pass of their own (its two-worker DataLoader hangs inside an xdist worker).
TEST_WORKERS ?= 2
PYTEST_WORKERS := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# That serial pass runs compat/tests/ (`make compat`'s tests) and the files under tests/ and plugins/ that mark tests
# `compat`, in one session: collecting the whole suite only to deselect all but a few tests took 16 s of it.
COMPAT_FILES = $(shell grep -rl --include='*.py' 'mark\.compat' tests plugins)

.PHONY: setup reference test-setup runtime demo test test-fast lint docs compat bench clean

setup: $(STAMP) $(NODE_STAMP)

runtime: $(RUNTIME_STAMP)

# The core and every plugin are built in one environment (.venv, with the setuptools installed first), not in one
# isolated build environment per package: the same editable installs, a minute sooner.
$(RUNTIME_STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml) requirements-demo.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt torch==2.13.0 'setuptools>=68' uv
	$(UV) -c constraints.txt --no-build-isolation -r requirements-demo.txt -e . $(addprefix -e ,$(PLUGINS))
	touch $@

$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt constraints.txt
	$(UV) -c constraints.txt -r requirements-dev.txt
	touch $@

$(NODE_STAMP): package.json
	@command -v npm >/dev/null || { echo 'make: npm (Node.js >= 18) is needed to install Azurite, the Azure storage emulator the tests start; install Node.js, then run make again.' >&2; exit 1; }
	npm install --no-audit --no-fund --loglevel=error
	touch $@

demo: $(RUNTIME_STAMP)
	$(PY) examples/demo.py

# The reference's side-virtualenv (.venv-ref, with litdata and webdataset for the tests that write their datasets).
reference:
	./compat/setup.sh --bench

# Everything the tests need, the three independent installs side by side (a fresh clone's set-up, a minute sooner).
test-setup:
	$(MAKE) -j 3 --no-print-directory setup reference

test: test-setup
	$(PY) -m ruff check .
ifeq ($(TEST_WORKERS),0)
	CI=$${CI:-true} $(PY) -m pytest -q
	$(MAKE) compat
else
	CI=$${CI:-true} $(PY) -m pytest -q --durations=25 $(PYTEST_WORKERS) -m "not compat"
	CI=$${CI:-true} $(PY) -m pytest -q --durations=10 -m compat compat/tests $(COMPAT_FILES)
endif

test-fast: setup
	$(PY) -m pytest -q -m "not slow and not compat" $(PYTEST_WORKERS)

lint: $(STAMP)
	$(PY) -m ruff check .

docs: $(STAMP)
	$(PY) -m mkdocs build --strict --quiet --site-dir site

compat: $(STAMP)
	./compat/run.sh

bench: $(STAMP)
	./compat/setup.sh --bench
	./benchmarks/setup_hf_venv.sh
	$(PY) -m benchmarks.run

clean:
	rm -rf $(VENV) .venv-ref .venv-hf node_modules site .pytest_cache demo-output
