"""Producing through Pulsar's binary protocol door with the real client (pulsar-client's
C++ core), on real bookie and broker processes, read back by the Magnetar SDK over gRPC:
the same message ids, payloads and metadata through both doors, deduplication across a
producer's reconnect, delayed delivery, key routing over partitions, compressed batches both ways,
and the refusals only a real broker can make (a producer at a broker that does not own
the topic, a message over the size limit).

One cluster for the module: 2 bookies and two brokers serving the protocol."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import timedelta

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.netutil import free_port
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol.frames import encode_payload_command
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection, lookup_command

pytestmark = pytest.mark.integration

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
T = pb.BaseCommand


class Cluster:
    def __init__(self, brokers, ports: list[int]) -> None:
        self.brokers = brokers
        self.ports = ports
        self.urls = [f"pulsar://127.0.0.1:{p}" for p in ports]
        self.address = brokers[0].address


@pytest.fixture(scope="module")
def cluster(module_bookie_factory, module_broker_factory) -> Cluster:
    ports = [free_port(), free_port()]
    while ports[1] == ports[0]:
        ports[1] = free_port()
    brokers = [module_broker_factory.create(protocol_port=port, **QUORUM) for port in ports]
    start_all([module_bookie_factory.create(), module_bookie_factory.create(), *brokers])  # start-ups overlap
    return Cluster(brokers, ports)


# One logger for every client: the C++ core keeps the first one it was given.


def _client(url: str) -> pulsar.Client:
    return pulsar_client(url, operation_timeout_seconds=15, connection_timeout_ms=5000)


def _id(mid) -> tuple[int, int, int, int]:  # type: ignore[no-untyped-def]
    return mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()


async def _own(port: int, topic: str) -> None:
    """Make the broker listening on ``port`` the topic's owner (its first lookup)."""
    async with await RawPulsarConnection.open("127.0.0.1", port) as conn:
        await conn.handshake()
        await conn.send(lookup_command(topic, 1))
        answer = (await conn.receive()).command.lookupTopicResponse
        assert answer.response == pb.CommandLookupTopicResponse.Connect


async def _receive(consumer, count: int) -> list:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(count):
        msg = await consumer.receive(timeout_millis=20_000)
        await consumer.acknowledge(msg)
        out.append(msg)
    return out


def _produce(url: str, topic: str, batching: bool, asynchronous: bool, count: int) -> list[tuple]:
    """Send ``count`` messages; their receipts' ids and what was sent, in send order."""
    client = _client(url)
    try:
        producer = client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=20)
        sent = []
        receipts: dict[int, object] = {}
        for i in range(count):
            args = dict(properties={"i": str(i)}, partition_key=f"k{i % 3}", event_timestamp=1_600_000_000_000 + i)
            payload = b"message-%d" % i
            if asynchronous:
                producer.send_async(payload, lambda res, mid, i=i: receipts.__setitem__(i, (res, mid)), **args)
            else:
                receipts[i] = (pulsar.Result.Ok, producer.send(payload, **args))
            sent.append((payload, f"k{i % 3}", {"i": str(i)}, 1_600_000_000_000 + i))
        producer.flush()
        deadline = time.monotonic() + 20
        while len(receipts) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        producer.close()
        assert all(receipts[i][0] == pulsar.Result.Ok for i in range(count)), receipts
        return [(_id(receipts[i][1]), *sent[i]) for i in range(count)]  # type: ignore[index]
    finally:
        client.close()


@pytest.mark.parametrize(("batching", "asynchronous"), [(False, False), (False, True), (True, True), (True, False)],
                         ids=["single-send", "single-send_async", "batch-send_async", "batch-send"])  # fmt: skip
