"""Commands of Pulsar's binary protocol beyond producing and consuming, with pulsar-client
(its C++ core) against one broker with bookies: pattern subscriptions
(GET_TOPICS_OF_NAMESPACE), schemas (GET_SCHEMA, a producer's and a consumer's schema),
Key_Shared routing by ordering key."""

from __future__ import annotations

import asyncio
import re
import time

import pulsar
import pytest

from magnetar.client.admin import AdminClient
from magnetar.common.netutil import free_port
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)


class Cluster:
    def __init__(self, broker, port: int) -> None:
        self.broker = broker
        self.address = broker.address
        self.url = f"pulsar://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster(module_bookie_factory, module_broker_factory) -> Cluster:
    module_bookie_factory()
    module_bookie_factory()
    port = free_port()
    return Cluster(module_broker_factory(protocol_port=port, **QUORUM), port)


def _client(url: str) -> pulsar.Client:
    return pulsar_client(url, operation_timeout_seconds=10, connection_timeout_ms=5000)


def _send(client: pulsar.Client, topic: str, *payloads: str, **kwargs) -> None:
    producer = client.create_producer(topic, **kwargs)
    for p in payloads:
        producer.send(p.encode())
    producer.close()


def _receive_until(consumer, wanted: set[str], timeout_s: float = 20.0) -> dict[str, str]:
    """payload -> topic of each message received (acknowledged) until ``wanted`` are all in."""
    got: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    while not wanted <= got.keys() and time.monotonic() < deadline:
        try:
            m = consumer.receive(200)
        except pulsar.Timeout:
            continue
        got[m.data().decode()] = m.topic_name()
        consumer.acknowledge(m)
    return got


# -- pattern subscriptions (GET_TOPICS_OF_NAMESPACE) --------------------------------------
def _subscribe_pattern(client: pulsar.Client, pattern: str, subscription: str, *, discovery_period_s: int) -> pulsar.Consumer:
    """``client.subscribe(re.compile(pattern), subscription, pattern_auto_discovery_period=…,
    initial_position=Earliest)`` as it is meant to work: pulsar-client 3.13's ``subscribe``
    checks ``pattern_auto_discovery_period`` but never hands it to the C++ core, whose
    default (60 s) stays; so the configuration is made here, as ``subscribe`` makes it."""
    import _pulsar

    conf = _pulsar.ConsumerConfiguration()
    conf.pattern_auto_discovery_period(discovery_period_s)
    conf.subscription_initial_position(pulsar.InitialPosition.Earliest)
    consumer = pulsar.Consumer()
    consumer._consumer = client._client.subscribe_pattern(re.compile(pattern).pattern, subscription, conf)
    consumer._client = client
    consumer._schema = pulsar.schema.BytesSchema()
    consumer._schema.attach_client(client._client)
    client._consumers.append(consumer)
    return consumer


async def test_a_pattern_subscription_receives_from_every_matching_topic_and_finds_new_ones(cluster: Cluster) -> None:
    ns = await new_namespace(cluster.address, "pattern")
    async with AdminClient(cluster.address, 10) as admin:
        await admin.create_topic(f"persistent://{ns}/prefix-parts", partitions=2)

    def run() -> tuple[dict[str, str], dict[str, str]]:
        client = _client(cluster.url)
        try:
            _send(client, f"persistent://{ns}/prefix-plain", "plain")
            _send(client, f"persistent://{ns}/other", "other")
            parts = client.create_producer(f"persistent://{ns}/prefix-parts", batching_enabled=False)
            for n in range(4):
                parts.send(f"part{n}".encode(), partition_key=f"k{n}")
            parts.close()
            consumer = _subscribe_pattern(client, f"persistent://{ns}/prefix-.*", "sub", discovery_period_s=1)
            first = _receive_until(consumer, {"plain", "part0", "part1", "part2", "part3"})
            # A topic created after the subscription: the client finds it on its next poll.
            _send(client, f"persistent://{ns}/prefix-later", "later")
            later = _receive_until(consumer, {"later"})
            consumer.close()
            return first, later
        finally:
            client.close()

    first, later = await asyncio.to_thread(run)
    assert set(first) == {"plain", "part0", "part1", "part2", "part3"}, first  # nothing of "other"
    assert first["plain"] == f"persistent://{ns}/prefix-plain"
    assert {first[f"part{n}"] for n in range(4)} <= {f"persistent://{ns}/prefix-parts-partition-{i}" for i in range(2)}
    assert later == {"later": f"persistent://{ns}/prefix-later"}
