# The two commands of the README: `make demo` (the demo benchmark) and `make test` (the test suite).
# Both set up everything first: the virtual environment, a Docker engine, the kernel image (and for
# `make test` a headless Chromium for the HTML report's browser tests, scripts/ensure-chromium.sh).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JOBS ?= 2
UV_VERSION := 0.13.9

# Python writes its bytecode, and pytest its rewritten test modules, to __pycache__ (ignored by
# git) even where PYTHONDONTWRITEBYTECODE is set (these machines set it): without that cache every
# pytest process of the suite (its two workers, each run a test starts) rewrote and compiled the
# package and the tests again: collecting `make test`'s tests took 17.7 s, and 4.2 s with the
# cache (issue 42).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv docker chromium image image-colab image-colab-lock demo test test-all test-colab test-cluster-guide lint bench cleanup

# uv installs the same packages as pip (their `pip freeze` compared equal) in 24 s instead of 70 s
# on 2 cores: a fresh clone's `make test` includes this step (issue 42's 20 minutes). Compiled to
# bytecode here, as pip does: where PYTHONDONTWRITEBYTECODE is set (these machines set it), a
# process run outside this Makefile never writes it, and would compile what it imports again
# (uncompiled, a whole `make test` took 22:10 instead of 20:01).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(BIN)/uv pip install --quiet --compile-bytecode --upgrade-package pip -e '.[dev]' pip
	touch $@

venv: $(VENV)/.installed

docker:
	@scripts/ensure-docker.sh

chromium:
	@scripts/ensure-chromium.sh

image: venv docker
	$(BIN)/pytest-super image build

# SUPER's reference environment (docs/environment.md): built FROM the default image, cached by
# the hash of its inputs like it; a few minutes from scratch, a second when it exists.
image-colab: image
	$(BIN)/pytest-super image build --profile colab

# Resolve the colab profile again into pytest_super/kernels/docker/image_context/colab.lock (commit the result).
image-colab-lock: venv
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/pytest-super image lock

demo: image
	mkdir -p reports
	@$(BIN)/pytest tasks --super-agent=gold -n $(JOBS) --dist worksteal --junitxml=reports/junit.xml -q; \
		status=$$?; echo "HTML report: $$(ls -td reports/*/index.html | head -1)"; exit $$status

# A test still running after 15 minutes is stopped with every thread's stack printed (pytest-timeout's
# thread method: a hang in C code, which no signal handler reaches, included). That method ends its
# worker, and xdist 3.8's loadgroup can deadlock at the end of the run after replacing a crashed
# worker (pytest-dev/pytest-xdist#1378), so no worker is replaced: the crash is reported as the
# test's failure ("worker 'gwN' crashed while running ...") and the run ends instead of hanging.
TEST_TIMEOUT := --timeout=900 --timeout-method=thread --max-worker-restart 0

# The two groups (docs/testing.md): `make test` is what a change to the core can break (about 20
# minutes on 2 cores); `make test-all` adds the long suites (tests/conftest.py marks them `long`:
# cluster faults, attacks, the registry, conformance on every backend, image builds). Both print
# their 25 slowest tests and write reports/tests-junit.xml (scripts/test-times.py: time per group).
TEST_RUN := $(BIN)/pytest tests -n $(JOBS) --dist loadgroup -q -ra --durations=25 $(TEST_TIMEOUT) \
  --junitxml=reports/tests-junit.xml

test: image chromium
	$(TEST_RUN) -m "not colab and not guide and not long"

test-all: image chromium
	@scripts/ensure-registry.sh
	$(TEST_RUN) -m "not colab and not guide"

# docs/cluster.md's guide end to end (scripts/cluster-guide.sh: wheels, a head and a worker in a
# private network namespace, an upgrade, a scoped stop): minutes, so `make test` runs only the
# checks that the guide's commands are the script's.
test-cluster-guide: image
	$(BIN)/pytest tests/test_cluster_guide.py -q -ra -m guide $(TEST_TIMEOUT)

# The tests that need SUPER's reference image (a real training run in it): its build takes minutes
# that grow with load and link speed (docs/environment.md), so `make test` leaves them out.
test-colab: image-colab
	$(BIN)/pytest tests -n $(JOBS) -q -ra -m colab $(TEST_TIMEOUT)

lint: venv
	$(BIN)/ruff check pytest_super tests benchmarks conftest.py
	$(BIN)/ruff format --check pytest_super tests benchmarks conftest.py
	$(BIN)/mypy

bench: image
	$(BIN)/python benchmarks/bench_kernel.py
	$(BIN)/python benchmarks/bench_local_kernel.py
	$(BIN)/python benchmarks/bench_throughput.py
	$(BIN)/python benchmarks/bench_replay.py

cleanup: venv
	$(BIN)/pytest-super cleanup
