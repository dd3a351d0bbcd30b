# Magnetar — `make help` lists the targets. `make run` and `make test` set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
PROTOS := $(wildcard proto/magnetar/v1/*.proto)
PROTO_OUT := services/magnetar/proto/v1
ZK_JAR := /usr/share/java/zookeeper.jar
PYTEST_ARGS ?=
DELAYED_MESSAGES ?= 1000000
DELAYED_RATE ?= 2000
REREPLICATION_MB ?= 100

.PHONY: help setup run test test-unit test-integration lint proto bench fuzz-api clean dlq-replay dlq-report

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup: $(STAMPS)/apt $(STAMPS)/venv $(STAMPS)/proto $(STAMPS)/spark ## Install everything (apt ZooKeeper and Java, virtualenv, gRPC stubs, PySpark for spark-jobs/); idempotent

$(STAMPS)/apt:
	@mkdir -p $(STAMPS)
	@if [ ! -f $(ZK_JAR) ] || ! command -v java >/dev/null || ! command -v curl >/dev/null; then \
	  echo ">> installing ZooKeeper, Java and curl from Debian packages"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
	    --no-install-recommends zookeeper default-jre-headless curl >/dev/null; \
	fi
	@test -f $(ZK_JAR) || { echo "ZooKeeper is missing: apt-get install zookeeper"; exit 1; }
	@touch $@

$(STAMPS)/venv: pyproject.toml requirements.lock
	@mkdir -p $(STAMPS)
	@echo ">> creating the virtualenv in $(VENV)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -r requirements.lock
	@$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

$(STAMPS)/spark: $(STAMPS)/venv spark-jobs/requirements.lock
	@echo ">> installing PySpark and the Spark jobs' dependencies (spark-jobs/requirements.lock)"
	@$(PY) -m pip install -q --disable-pip-version-check -r spark-jobs/requirements.lock
	@touch $@

$(STAMPS)/proto: $(STAMPS)/venv $(PROTOS)
	@$(MAKE) --no-print-directory proto
	@touch $@

proto: ## Generate the gRPC stubs into services/magnetar/proto/v1
	@echo ">> generating gRPC stubs"
	@rm -rf $(PROTO_OUT) build/proto && mkdir -p $(PROTO_OUT) build/proto
	@$(PY) -m grpc_tools.protoc -Iproto --python_out=build/proto --pyi_out=build/proto \
	  --grpc_python_out=build/proto $(PROTOS)
	@# protoc imports by the proto's path (magnetar.v1); the stubs live in magnetar.proto.v1.
	@for f in build/proto/magnetar/v1/*; do \
	  sed -e 's/^from magnetar\.v1 import/from magnetar.proto.v1 import/' "$$f" > $(PROTO_OUT)/$$(basename $$f); done
	@touch $(PROTO_OUT)/__init__.py

run: setup ## Start ZooKeeper, 3 bookies, a broker, an auditor and the gateway (8080) on this machine (data under ./data); Ctrl-C stops
	$(VENV)/bin/magnetar standalone --data-dir ./data

test: setup ## Run the whole test suite (unit + integration, real ZooKeeper and processes)
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup ## Run the unit tests only
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: setup ## Run the integration tests only
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

FUZZ_API_EXAMPLES ?= 200
fuzz-api: setup ## schemathesis against the gateway's OpenAPI, FUZZ_API_EXAMPLES per operation and mode (default 200)
	FUZZ_API_EXAMPLES=$(FUZZ_API_EXAMPLES) $(PY) -m pytest tests/integration/gateway/test_api_fuzz.py $(PYTEST_ARGS)

lint: setup ## ruff + mypy
	$(VENV)/bin/ruff check services tests bench
	$(VENV)/bin/mypy

bench: setup ## Run the benchmarks (bench/*.py); results under bench/results
	$(PY) bench/bookie_add.py
	$(PY) bench/ledger_add.py
	$(PY) bench/e2e.py
	$(PY) bench/gateway.py
	$(PY) bench/delayed.py --messages $(DELAYED_MESSAGES) --rate $(DELAYED_RATE)
	$(PY) bench/rereplication.py --mb $(REREPLICATION_MB)
	$(PY) bench/dlq_replay.py
	$(PY) bench/rate_limits.py

# The Spark jobs against `make run`'s cluster, the driver and local[*] executors on this
# machine, Python workers on the virtualenv's interpreter.
SPARK_MASTER ?= local[*]
SERVICE_URL ?= magnetar://127.0.0.1:6650
ADMIN_URL ?= http://127.0.0.1:8080
SPARK_JOB = SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(CURDIR)/$(PY) PYSPARK_DRIVER_PYTHON=$(CURDIR)/$(PY) \
	PYTHONPATH=$(CURDIR)/spark-jobs MAGNETAR_SERVICE_URL=$(SERVICE_URL) MAGNETAR_ADMIN_URL=$(ADMIN_URL) \
	$(VENV)/bin/spark-submit --master '$(SPARK_MASTER)' --conf spark.ui.enabled=false --conf spark.log.level=WARN

dlq-replay: setup ## Replay DLQs with Spark against `make run`: make dlq-replay ARGS="--topic orders --subscription billing [--dry-run]"
	$(SPARK_JOB) spark-jobs/dlq_replay.py $(ARGS)

dlq-report: setup ## Count DLQ messages by REAL_TOPIC, reason, age: make dlq-report ARGS="--namespace public/default --png r.png"
	$(SPARK_JOB) spark-jobs/dlq_report.py $(ARGS)

clean: ## Remove the virtualenv, stubs and build files (keeps ./data)
	rm -rf $(VENV) $(STAMPS) $(PROTO_OUT) build
