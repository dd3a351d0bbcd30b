"""Commands of Pulsar's binary protocol beyond producing and consuming, with pulsar-client
(its C++ core) against one broker with bookies: pattern subscriptions
(GET_TOPICS_OF_NAMESPACE), schemas (GET_SCHEMA, a producer's and a consumer's schema),
Key_Shared routing by ordering key, the topic lists of a namespace."""

from __future__ import annotations

import asyncio
import re
import time

import pulsar
import pytest

from magnetar.client.admin import AdminClient
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection

pytestmark = pytest.mark.integration



class Cluster:
    def __init__(self, broker, port: int) -> None:
        self.broker = broker
        self.address = broker.address
        self.port = port
        self.url = f"pulsar://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster(shared_cluster) -> Cluster:
    """The run's shared two bookies and broker (E=Qw=Qa=2): this module's tests use
    namespaces of their own."""
    return Cluster(shared_cluster.broker, shared_cluster.broker.protocol_port)


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


# -- Key_Shared as Pulsar routes it -----------------------------------------------------
async def test_topic_lists_name_partitions_as_pulsar_does(cluster: Cluster) -> None:
    """GET_TOPICS_OF_NAMESPACE lists a partitioned topic as its partitions (also one never
    used), the gRPC ListTopics by its name; a non-partitioned topic whose name only looks
    like a partition's (``x-partition-3``, no partitioned topic ``x``) is listed by both."""
    ns = await new_namespace(cluster.address, "lists")
    parted, plain, lookalike = (f"persistent://{ns}/{t}" for t in ("parts", "plain", "x-partition-3"))
    async with AdminClient(cluster.address, 10) as admin:
        await admin.create_topic(parted, partitions=2)

    def run() -> None:
        client = _client(cluster.url)
        try:
            _send(client, f"{parted}-partition-0", "to partition 0")  # partition 1 stays unused
            _send(client, plain, "plain")
            _send(client, lookalike, "lookalike")  # auto-created: a topic of its own
        finally:
            client.close()

    await asyncio.to_thread(run)
    async with AdminClient(cluster.address, 10) as admin:
        assert await admin.topics(ns) == sorted([parted, plain, lookalike])
        assert await admin.partitions(lookalike) == 0
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        T = pb.BaseCommand
        await conn.send(T(type=T.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=pb.CommandGetTopicsOfNamespace(
            request_id=1, namespace=ns, mode=pb.CommandGetTopicsOfNamespace.PERSISTENT,
        )))  # fmt: skip
        answer = (await conn.receive()).command
    assert answer.type == T.GET_TOPICS_OF_NAMESPACE_RESPONSE, answer
    assert list(answer.getTopicsOfNamespaceResponse.topics) == sorted(
        [f"{parted}-partition-0", f"{parted}-partition-1", plain, lookalike]
    )


async def test_key_shared_routes_pulsar_messages_by_their_ordering_key(cluster: Cluster) -> None:
    """One partition key for every message, 12 ordering keys: each ordering key stays on one
    consumer and the keys spread over both (the partition key alone would put all on one)."""
    ns = await new_namespace(cluster.address, "keyshared")
    topic = f"persistent://{ns}/orders"

    def run() -> list[dict[str, set[str]]]:
        client = _client(cluster.url)
        try:
            consumers = [
                client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=f"c{i}")
                for i in range(2)
            ]
            producer = client.create_producer(topic, batching_enabled=False)
            for n in range(48):
                producer.send(f"m{n}".encode(), partition_key="same", ordering_key=f"o{n % 12}")
            producer.close()
            seen: list[dict[str, set[str]]] = [{} for _ in consumers]
            deadline = time.monotonic() + 20
            while sum(len(v) for s in seen for v in s.values()) < 48 and time.monotonic() < deadline:
                for i, c in enumerate(consumers):
                    try:
                        m = c.receive(100)
                    except pulsar.Timeout:
                        continue
                    seen[i].setdefault(m.ordering_key(), set()).add(m.data().decode())
                    c.acknowledge(m)
            return seen
        finally:
            client.close()

    seen = await asyncio.to_thread(run)
    assert sum(len(v) for s in seen for v in s.values()) == 48
    assert not set(seen[0]) & set(seen[1]), seen  # an ordering key on one consumer only
    assert seen[0] and seen[1], seen  # spread, though every message has the same partition key


# -- schemas ----------------------------------------------------------------------------
class Order(pulsar.schema.Record):
    item = pulsar.schema.String()
    count = pulsar.schema.Integer()


async def _get_schema(cluster: Cluster, topic: str, version: bytes | None = None) -> pb.CommandGetSchemaResponse:
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        request = pb.CommandGetSchema(request_id=7, topic=topic)
        if version is not None:
            request.schema_version = version
        await conn.send(pb.BaseCommand(type=pb.BaseCommand.GET_SCHEMA, getSchema=request))
        return (await conn.receive()).command.getSchemaResponse


async def test_a_topic_keeps_its_first_schema_and_refuses_another(cluster: Cluster) -> None:
    ns = await new_namespace(cluster.address, "schema")
    strings, orders = f"persistent://{ns}/strings", f"persistent://{ns}/orders"

    def run() -> tuple[str, str, str, object]:
        client = _client(cluster.url)
        try:
            producer = client.create_producer(strings, schema=pulsar.schema.StringSchema())
            producer.send("hello")
            consumer = client.subscribe(strings, "s", schema=pulsar.schema.StringSchema(),
                                        initial_position=pulsar.InitialPosition.Earliest)  # fmt: skip
            message = consumer.receive(10_000)
            try:
                client.create_producer(strings, schema=pulsar.schema.JsonSchema(Order))
                refused = "created"
            except pulsar.PulsarException as exc:
                refused = type(exc).__name__
            json_producer = client.create_producer(orders, schema=pulsar.schema.JsonSchema(Order))
            json_producer.send(Order(item="tea", count=3))
            json_consumer = client.subscribe(orders, "s", schema=pulsar.schema.JsonSchema(Order),
                                             initial_position=pulsar.InitialPosition.Earliest)  # fmt: skip
            order = json_consumer.receive(10_000).value()
            return message.value(), message.schema_version(), refused, order
        finally:
            client.close()

    value, version, refused, order = await asyncio.to_thread(run)
    assert value == "hello"
    # The message carries the version its producer got (pulsar-client hands the 8 bytes over as a str).
    assert version.encode("latin-1") == (0).to_bytes(8, "big")
    assert refused == "IncompatibleSchema"
    assert (order.item, order.count) == ("tea", 3)

    kept = await _get_schema(cluster, strings)
    assert not kept.HasField("error_code"), kept
    assert (kept.schema.type, kept.schema_version) == (pb.Schema.String, (0).to_bytes(8, "big"))
    json_kept = await _get_schema(cluster, orders)
    assert json_kept.schema.type == pb.Schema.Json and b'"item"' in json_kept.schema.schema_data
    for missing in (await _get_schema(cluster, f"persistent://{ns}/none"), await _get_schema(cluster, strings, b"\0" * 7 + b"\1")):
        assert missing.error_code == pb.TopicNotFound, missing  # Pulsar's "no schema"
    async with AdminClient(cluster.address, 10) as admin:  # a deleted topic's schema goes with it
        await admin.delete_topic(strings)
    assert (await _get_schema(cluster, strings)).error_code == pb.TopicNotFound
