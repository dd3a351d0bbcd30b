"""``magnetar admin``, ``magnetar produce`` and ``magnetar consume`` against a real broker.

One cluster (2 bookies, a broker) for the module: each test has topics (and a tenant) of
its own. The first command of each tool runs as the console script from cold
(``magnetar``); the others are forked from a warm interpreter (:class:`WarmMagnetar`),
each still a process with its own exit code and outputs."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.processes import (
    BookieProcess,
    BrokerProcess,
    ServiceFactory,
    ServiceProcess,
    start_all,
)
from magnetar.testing.pytest_plugin import track_process
from magnetar.testing.shell import MAGNETAR, WarmMagnetar, magnetar
from magnetar.testing.shell import cli_fails as fails
from magnetar.testing.shell import cli_ok as ok

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServiceProcess]]:
    """The broker first, then its two bookies."""
    if not zk_server.alive:
        zk_server.start()
    root, base = f"/cli-tools-{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("cli-tools")
    bookies = ServiceFactory(BookieProcess, zk_server.connect_string, root, base / "bookies")
    brokers = ServiceFactory(BrokerProcess, zk_server.connect_string, root, base / "brokers")
    try:
        processes = [brokers.create(ensemble_size=2, write_quorum=2, ack_quorum=2), bookies.create(), bookies.create()]
        yield start_all(processes)  # the broker sees the bookies as they come
    finally:
        brokers.kill_all()
        bookies.kill_all()


@pytest.fixture
def broker(cluster: list[ServiceProcess], request: pytest.FixtureRequest) -> BrokerProcess:
    for process in cluster:
        track_process(request.node, process)
    assert isinstance(cluster[0], BrokerProcess)
    return cluster[0]


@pytest.fixture(scope="module")
def sh() -> Iterator[WarmMagnetar]:
    with WarmMagnetar("admin", "produce", "consume") as warm:
        yield warm


def test_admin_round_trip_and_errors(broker: BrokerProcess, sh: WarmMagnetar) -> None:
    def admin(*args: str) -> subprocess.CompletedProcess[str]:
        return sh.run("admin", "--url", broker.address, *args)

    assert ok(magnetar("admin", "--url", broker.address, "tenants", "create", "acme")) == ""
    assert "acme" in ok(admin("tenants", "list")).splitlines()
    assert ok(admin("namespaces", "create", "acme/orders")) == ""
    assert ok(admin("namespaces", "list", "acme")).splitlines() == ["acme/orders"]

    assert ok(admin("topics", "create", "persistent://acme/orders/plain")) == ""
    assert ok(admin("topics", "create-partitioned-topic", "persistent://acme/orders/parts", "-p", "3")) == ""
    listed = ok(admin("topics", "list", "acme/orders")).splitlines()
    assert "persistent://acme/orders/plain" in listed
    assert any(name.startswith("persistent://acme/orders/parts") for name in listed), listed

    # Errors: one line, exit 1.
    assert "already exists" in fails(admin("tenants", "create", "acme"), "admin")
    assert "nosuch" in fails(admin("namespaces", "create", "nosuch/ns"), "admin")
    fails(admin("namespaces", "create", "no-slash"), "admin")
    fails(admin("topics", "create", "persistent://acme"), "admin")
    usage = admin("topics", "create-partitioned-topic", "persistent://acme/orders/x")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr

    for topic in ("persistent://acme/orders/plain", "persistent://acme/orders/parts"):
        assert ok(admin("topics", "delete", topic)) == ""
    assert ok(admin("topics", "list", "acme/orders")) == ""
    assert ok(admin("namespaces", "delete", "acme/orders")) == ""
    assert ok(admin("namespaces", "list", "acme")) == ""
    assert ok(admin("tenants", "delete", "acme")) == ""
    assert "acme" not in ok(admin("tenants", "list")).splitlines()


def test_produce_consume_and_stats(broker: BrokerProcess, sh: WarmMagnetar) -> None:
    topic = "persistent://public/default/cli-tools"
    url = ("--url", broker.address)
    produced = ok(magnetar("produce", topic, *url, "-m", "hello", "-m", "world", "-n", "3",
                           "-k", "k1", "--properties", "a=1,b=2"))
    assert produced.strip() == "6 messages successfully produced"

    consumed = ok(sh.run("consume", topic, *url, "-s", "sub", "-p", "Earliest", "-n", "6", "--timeout", "10"))
    lines = consumed.splitlines()
    assert lines[-1] == "6 messages successfully consumed"
    assert lines.count("----- got message -----") == 6
    contents = [line for line in lines if line.startswith("key:")]
    assert contents == ["key:[k1], properties:[a=1, b=2], content:" + c for c in ["hello", "world"] * 3]

    stats = json.loads(ok(sh.run("admin", *url, "topics", "stats", topic)))
    assert stats["msgInCounter"] == 6
    assert stats["bytesInCounter"] > 0
    assert stats["storageSize"] > 0
    assert stats["entries"] >= 1
    assert stats["producers"] == 0
    assert stats["subscriptions"]["sub"]["type"] == "Exclusive"
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 0
    assert stats["subscriptions"]["sub"]["consumers"] == 0

    # Nothing more to read: --timeout ends it with one line.
    line = fails(sh.run("consume", topic, *url, "-s", "sub", "-n", "1", "--timeout", "1"), "consume")
    assert "no message" in line


def test_consume_in_background_then_produce(broker: BrokerProcess, sh: WarmMagnetar) -> None:
    topic = "persistent://public/default/cli-live"
    consumer = subprocess.Popen(
        [MAGNETAR, "consume", topic, "--url", broker.address, "-s", "live", "-n", "2", "--timeout", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # A Latest subscription sees only what comes after it subscribed: wait for it.
        for _ in range(50):
            stats = sh.run("admin", "--url", broker.address, "topics", "stats", topic)
            if stats.returncode == 0 and json.loads(stats.stdout)["subscriptions"].get("live", {}).get("consumers"):
                break
            assert consumer.poll() is None, consumer.communicate()
            time.sleep(0.2)
        ok(sh.run("produce", topic, "--url", broker.address, "-m", "one", "-m", "two", "--disable-batching"))
        out, err = consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    assert consumer.returncode == 0, err
    assert "content:one" in out and "content:two" in out
    assert out.splitlines()[-1] == "2 messages successfully consumed"


def test_subscription_types_and_unreachable(broker: BrokerProcess, sh: WarmMagnetar) -> None:
    topic = "persistent://public/default/cli-types"
    assert sh.run("produce", topic, "--url", broker.address, "-m", "hello", "-n", "4").returncode == 0
    for sub_type in ("Shared", "Failover", "Key_Shared"):
        result = sh.run(
            "consume", topic, "--url", broker.address, "-s", sub_type, "-t", sub_type, "-n", "4", "-p", "Earliest", "--timeout", "20",
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("hello") == 4

    line = fails(sh.run("admin", "--url", "127.0.0.1:1", "tenants", "list"), "admin")
    assert "127.0.0.1:1" in line
    line = fails(sh.run("produce", "t", "--url", "127.0.0.1:1", "-m", "x"), "produce")
    assert "127.0.0.1:1" in line
