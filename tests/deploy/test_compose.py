"""docker-compose.yml for real, with podman: the images are built from this tree
(deploy/docker/Dockerfile; the base made from Debian packages when missing, as no
registry is reachable here, and the offline ZooKeeper image of deploy/docker/zookeeper),
the cluster is brought up with podman-compose under a project of its own (its own network
and volumes, an .env of the test's pointing at those images and at free host ports), then:

- clients on the host (the ``magnetar`` CLI and the SDK) produce and consume through the
  published broker ports;
- a bookie of the topic's ensemble is killed (``podman kill``) and producing goes on
  (E=2, Qw=2, Qa=2 with 3 bookies: the ledger's ensemble changes); every acknowledged
  message is read back;
- the scheduled DLQ replay service (the Spark image) moves real dead letters back.

Everything the test started is removed at the end (containers, volumes, network), also
when it fails. Without a usable podman the tests are skipped, with the reason.

Knobs (environment): MAGNETAR_TEST_IMAGE_TAG (tag of the images built, default
compose-test), MAGNETAR_TEST_BASE_IMAGE (default localhost/magnetar-base:bookworm, made
with debootstrap when missing), MAGNETAR_TEST_NO_CACHE=1 (build without the layer cache:
the time a fresh machine takes).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from containers import (
    COMPOSE_FILE,
    REPO,
    Build,
    ComposeProject,
    Timings,
    image_exists,
    run,
    unusable_reason,
)

import magnetar
from magnetar.common.netutil import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

TAG = os.environ.get("MAGNETAR_TEST_IMAGE_TAG", "compose-test")
BASE_IMAGE = os.environ.get("MAGNETAR_TEST_BASE_IMAGE", "localhost/magnetar-base:bookworm")
NO_CACHE = os.environ.get("MAGNETAR_TEST_NO_CACHE") == "1"
CORE = ["zookeeper", "bookie-1", "bookie-2", "bookie-3", "broker-1", "broker-2", "auditor-1", "auditor-2", "gateway"]
MAGNETAR_CLI = str(Path(sys.executable).parent / "magnetar")
BUILD_TIMEOUT_S = 900.0
HEALTHY_TIMEOUT_S = 180.0
DLQ_SUBSCRIPTION = "workers"


@dataclass
class Images:
    service: str
    spark: str
    zookeeper: str
    spark_build: Build


@dataclass
class Cluster:
    project: ComposeProject
    service_url: str
    gateway_url: str
    dlq_source_topic: str

    def client(self) -> magnetar.Client:
        return magnetar.Client(self.service_url, operation_timeout_seconds=60)

    def get(self, path: str) -> object:
        response = httpx.get(f"{self.gateway_url}{path}", timeout=30)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()


@contextmanager
def logs_on_failure(project: ComposeProject) -> Iterator[None]:
    """Print every container's last log lines when the block fails."""
    try:
        yield
    except BaseException:
        print(project.dump_logs())
        raise


# -- the compose file itself (no engine needed) -----------------------------------------


def test_compose_file_matches_the_spec_and_every_variable_is_documented() -> None:
    checker = Path(sys.executable).parent / "check-jsonschema"
    assert checker.exists(), f"{checker} is missing: it comes with requirements.lock (make setup)"
    proc = run([str(checker), "--builtin-schema", "vendor.compose-spec", str(COMPOSE_FILE)], timeout=120, check=False)
    assert proc.returncode == 0, f"docker-compose.yml fails the compose specification:\n{proc.stdout}{proc.stderr}"

    text = COMPOSE_FILE.read_text()
    used = set(re.findall(r"(?<!\$)\$\{([A-Z0-9_]+)", text))
    documented = set(re.findall(r"^([A-Z0-9_]+)=", (REPO / ".env.example").read_text(), re.MULTILINE))
    assert used == documented, (
        f"in docker-compose.yml, not in .env.example: {sorted(used - documented)}; "
        f"in .env.example, unused: {sorted(documented - used)}"
    )
    # Every default in the compose file is the value .env.example shows.
    example = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", (REPO / ".env.example").read_text(), re.MULTILINE))
    for name, default in re.findall(r"(?<!\$)\$\{([A-Z0-9_]+):-([^}]*)\}", text):
        assert example[name] == default, f"{name}: compose default {default!r}, .env.example {example[name]!r}"
    services = yaml.safe_load(text)["services"]
    assert {s for s in services if "healthcheck" not in services[s]} == {"dlq-replay"}
    for name, service in services.items():
        for dependency in (service.get("depends_on") or {}).values():
            assert dependency["condition"] == "service_healthy", name


# -- images and the cluster ---------------------------------------------------------------