async def test_receipts_are_the_ids_the_sdk_receives_with_the_same_messages(cluster: Cluster, batching, asynchronous) -> None:
    namespace = await new_namespace(cluster.address, "produce")
    topic = f"persistent://{namespace}/ids"
    count = 30
    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s")
        sent = await asyncio.to_thread(_produce, cluster.urls[0], topic, batching, asynchronous, count)
        got = await _receive(consumer, count)
    assert [
        ((m.message_id().ledger_id(), m.message_id().entry_id(), m.message_id().partition(), m.message_id().batch_index()),
         m.data(), m.partition_key(), m.properties(), m.event_timestamp())
        for m in got
    ] == sent  # fmt: skip
    assert [m.sequence_id() for m in got] == list(range(count))
    ids = [s[0] for s in sent]
    assert ids == sorted(ids)  # order kept
    if batching and asynchronous:
        assert any(i[3] > 0 for i in ids), "the client sent no batch of more than one message"
    if not batching:
        assert all(i[3] == -1 for i in ids)


async def test_resends_across_a_reconnect_with_the_same_name_are_stored_once(cluster: Cluster) -> None:
    namespace = await new_namespace(cluster.address, "dedup")
    topic = f"persistent://{namespace}/dedup"

    def produce() -> tuple[int, list[tuple[int, int]]]:
        client = _client(cluster.urls[0])
        try:
            first = client.create_producer(topic, producer_name="fixed", batching_enabled=False)
            for i in range(5):
                first.send(b"m%d" % i, sequence_id=i)
            first.close()
            again = client.create_producer(topic, producer_name="fixed", batching_enabled=False)
            last = again.last_sequence_id()
            ids = [_id(again.send(b"m%d" % i, sequence_id=i))[:2] for i in (3, 4, 5)]  # 3 and 4 again
            again.close()
            return last, ids
        finally:
            client.close()

    last, ids = await asyncio.to_thread(produce)
    assert last == 4
    assert ids[0] == ids[1] == (-1, -1)  # resends: answered, not stored
    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        got = await _receive(consumer, 6)
        assert [m.data() for m in got] == [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"]
        assert [m.producer_name() for m in got] == ["fixed"] * 6
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=500)


async def test_a_delayed_pulsar_message_reaches_a_shared_sdk_consumer_no_earlier(cluster: Cluster) -> None:
    namespace = await new_namespace(cluster.address, "delay")
    topic = f"persistent://{namespace}/delayed"
    delay = 2.0
    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared)

        def produce() -> float:
            client = _client(cluster.urls[0])
            try:
                producer = client.create_producer(topic, batching_enabled=False)
                sent_at = time.monotonic()
                producer.send(b"later", deliver_after=timedelta(seconds=delay))
                producer.send(b"now")
                return sent_at
            finally:
                client.close()

        sent_at = await asyncio.to_thread(produce)
        first = await consumer.receive(timeout_millis=10_000)
        second = await consumer.receive(timeout_millis=10_000)
        arrived = time.monotonic() - sent_at
    assert (first.data(), second.data()) == (b"now", b"later")
    assert arrived >= delay - 0.05, arrived  # the broker's clock and ours: a few ms apart at most


async def test_keys_keep_to_one_partition_and_every_message_arrives(cluster: Cluster) -> None:
    namespace = await new_namespace(cluster.address, "keys")
    topic = f"persistent://{namespace}/routed"
    async with AdminClient(cluster.address, 10) as admin:
        await admin.create_topic(topic, partitions=4)

    def produce() -> list[tuple[str, int, bytes]]:
        client = _client(cluster.urls[0])
        try:
            producer = client.create_producer(topic, batching_enabled=False)
            out = []
            for i in range(40):
                key = f"key-{i % 8}"
                out.append((key, producer.send(b"%d" % i, partition_key=key).partition(), b"%d" % i))
            producer.close()
            return out
        finally:
            client.close()

    sent = await asyncio.to_thread(produce)
    partitions: dict[str, set[int]] = defaultdict(set)
    for key, partition, _ in sent:
        partitions[key].add(partition)
    assert all(len(p) == 1 for p in partitions.values()), partitions
    assert len({next(iter(p)) for p in partitions.values()}) > 1  # 8 keys over 4 partitions
    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        got = await _receive(consumer, 40)
    assert sorted((m.partition_key(), m.message_id().partition(), m.data()) for m in got) == sorted(sent)


