# The two commands of the README: `make demo` (the demo benchmark) and `make test` (the test suite).
# Both set up everything first: the virtual environment, a Docker engine, the kernel image (and for
# `make test` a headless Chromium for the HTML report's browser tests, scripts/ensure-chromium.sh).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JOBS ?= 2

.PHONY: venv docker chromium image demo test lint bench cleanup

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

docker:
	@scripts/ensure-docker.sh

chromium:
	@scripts/ensure-chromium.sh

image: venv docker
	$(BIN)/pytest-super image build

demo: image
	mkdir -p reports
	@$(BIN)/pytest tasks --super-agent=gold -n $(JOBS) --dist worksteal --junitxml=reports/junit.xml -q; \
		status=$$?; echo "HTML report: $$(ls -td reports/*/index.html | head -1)"; exit $$status

test: image chromium
	$(BIN)/pytest tests -n $(JOBS) -q -ra

lint: venv
	$(BIN)/ruff check pytest_super tests benchmarks conftest.py
	$(BIN)/ruff format --check pytest_super tests benchmarks conftest.py

bench: image
	$(BIN)/python benchmarks/bench_kernel.py
	$(BIN)/python benchmarks/bench_local_kernel.py
	$(BIN)/python benchmarks/bench_throughput.py

cleanup: venv
	$(BIN)/pytest-super cleanup
