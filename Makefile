# The two README commands. Each runs infra/setup.sh first (idempotent, fast when done).
SHELL := /bin/bash
VENV := .venv/bin

.PHONY: help setup demo test bench airflow lock
help: ## list targets
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup: ## create .venv, install pinned deps, fetch Delta jars
	@bash infra/setup.sh

demo: setup ## run the whole loop once on the sample app and print where everything is
	@$(VENV)/streamplan demo

test: setup ## run the whole test suite (what .ci/run calls)
	@$(VENV)/python -m pytest -m "not bench" $(PYTEST_ARGS)

bench: setup ## run the benchmarks; figures go to benchmarks/results/*.json
	@$(VENV)/python -m pytest -m bench benchmarks $(PYTEST_ARGS)

airflow: setup ## run Airflow locally (api-server, scheduler, dag-processor) on 127.0.0.1:8080
	@$(VENV)/python -m infra.airflow.local up

lock: ## regenerate infra/requirements.lock from the current .venv
	@$(VENV)/pip freeze --exclude-editable | grep -v '^streamplan' > infra/requirements.lock