CODECS = ["LZ4", "ZLib", "ZSTD", "SNAPPY"]


def _compressible(i: int) -> bytes:
    return b'{"level":"info","msg":"request %d served","path":"/api/v1/items"}' % i * 8


@pytest.mark.parametrize("codec", CODECS)
async def test_a_compressed_pulsar_batch_and_message_reach_the_sdk_decompressed(cluster: Cluster, codec: str) -> None:
    """pulsar-client compresses a batch (its records together) and a message sent alone;
    the SDK reads both with the payloads, keys and properties sent, and the stored
    entries are the compressed bytes (smaller than the payloads)."""
    namespace = await new_namespace(cluster.address, "codec")
    topic = f"persistent://{namespace}/compressed-{codec.lower()}"
    kind = getattr(pulsar.CompressionType, codec)

    def produce() -> list[tuple]:
        client = _client(cluster.urls[0])
        try:
            sent = []
            for batching in (True, False):
                producer = client.create_producer(topic, compression_type=kind, batching_enabled=batching,
                                                  batching_max_publish_delay_ms=50)  # fmt: skip
                for i in range(4):
                    payload, key, props = _compressible(i), f"k{i}", {"i": str(i), "batched": str(batching)}
                    producer.send_async(payload, None, partition_key=key, properties=props)
                    sent.append((payload, key, props))
                producer.flush()
                producer.close()
            return sent
        finally:
            client.close()

    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s")
        sent = await asyncio.to_thread(produce)
        got = await _receive(consumer, len(sent))
    assert [(m.data(), m.partition_key(), m.properties()) for m in got] == sent
    assert any(m.message_id().batch_index() > 0 for m in got[:4]), "the client sent no batch of more than one message"
    assert all(m.message_id().batch_index() == -1 for m in got[4:])
    async with AdminClient(cluster.address, 10) as admin:
        stats = await admin.topic_stats(topic)
    assert 0 < stats.storage_size < sum(len(p) for p, _, _ in sent) // 3  # stored compressed


@pytest.mark.parametrize("codec", CODECS)
async def test_an_sdk_compressed_batch_reaches_a_pulsar_client_consumer(cluster: Cluster, codec: str) -> None:
    namespace = await new_namespace(cluster.address, "sdkcodec")
    topic = f"persistent://{namespace}/sdk-{codec.lower()}"

    def consume(count: int) -> list[tuple]:
        client = _client(cluster.urls[0])
        try:
            consumer = client.subscribe(topic, "pulsar", initial_position=pulsar.InitialPosition.Earliest)
            out = []
            for _ in range(count):
                msg = consumer.receive(timeout_millis=20_000)
                consumer.acknowledge(msg)
                out.append((msg.data(), msg.partition_key(), msg.properties(), msg.message_id().batch_index()))
            return out
        finally:
            client.close()

    sent = []
    async with mg.Client(cluster.address) as sdk:
        producer = await sdk.create_producer(topic, compression_type=getattr(mg.CompressionType, codec),
                                             batching_max_publish_delay_ms=50)  # fmt: skip
        futures = []
        for i in range(5):
            payload, key, props = _compressible(i), f"k{i}", {"i": str(i)}
            futures.append(producer.send_async(payload, None, partition_key=key, properties=props))
            sent.append((payload, key, props))
        await producer.flush()
        await asyncio.gather(*futures)
        got = await asyncio.to_thread(consume, len(sent))
        sdk_consumer = await sdk.subscribe(topic, "sdk", initial_position=mg.InitialPosition.Earliest)
        back = await _receive(sdk_consumer, len(sent))
    assert [g[:3] for g in got] == sent
    assert any(g[3] > 0 for g in got), "the SDK sent no batch of more than one message"
    assert [(m.data(), m.partition_key(), m.properties()) for m in back] == sent