@pytest.fixture(scope="module")
def timings(pytestconfig: pytest.Config) -> Iterator[Timings]:
    recorded = Timings()
    yield recorded
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + recorded.table(), flush=True)


@pytest.fixture(scope="module")
def images(timings: Timings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    """The base image (when missing), then the service and ZooKeeper images side by side,
    then the Spark image in the background (the DLQ test waits for it)."""
    reason = unusable_reason()
    if reason:
        pytest.skip(f"no usable container engine: {reason}")
    logs = tmp_path_factory.mktemp("image-builds")
    env = {
        "IMAGE_TAG": TAG, "IMAGE": "localhost/magnetar", "SPARK_IMAGE": "localhost/magnetar-spark",
        "ZOOKEEPER_IMAGE": f"localhost/magnetar-zookeeper:{TAG}", "BASE": BASE_IMAGE, "ZOOKEEPER_BASE": BASE_IMAGE,
        "BASE_IMAGE": BASE_IMAGE, "BUILD_OPTS": "--no-cache" if NO_CACHE else "",
    }  # fmt: skip
    if not image_exists(BASE_IMAGE):
        if shutil.which("debootstrap") is None:
            pytest.skip(f"no base image {BASE_IMAGE} and no debootstrap to make one (make setup installs it)")
        Build("base", env, logs / "base.log", timings, f"base image {BASE_IMAGE} (debootstrap + import)").wait(600)
    service = Build("service", env, logs / "service.log", timings, "image magnetar (target service)")
    zookeeper = Build("zookeeper", env, logs / "zookeeper.log", timings, "image magnetar-zookeeper (Debian's, offline)")
    try:
        service.wait(BUILD_TIMEOUT_S)
        zookeeper.wait(BUILD_TIMEOUT_S)
    except BaseException:
        service.stop()
        zookeeper.stop()
        raise
    spark = Build("spark", env, logs / "spark.log", timings, "image magnetar-spark (target spark, in the background)")
    try:
        yield Images(f"localhost/magnetar:{TAG}", f"localhost/magnetar-spark:{TAG}",
                     f"localhost/magnetar-zookeeper:{TAG}", spark)
    finally:
        spark.stop()


@pytest.fixture(scope="module")
def cluster(images: Images, timings: Timings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    run_id = uuid.uuid4().hex[:8]
    workdir = tmp_path_factory.mktemp("compose")
    broker_ports = [free_port(), free_port()]
    pulsar_ports = [free_port(), free_port()]  # never Pulsar's 6650 (and 6652) of the machine
    gateway_port = free_port()
    dlq_source = f"persistent://public/default/orders-{run_id}"
    env_file = workdir / ".env"
    env_file.write_text("\n".join([
        f"MAGNETAR_IMAGE={images.service}",
        f"MAGNETAR_SPARK_IMAGE={images.spark}",
        f"ZOOKEEPER_IMAGE={images.zookeeper}",
        "ZOOKEEPER_JVMFLAGS=-Xmx128m",
        "MAGNETAR_PUBLISH_ADDRESS=127.0.0.1",
        f"BROKER_1_PORT={broker_ports[0]}",
        f"BROKER_2_PORT={broker_ports[1]}",
        f"BROKER_1_PULSAR_PORT={pulsar_ports[0]}",
        f"BROKER_2_PULSAR_PORT={pulsar_ports[1]}",
        f"GATEWAY_PORT={gateway_port}",
        "MAGNETAR_ENSEMBLE_SIZE=2",
        "MAGNETAR_WRITE_QUORUM=2",
        "MAGNETAR_ACK_QUORUM=2",
        f"DLQ_REPLAY_ARGS=--topic {dlq_source} --subscription {DLQ_SUBSCRIPTION}",
        "DLQ_REPLAY_INTERVAL_S=3600",
        "DLQ_REPLAY_MASTER=local[1]",
        "DLQ_REPLAY_DRIVER_MEMORY=512m",
        "",
    ]))  # fmt: skip
    project = ComposeProject(f"mgtest{run_id}", env_file)
    try:
        with logs_on_failure(project):
            try:
                with timings.phase("compose up (ZooKeeper, 3 bookies, 2 brokers, 2 auditors, gateway)"):
                    project.up(*CORE)
                with timings.phase("until every service's healthcheck passes"):
                    project.wait_healthy(CORE, HEALTHY_TIMEOUT_S)
            except BaseException:
                # No test of this module can run: the Spark image's build stops now, not
                # at the module's end, and writes nothing while other modules' tests run.
                images.spark_build.stop()
                raise
        yield Cluster(
            project,
            service_url="magnetar://" + ",".join(f"127.0.0.1:{port}" for port in broker_ports),
            gateway_url=f"http://127.0.0.1:{gateway_port}",
            dlq_source_topic=dlq_source,
        )
    finally:
        with timings.phase("teardown (containers, volumes, network)"):
            left = project.down()
        assert not left, f"left behind by project {project.name}: {left}"


# -- the tests ------------------------------------------------------------------------------


def test_host_clients_and_the_loss_of_a_bookie(cluster: Cluster, timings: Timings) -> None:
    project = cluster.project
    topic = f"persistent://public/default/compose-{uuid.uuid4().hex[:8]}"
    with logs_on_failure(project), timings.phase("test: host clients, a bookie killed, every message read back"):
        # The CLI on the host, as the README tells a user.
        out = run([MAGNETAR_CLI, "produce", topic, "-m", "hello from the host", "--url", cluster.service_url],
                  timeout=90).stdout
        assert "1 messages successfully produced" in out, out
        out = run([MAGNETAR_CLI, "consume", topic, "-s", "cli", "-p", "Earliest", "-n", "1", "--timeout", "60",
                   "--url", cluster.service_url], timeout=90).stdout
        assert "content:hello from the host" in out, out

        bookies = cluster.get("/admin/v2/bookies")
        assert sorted((b["bookieId"], b["state"], b["reachable"]) for b in bookies) == [  # type: ignore[union-attr,index]
            (f"bookie-{i}:3181", "writable", True) for i in (1, 2, 3)
        ]

        with cluster.client() as client:
            consumer = client.subscribe(topic, "check", initial_position=magnetar.InitialPosition.Earliest)
            producer = client.create_producer(topic, send_timeout_millis=60_000, max_pending_messages=1000)
            acked: set[str] = set()
            failed: dict[str, str] = {}

            def produce(payloads: list[str]) -> None:
                """Send them all at once (pipelined); record which were acknowledged."""
                for payload in payloads:
                    def done(res: object, _mid: object, payload: str = payload) -> None:
                        if res == magnetar.Result.Ok:
                            acked.add(payload)
                        else:
                            failed[payload] = str(res)
                    producer.send_async(payload.encode(), done)
                producer.flush()

            produce([f"before-{i}" for i in range(500)])
            assert not failed and len(acked) == 500, f"{len(failed)} failed before any bookie was lost: {failed}"

            stats_path = f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/internalStats"
            ledger_id = cluster.get(stats_path)["ledgers"][-1]["ledgerId"]  # type: ignore[index]
            ensemble = cluster.get(f"/admin/v2/ledgers/{ledger_id}")["fragments"][-1]["bookies"]  # type: ignore[index]
            victim = ensemble[0]
            victim_service = victim.split(":")[0]
            project.kill(victim_service)
            assert project.state(victim_service) != "running"

            started = time.monotonic()
            produce([f"after-{i}" for i in range(500)])
            print(f"500 messages acknowledged in {time.monotonic() - started:.1f} s once {victim} was killed")
            for broker in ("broker-1", "broker-2"):
                print("\n".join(line for line in project.logs(broker, 400).splitlines()
                                if "ensemble" in line or "fragment" in line))
            assert not failed, f"{len(failed)} sends failed after {victim} was killed: {dict(list(failed.items())[:5])}"
            assert len(acked) == 1000
            assert project.state(victim_service) != "running", "the killed bookie came back: not a real loss"

            ledger_id = cluster.get(stats_path)["ledgers"][-1]["ledgerId"]  # type: ignore[index]
            fragments = cluster.get(f"/admin/v2/ledgers/{ledger_id}")["fragments"]  # type: ignore[index]
            assert victim not in fragments[-1]["bookies"], f"still writing to the killed {victim}: {fragments}"

            expected = acked | {"hello from the host"}
            received: dict[str, list[str]] = {}
            while missing := expected - received.keys():
                try:
                    message = consumer.receive(timeout_millis=30_000)
                except magnetar.Timeout:
                    pytest.fail(f"{len(missing)} acknowledged messages never came back: {sorted(missing)[:20]}")
                received.setdefault(message.data().decode(), []).append(str(message.message_id()))
                consumer.acknowledge(message)
            assert received.keys() == expected
            twice = {payload: ids for payload, ids in received.items() if len(ids) > 1}
            assert not twice, f"{len(twice)} messages delivered more than once (payload: message ids): {twice}"
            producer.close()
            consumer.close()


def test_the_images_run_non_root_under_tini_with_a_healthcheck(cluster: Cluster, images: Images) -> None:
    project = cluster.project
    healthcheck = run(["podman", "image", "inspect", "--format", "{{json .Config.Healthcheck.Test}}", images.service],
                      timeout=60).stdout.strip()
    assert healthcheck == '["CMD","magnetar","health"]', healthcheck
    bookie = next(b for b in ("bookie-1", "bookie-2", "bookie-3") if project.state(b) == "running")  # one may be killed
    for service in ("broker-1", bookie, "auditor-1", "gateway"):
        container = project.container(service)
        # The image's own HEALTHCHECK: no target, so the default local ports; one serves.
        out = run(["podman", "exec", container, "magnetar", "health"], timeout=60, check=False)
        assert out.returncode == 0, f"{service}: magnetar health exited {out.returncode}: {out.stderr}"
        assert run(["podman", "exec", container, "id", "-u"], timeout=60).stdout.strip() == "10001"
        pid1 = run(["podman", "exec", container, "cat", "/proc/1/cmdline"], timeout=60).stdout.split("\0")
        assert pid1[0] == "/usr/bin/tini", f"{service}: PID 1 is {pid1}"
    # The probe can fail: nothing serves a bookie's port in a broker's container.
    out = run(["podman", "exec", project.container("broker-1"), "magnetar", "health", "localhost:3181"],
              timeout=60, check=False)
    assert out.returncode == 1 and "not serving" in out.stderr, out


def test_dlq_replay_service_moves_dead_letters_back(cluster: Cluster, images: Images, timings: Timings) -> None:
    project = cluster.project
    topic = cluster.dlq_source_topic
    dlq = f"{topic}-{DLQ_SUBSCRIPTION}-DLQ"
    poison = [f"poison-{i}" for i in range(3)]
    with logs_on_failure(project):
        with timings.phase("test: dead letters made by a real consumer"), cluster.client() as client:
            consumer = client.subscribe(
                topic, DLQ_SUBSCRIPTION, consumer_type=magnetar.ConsumerType.Shared,
                negative_ack_redelivery_delay_ms=100,
                dead_letter_policy=magnetar.ConsumerDeadLetterPolicy(max_redeliver_count=1),
            )
            producer = client.create_producer(topic)
            for payload in poison:
                producer.send(payload.encode())
            for _ in poison:
                consumer.negative_acknowledge(consumer.receive(timeout_millis=30_000))  # count 1 = max: to the DLQ
            deadline = time.monotonic() + 60
            dlq_path = f"/admin/v2/persistent/public/default/{dlq.rsplit('/', 1)[1]}/stats"
            while True:
                response = httpx.get(cluster.gateway_url + dlq_path, timeout=30)
                backlog = response.json()["subscriptions"].get(f"{DLQ_SUBSCRIPTION}-DLQ-sub", {}).get(
                    "msgBacklog", 0) if response.status_code == 200 else 0
                if backlog == len(poison):
                    break
                assert time.monotonic() < deadline, f"the DLQ holds {backlog} of {len(poison)}: {response.text}"
                time.sleep(0.5)
            consumer.close()
            producer.close()

        with timings.phase("waiting for the Spark image build (running since the cluster start)"):
            images.spark_build.wait(BUILD_TIMEOUT_S)

        with timings.phase("test: the dlq-replay service's first run (Spark in its container)"):
            project.compose("up", "-d", "--no-deps", "dlq-replay")
            deadline = time.monotonic() + 180
            while not re.search(r"dlq-replay: exit code \d+", logs := project.logs("dlq-replay", 200)):
                assert project.state("dlq-replay") == "running", f"dlq-replay stopped:\n{logs}"
                assert time.monotonic() < deadline, f"no run finished within 180 s:\n{logs}"
                time.sleep(2)
            assert "dlq-replay: exit code 0" in logs, logs
            assert re.search(r"moved: 3\b", logs), logs

        with cluster.client() as client:
            consumer = client.subscribe(topic, DLQ_SUBSCRIPTION, consumer_type=magnetar.ConsumerType.Shared)
            back = []
            while len(back) < len(poison):
                message = consumer.receive(timeout_millis=30_000)
                back.append(message.data().decode())
                consumer.acknowledge(message)
            assert sorted(back) == poison
            consumer.close()
        stats = cluster.get(dlq_path)
        assert stats["subscriptions"][f"{DLQ_SUBSCRIPTION}-DLQ-sub"]["msgBacklog"] == 0, stats  # type: ignore[index]


def test_no_container_engine_means_a_skip_not_a_failure(tmp_path: Path) -> None:
    """The skip path, for real: with podman off PATH the helper gives a reason (which the
    fixtures turn into pytest.skip), instead of failing."""
    env = {**os.environ, "PATH": str(tmp_path)}
    code = "import containers; r = containers.unusable_reason(); print(r); raise SystemExit(0 if r else 1)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=Path(__file__).parent, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "podman is not installed" in proc.stdout, proc.stdout + proc.stderr
