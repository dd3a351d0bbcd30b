"""``/metrics`` of real processes: a broker with traffic exports Pulsar's names with the
values its topic stats hold, bookies and the auditor BookKeeper's, and every metric the
shipped Grafana dashboards and alert rules query is one these scrapes expose.

On the run's shared cluster (its broker and bookies serve /metrics), plus an auditor
started for this module on the same metadata root."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import magnetar.asyncio as mg
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import AuditorProcess, ServiceFactory, _new_port
from magnetar.testing.promql import dashboard_exprs, metric_names, rule_exprs
from magnetar.testing.pytest_plugin import SharedCluster, track_process

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PRODUCED = 20
ACKED = 8

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def poll(port: int, done: Callable[[Samples], bool], timeout_s: float = 15.0) -> Samples:
    deadline = time.monotonic() + timeout_s
    while True:
        samples = await asyncio.to_thread(scrape, port)
        if done(samples) or time.monotonic() > deadline:
            return samples
        await asyncio.sleep(0.1)


@pytest.fixture(scope="module")
def auditor(shared_cluster: SharedCluster, zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[AuditorProcess]:  # fmt: skip
    """An auditor on the shared cluster's metadata root, for this module only."""
    factory = ServiceFactory(
        AuditorProcess, zk_server.connect_string, shared_cluster.zk_root, tmp_path_factory.mktemp("metrics-auditor"),
        on_create=lambda a: track_process(request.node, a),
    )
    auditor = factory(metrics_port=_new_port(), zk_session_timeout_s=4.0)
    try:
        yield auditor
    finally:
        auditor.stop()  # its leadership goes with it, not a session timeout later
        factory.kill_all()


async def test_scrapes_name_what_the_stats_hold_and_what_the_dashboards_query(
    shared_cluster: SharedCluster, auditor: AuditorProcess,
) -> None:
    broker = shared_cluster.broker
    namespace = await new_namespace(broker.address, "metrics")
    topic = f"persistent://{namespace}/orders"
    async with mg.Client(broker.address) as client:
        idle = await client.subscribe(topic, "idle", initial_position=mg.InitialPosition.Earliest)
        await idle.close()  # a durable subscription with the whole backlog
        consumer = await client.subscribe(topic, "work", consumer_type=mg.ConsumerType.Shared,
                                          initial_position=mg.InitialPosition.Earliest)  # fmt: skip
        producer = await client.create_producer(topic, batching_enabled=False, producer_name="metrics-producer")
        for n in range(PRODUCED):
            await producer.send(f"m{n}".encode())
        for _ in range(ACKED):
            await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))

        t = {"cluster": "standalone", "namespace": namespace, "topic": topic}
        work = {**t, "subscription": "work"}
        idle_sub = {**t, "subscription": "idle"}

        def settled(s: Samples) -> bool:
            return value(s, "pulsar_subscription_back_log", **work) == PRODUCED - ACKED

        samples = await poll(broker.metrics_port, settled)

        assert value(samples, "pulsar_in_messages_total", **t) == PRODUCED
        assert value(samples, "pulsar_in_bytes_total", **t) > 0
        assert value(samples, "pulsar_subscription_back_log", **work) == PRODUCED - ACKED
        assert value(samples, "pulsar_subscription_back_log", **idle_sub) == PRODUCED
        assert value(samples, "pulsar_msg_backlog", **t) == 2 * PRODUCED - ACKED
        delivered = value(samples, "pulsar_out_messages_total", **work)
        assert delivered is not None and ACKED <= delivered <= PRODUCED
        assert value(samples, "pulsar_out_messages_total", **idle_sub) == 0
        assert value(samples, "pulsar_subscription_unacked_messages", **work) == delivered - ACKED
        assert value(samples, "pulsar_subscription_consumers_count", **work) == 1
        assert value(samples, "pulsar_producers_count", **t) == 1
        assert value(samples, "pulsar_consumers_count", **t) == 1
        assert value(samples, "pulsar_subscriptions_count", **t) == 2
        logical = value(samples, "pulsar_storage_logical_size", **t)
        assert logical is not None and logical > 0
        assert value(samples, "pulsar_storage_size", **t) == 2 * logical  # Qw = 2 copies
        assert value(samples, "pulsar_topics_count", cluster="standalone", namespace=namespace) == 1
        assert value(samples, "pulsar_broker_lease_valid", cluster="standalone") == 1
        assert value(samples, "pulsar_broker_topics_count", cluster="standalone") >= 1
        await producer.close()
        await consumer.close()

    exposed = {name for name, _ in samples}
    for bookie in shared_cluster.bookies:
        b = await asyncio.to_thread(scrape, bookie.metrics_port)
        assert value(b, "bookie_SERVER_STATUS") == 1
        assert value(b, "bookie_ledger_writable_dirs") == 1
        # E = Qw = 2: both bookies took adds.
        assert value(b, "bookkeeper_server_ADD_ENTRY_REQUEST_count", success="true") >= 1
        assert value(b, "bookie_journal_JOURNAL_WRITE_BYTES") > 0
        exposed |= {name for name, _ in b}
    a = await poll(auditor.metrics_port, lambda s: value(s, "magnetar_auditor_is_leader") == 1)
    assert value(a, "magnetar_auditor_is_leader") == 1
    assert value(a, "auditor_NUM_UNDER_REPLICATED_LEDGERS_count", success="true") is not None
    exposed |= {name for name, _ in a}

    queried: dict[str, set[str]] = {}
    for path in sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json")):
        for expr in dashboard_exprs(json.loads(path.read_text())):
            for name in metric_names(expr):
                queried.setdefault(name, set()).add(path.name)
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "magnetar-alerts.yaml").read_text())
    for expr in rule_exprs(rules):
        for name in metric_names(expr):
            queried.setdefault(name, set()).add("magnetar-alerts.yaml")
    missing = {name: sorted(where) for name, where in queried.items() if name not in exposed}
    assert not missing, f"queried but exposed by no broker, bookie or auditor: {missing}"
    assert len(queried) >= 40
