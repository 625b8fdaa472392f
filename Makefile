# Each target bootstraps .venv on first use (Python 3.11, torch==2.13.0 CPU, the rest from pyproject.toml)
# and is quick once it exists. Telemetry stays off everywhere.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_PIN := torch==2.13.0

export DVC_NO_ANALYTICS := 1
export GX_ANALYTICS_ENABLED := false
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING := false
export PREFECT_LOGGING_LEVEL ?= WARNING
# `make run` streams every stage's output (progress included) through Prefect's log at this level.
RUN_LOG_LEVEL ?= INFO

EVIDENCE_NAME ?= evidence-$(shell git rev-parse --short HEAD 2>/dev/null || echo run)

.PHONY: setup run evidence test test-fast bench ui serve lint imports clean up down

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH_PIN)
	$(BIN)/pip install --quiet -e '.[dev]' $(TORCH_PIN)
	@touch $(STAMP)

run: $(STAMP)  ## the whole pipeline on the embedded default (profile from params.yaml: demo)
	PREFECT_LOGGING_LEVEL=$(RUN_LOG_LEVEL) $(BIN)/mimesis run $(if $(PROFILE),--profile $(PROFILE)) $(if $(UNTIL),--until $(UNTIL))

# The claims at the largest scale two cores afford (README "Evidence"): profile `evidence` (params.yaml
# switched to it), MLflow experiment `mimesis-evidence`, stage runs tagged with the DVC experiment's name,
# the evidence summary written, then the workspace saved as that DVC experiment. Killed, it resumes: DVC
# skips the finished stages and the training stage in progress restarts from its last checkpoint.
evidence: $(STAMP)  ## make run at the evidence point (~2.4 h on 2 Intel cores, fifth run; README "Evidence"), saved as DVC experiment evidence-<commit>
	DVC_EXP_NAME=$(EVIDENCE_NAME) PREFECT_LOGGING_LEVEL=$(RUN_LOG_LEVEL) $(BIN)/mimesis run --profile evidence
	$(BIN)/python -m benchmarks.evidence
	$(BIN)/dvc exp save --force --name $(EVIDENCE_NAME) -m "make evidence at $$(git rev-parse --short HEAD)"

# One pytest-xdist worker per core, a test file per worker at a time (module fixtures stay whole: the
# e2e module's two retrains run on one worker while the other works through the rest).
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
test: $(STAMP)  ## the full test suite (unit + integration on tiny models + tiny e2e pipeline)
	@$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow and not integration and not e2e" $(PYTEST_ARGS)

bench: $(STAMP)  ## performance benchmarks, results in benchmarks/results/*.json
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

ui: $(STAMP)  ## the MLflow UI on http://127.0.0.1:5000
	$(BIN)/mlflow ui --backend-store-uri "$${MLFLOW_TRACKING_URI:-sqlite:///$(CURDIR)/mlflow.db}" --host 127.0.0.1 --port 5000

up: $(STAMP)  ## MLflow (:5000), Prefect (:4200) + pools mimesis/mimesis-gpu, prefect.yaml deployed, a worker; .servers/
	$(BIN)/mimesis infra up $(INFRA_ARGS)

down: $(STAMP)  ## stop what `make up` started
	$(BIN)/mimesis infra down $(INFRA_ARGS)

serve: $(STAMP)  ## the simulator HTTP API on http://127.0.0.1:8000
	$(BIN)/mimesis serve

lint: imports
	$(BIN)/ruff check src tasks flows tests benchmarks

imports: $(STAMP)  ## the layer and no-cycle contracts of pyproject.toml ([tool.importlinter])
	$(BIN)/lint-imports

clean:
	rm -rf .pytest_cache .ruff_cache .import_linter_cache
