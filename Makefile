# prover-assets: `make demo` (the whole loop on CPU) and `make test` (the CPU test suite) do
# all the set-up from a fresh clone. `make ui` serves the asset graph on 127.0.0.1.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= configs/demo.yaml
HOST ?= 127.0.0.1
PORT ?= 3000
PYTEST_ARGS ?=
# Two test processes on 2 cores (pytest-xdist): each module, or each group of modules sharing a
# daemon, runs whole in one of them, the slowest groups first (prover_assets_tests/conftest.py,
# `pytest_xdist_make_scheduler`); torch in each takes its share of the cores.
TEST_WORKERS ?= 2
DURATIONS ?= 25
PYTEST := $(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=$(DURATIONS)
export DAGSTER_HOME := $(CURDIR)/.dagster_home

.PHONY: install test test-fast demo-tunings demo demo-null demo-iterations ui lint benchmarks mutation clean-demo lean-workspace preflight

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned to the CPU wheel on disk: a bare `torch` requirement on a machine without
# torch would pull a multi-GB CUDA build. A GPU environment keeps the torch it already has.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The instance's SQLite storage is created here, once: a daemon and a `dagster job launch`
# creating it at the same moment can race.
$(DAGSTER_HOME)/dagster.yaml: dagster.yaml | install
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@
	$(BIN)/python -c "import dagster; dagster.DagsterInstance.get().dispose()"

test: install
	$(PYTEST) $(PYTEST_ARGS)

# Everything but the slow integration tests (the demo loop, the daemon, the browser, the kill -9
# trials of whole processes).
test-fast: install
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

# The format tunings the tests start from (prover_assets_tests/data/demo-tunings/), made by the
# product's own tuning: run it when test_demo says they are stale. About 10 minutes.
demo-tunings: install
	PYTHONPATH=$(CURDIR) $(BIN)/python scripts/demo_tunings.py

# The registered Lean workspace (toolchain, Mathlib and the REPL at the pins, the REPL built,
# the pins read back, the self-test), where configs/p2.yaml's lean workspace points, or in
# WORKSPACE=<dir>. Resumable: a rerun skips what is done.
LEAN_CONFIG ?= configs/p2.yaml
lean-workspace: install
	$(BIN)/python -m prover_assets.lean.workspace --config $(LEAN_CONFIG) $(if $(WORKSPACE),--workspace $(WORKSPACE))

# Every check a round needs (config, model, Lean, memory, GPUs, prompt, a smoke round, disk), in
# minutes: heavy jobs refuse to launch without a passing one for the same config, pins and code.
preflight: install $(DAGSTER_HOME)/dagster.yaml
	PROVER_ASSETS_CONFIG=$(CONFIG) $(BIN)/python -m prover_assets.launch_preflight

demo: install $(DAGSTER_HOME)/dagster.yaml
	PROVER_ASSETS_CONFIG=configs/demo.yaml $(BIN)/python -m prover_assets.demo

# The null control: the same loop with acceptance independent of content, in an instance of its
# own (its assets have the demo's keys); `make ui CONFIG=configs/demo-null.yaml
# DAGSTER_HOME=$(CURDIR)/.dagster_home/null` shows it.
demo-null: install
	mkdir -p $(DAGSTER_HOME)/null
	cp dagster.yaml $(DAGSTER_HOME)/null/dagster.yaml
	DAGSTER_HOME=$(DAGSTER_HOME)/null PROVER_ASSETS_CONFIG=configs/demo-null.yaml \
		$(BIN)/python -m prover_assets.demo

# Expert iteration: 2 iterations x 2 training seeds of the positive control, in an instance of
# its own (its per-iteration assets are partitioned); `make ui CONFIG=configs/demo-iterations.yaml
# DAGSTER_HOME=$(CURDIR)/.dagster_home/iterations` shows it.
demo-iterations: install
	mkdir -p $(DAGSTER_HOME)/iterations
	cp dagster.yaml $(DAGSTER_HOME)/iterations/dagster.yaml
	DAGSTER_HOME=$(DAGSTER_HOME)/iterations PROVER_ASSETS_CONFIG=configs/demo-iterations.yaml \
		$(BIN)/python -m prover_assets.demo

ui: install $(DAGSTER_HOME)/dagster.yaml
	PROVER_ASSETS_CONFIG=$(CONFIG) $(BIN)/dagster dev -h $(HOST) -p $(PORT) -w workspace.yaml

lint: install
	$(BIN)/ruff check prover_assets prover_assets_tests benchmarks scripts
	$(BIN)/ruff format --check prover_assets prover_assets_tests benchmarks scripts

benchmarks: install
	for b in benchmarks/bench_*.py; do PYTHONPATH=$(CURDIR) $(BIN)/python $$b || exit 1; done

# Not part of `make test`: about 25 minutes on 2 cores for nine modules, 12 for the REPL
# worker, 25 for the REPL process module. Kill rates per module, >= 90 % each, every survivor
# explained beside its module (scripts/mutation.py).
mutation: install
	$(BIN)/pip install mutmut==3.8.1
	$(BIN)/python scripts/mutation.py

clean-demo:
	rm -rf .prover_data/demo .prover_data/demo-null .prover_data/demo-iterations .prover_data/demo-tunings