async def test_a_producer_at_a_broker_not_owning_the_topic_is_told_to_look_again(cluster: Cluster) -> None:
    namespace = await new_namespace(cluster.address, "owner")
    topic = f"persistent://{namespace}/t"
    await _own(cluster.ports[0], topic)
    async with await RawPulsarConnection.open("127.0.0.1", cluster.ports[1]) as conn:
        await conn.handshake()
        await conn.send(T(type=T.PRODUCER, producer=pb.CommandProducer(topic=topic, producer_id=1, request_id=5)))
        answer = (await conn.receive()).command
    assert answer.type == T.ERROR and (answer.error.request_id, answer.error.error) == (5, pb.ServiceNotReady)

    def produce() -> tuple[int, int, int, int]:
        client = _client(cluster.urls[1])  # looked up at the other broker: redirected to the owner
        try:
            return _id(client.create_producer(topic).send(b"there"))
        finally:
            client.close()

    mid = await asyncio.to_thread(produce)
    assert mid[0] >= 0 and mid[1] >= 0


async def test_a_message_over_the_size_limit_gets_send_error_and_nothing_is_stored(cluster: Cluster) -> None:
    namespace = await new_namespace(cluster.address, "big")
    topic = f"persistent://{namespace}/big"
    await _own(cluster.ports[0], topic)
    async with await RawPulsarConnection.open("127.0.0.1", cluster.ports[0]) as conn:
        limit = (await conn.handshake()).max_message_size
        await conn.send(T(type=T.PRODUCER, producer=pb.CommandProducer(topic=topic, producer_id=1, request_id=1)))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        meta = pb.MessageMetadata(producer_name="x", sequence_id=0, publish_time=1)
        send = T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0))
        await conn.send_bytes(encode_payload_command(send, meta, b"b" * limit))  # within the frame's padding
        refused = (await conn.receive()).command
        assert refused.type == T.SEND_ERROR and refused.send_error.error == pb.NotAllowedError
        assert "larger than the limit" in refused.send_error.message
        send.send.sequence_id = 1
        await conn.send_bytes(encode_payload_command(send, pb.MessageMetadata(producer_name="x", sequence_id=1, publish_time=1), b"ok"))
        assert (await conn.receive()).command.type == T.SEND_RECEIPT  # the connection goes on
    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        assert [m.data() for m in await _receive(consumer, 1)] == [b"ok"]


@pytest.mark.parametrize("batching", [False, True], ids=["single", "batched"])
async def test_ordering_keys_and_the_schema_version_reach_the_sdk_as_pulsar_client_sees_them(
    cluster: Cluster, batching: bool,
) -> None:
    """A producer with a schema (the broker gives it a version) and an ordering key per
    message: the SDK's consumer gets the same ordering key and schema version bytes as
    pulsar-client's own consumer."""
    namespace = await new_namespace(cluster.address, "produce")
    topic = f"persistent://{namespace}/schema-keys"
    count = 6

    def produce_and_read() -> list[tuple]:
        client = _client(cluster.urls[0])
        try:
            # The producer first: it registers the schema. A consumer with a schema on a
            # topic without one that is not idle (the SDK's consumer is on it) is refused,
            # as Pulsar's brokers refuse it ("Topic does not have schema to check").
            producer = client.create_producer(topic, schema=pulsar.schema.StringSchema(), batching_enabled=batching,
                                              batching_max_publish_delay_ms=20)  # fmt: skip
            consumer = client.subscribe(topic, "p", schema=pulsar.schema.StringSchema())
            for i in range(count):
                producer.send_async(f"m{i}", None, ordering_key=f"lane-{i % 2}")
            producer.flush()
            out = []
            for _ in range(count):
                m = consumer.receive(20_000)
                consumer.acknowledge(m)
                # pulsar-client hands both over as a str of the same bytes
                out.append((_id(m.message_id()), m.ordering_key().encode(), m.schema_version().encode("latin-1")))
            return out
        finally:
            client.close()

    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        seen = await asyncio.to_thread(produce_and_read)
        got = await _receive(consumer, count)
    assert [(_id(m.message_id()), m.ordering_key(), m.schema_version()) for m in got] == seen
    assert [s[1] for s in seen] == [b"lane-%d" % (i % 2) for i in range(count)]
    assert len(seen[0][2]) == 8  # a version was given and carried
