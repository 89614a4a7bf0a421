# Every target sets up .venv itself, so each works as the only command on a fresh clone. .venv holds
# kai-scheduler and, for the tests and for trying live mode, the fake API server (fakeapi/, a distribution
# of its own that the product's wheel and image do not carry), both editable.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml fakeapi/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' -e ./fakeapi
	touch $(STAMP)

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(BIN)/kai-scheduler simulate

test: $(STAMP)
	$(BIN)/python -m pytest -rs

# SCALE_ARGS: options of benchmarks/scale.py, e.g. SCALE_ARGS=--quick; FRAGMENTATION_ARGS: options of
# benchmarks/fragmentation.py, e.g. FRAGMENTATION_ARGS=--quick (the full run replays 750 times);
# BACKFILL_ARGS: options of benchmarks/backfill.py, e.g. BACKFILL_ARGS=--quick (3 hours instead of 7).
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run.py && $(BIN)/python benchmarks/reclaim.py && $(BIN)/python benchmarks/topology.py
	$(BIN)/python benchmarks/dra.py
	$(BIN)/python benchmarks/admission_gating.py
	$(BIN)/python benchmarks/scale.py $(SCALE_ARGS)
	$(BIN)/python benchmarks/live.py
	$(BIN)/python benchmarks/failover.py
	$(BIN)/python benchmarks/backfill.py --write-doc $(BACKFILL_ARGS)
	$(BIN)/python benchmarks/report.py
	$(BIN)/python benchmarks/fragmentation.py $(FRAGMENTATION_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src fakeapi tests benchmarks
	$(BIN)/ruff format --check src fakeapi tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build src/*.egg-info fakeapi/build fakeapi/src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
