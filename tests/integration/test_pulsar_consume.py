"""Consuming through Pulsar's binary protocol door: pulsar-client (its C++ core) and raw
sockets against one broker with bookies, the messages produced by Magnetar's SDK
(``EntryBatch`` entries, which the door sends as Pulsar's single and batch messages).

The tests before the broker's restart (each in a namespace of its own on the run's shared
cluster) run at the same time (``magnetar.testing.together``)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.keyhash import key_hash
from magnetar.common.netutil import free_port
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.proto.v1.broker_pb2 import TenantInfo
from magnetar.protocol import commands
from magnetar.testing.auth import Keys
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import BookieProcess, BrokerProcess, ServiceFactory
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection
from magnetar.testing.together import together

pytestmark = pytest.mark.integration

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
Type = pb.BaseCommand.Type

# One logger for every client of the run: the C++ core keeps the first one it is given
# (the same one tests/integration/test_pulsar_protocol.py hands over).


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


async def _topic(cluster: Cluster, name: str) -> str:
    return f"persistent://{await new_namespace(cluster.address, 'consume')}/{name}"


async def produce(cluster: Cluster, topic: str, count: int, *, batching: bool, key=None, start: int = 0,
                  batch: int = 10, ordering=None, **extra) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """Messages ``start .. start+count-1`` (payload ``m<n>``, ordering key ``ordering[n]``
    when given) through our SDK; returns the ids it got back as (ledger, entry, partition,
    batch index)."""
    async with mg.Client(cluster.address) as client:
        producer = await client.create_producer(
            topic, batching_enabled=batching, batching_max_messages=batch, batching_max_publish_delay_ms=50,
        )  # fmt: skip
        futures = [
            await producer.enqueue(f"m{n}".encode(), partition_key=key(n) if key else None,
                                   ordering_key=ordering[n] if ordering else None, **extra)  # fmt: skip
            for n in range(start, start + count)
        ]
        await producer.flush()
        ids = [await f for f in futures]
        await producer.close()
    return [(i.ledger_id(), i.entry_id(), i.partition(), i.batch_index()) for i in ids]


async def _poll(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _id(msg: pulsar.Message) -> tuple[int, int, int, int]:
    m = msg.message_id()
    return m.ledger_id(), m.entry_id(), m.partition(), m.batch_index()


def _receive_all(consumer, count: int, timeout_ms: int = 10_000) -> list[pulsar.Message]:
    return [consumer.receive(timeout_ms) for _ in range(count)]


def _share(consumers: list, total: int, timeout_s: float = 20.0) -> list[tuple[int, pulsar.Message]]:
    """(consumer index, message) for ``total`` messages received by ``consumers`` between
    them, each message acknowledged when received."""
    got: list[tuple[int, pulsar.Message]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < total and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            while True:
                try:
                    m = c.receive(50)
                except pulsar.Timeout:
                    break
                got.append((i, m))
                c.acknowledge(m)
    return got


def _nothing_more(consumer, wait_ms: int = 300) -> bool:
    try:
        consumer.receive(wait_ms)
    except pulsar.Timeout:
        return True
    return False


# -- delivery ---------------------------------------------------------------------------
@together
async def test_single_and_batched_messages_arrive_with_their_ids_and_metadata(cluster: Cluster) -> None:
    topic = await _topic(cluster, "meta")
    single = await produce(
        cluster, topic, 1, batching=False, key=lambda n: "k-single", properties={"a": "1", "b": "two"},
        event_timestamp=1_700_000_000_123,
    )  # fmt: skip
    batched = await produce(cluster, topic, 10, batching=True, key=lambda n: f"k{n}", start=1, batch=10)
    assert single[0][3] == -1 and [i[3] for i in batched] == list(range(10))  # one entry of 10

    def consume() -> list[pulsar.Message]:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            return _receive_all(consumer, 11)
        finally:
            client.close()

    started = int(time.time() * 1000)
    got = await asyncio.to_thread(consume)
    assert [m.data() for m in got] == [f"m{n}".encode() for n in range(11)]
    assert [_id(m) for m in got] == single + batched
    first = got[0]
    assert first.properties() == {"a": "1", "b": "two"}
    assert first.partition_key() == "k-single"
    assert first.event_timestamp() == 1_700_000_000_123
    assert [m.partition_key() for m in got[1:]] == [f"k{n}" for n in range(1, 11)]
    assert all(0 < m.publish_timestamp() <= started for m in got)
    assert all(m.redelivery_count() == 0 for m in got)


@together
async def test_the_partitions_of_a_partitioned_topic_give_ids_with_their_index(cluster: Cluster) -> None:
    topic = await _topic(cluster, "parts")
    async with AdminClient(cluster.address, 10) as admin:
        await admin.create_topic(topic, partitions=3)
    ids = await produce(cluster, topic, 60, batching=True, batch=5, key=lambda n: f"k{n % 7}")
    assert {i[2] for i in ids} == {0, 1, 2}

    def consume() -> list[pulsar.Message]:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            got = _receive_all(consumer, 60)
            assert _nothing_more(consumer)
            return got
        finally:
            client.close()

    got = await asyncio.to_thread(consume)
    by_payload = dict(zip((f"m{n}".encode() for n in range(60)), ids, strict=True))
    assert {m.data(): _id(m) for m in got} == by_payload
    assert all(m.topic_name() == f"{topic}-partition-{_id(m)[2]}" for m in got)


@together
async def test_ordering_keys_the_sdk_sends_reach_pulsar_client_and_route_key_shared(cluster: Cluster) -> None:
    """Our SDK sends 24 messages with one partition key and 8 ordering keys (batched and
    not): pulsar-client's consumers read each message's ordering key, and Key_Shared keeps
    each ordering key on one consumer while spreading the keys over both (the partition
    key alone would put every message on one)."""
    topic = await _topic(cluster, "ordering")
    lanes = {n: f"lane-{n % 8}".encode() for n in range(24)}
    client = _client(cluster.url)
    try:
        consumers = [  # both subscribed before anything is sent, so the keys split between them at once
            await asyncio.to_thread(client.subscribe, topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared,
                                    consumer_name=f"c{i}")
            for i in range(2)
        ]  # fmt: skip
        await produce(cluster, topic, 12, batching=False, key=lambda n: "same", ordering=lanes)
        await produce(cluster, topic, 12, batching=True, key=lambda n: "same", start=12, batch=4, ordering=lanes)
        got = await asyncio.to_thread(_share, consumers, 24)
    finally:
        await asyncio.to_thread(client.close)
    assert sorted(m.data() for _, m in got) == sorted(f"m{n}".encode() for n in range(24))
    assert all(m.ordering_key().encode() == lanes[int(m.data()[1:])] for _, m in got)
    owners: dict[str, set[int]] = {}
    for i, m in got:
        owners.setdefault(m.ordering_key(), set()).add(i)
    assert all(len(o) == 1 for o in owners.values()), owners  # an ordering key on one consumer only
    assert {i for o in owners.values() for i in o} == {0, 1}, owners  # spread over both


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.Failover])
@together
async def test_two_consumers_of_a_shared_or_failover_subscription_get_everything_once(cluster: Cluster, kind) -> None:
    topic = await _topic(cluster, "two")
    ids = await produce(cluster, topic, 200, batching=True, batch=20)

    def consume() -> tuple[list[bytes], list[int]]:
        client = _client(cluster.url)
        try:
            consumers = [
                client.subscribe(topic, "s", consumer_type=kind, initial_position=pulsar.InitialPosition.Earliest,
                                 consumer_name=f"c{i}", receiver_queue_size=50)
                for i in range(2)
            ]  # fmt: skip
            received = _share(consumers, 200)
            return [m.data() for _, m in received], [sum(1 for i, _ in received if i == n) for n in range(2)]
        finally:
            client.close()

    got, per = await asyncio.to_thread(consume)
    assert sorted(got) == sorted(f"m{n}".encode() for n in range(200))
    assert len(ids) == 200
    if kind == pulsar.ConsumerType.Failover:
        assert sorted(per) == [0, 200]  # one active consumer on a non-partitioned topic
        order = [int(b[1:]) for b in got]
        assert order == sorted(order)


@together
async def test_key_shared_keeps_each_keys_order_on_one_consumer(cluster: Cluster) -> None:
    topic = await _topic(cluster, "keys")
    client = _client(cluster.url)
    try:
        # Both attached before anything is produced: each key has one consumer throughout.
        # 30 keys: the hash ranges depend on the consumers' random names, and with 6 keys
        # all of them fell to one consumer about once in 32 runs.
        consumers = await asyncio.to_thread(lambda: [
            client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, receiver_queue_size=20)
            for _ in range(2)
        ])  # fmt: skip
        await produce(cluster, topic, 300, batching=True, batch=10, key=lambda n: f"key{n % 30}")
        received = await asyncio.to_thread(_share, consumers, 300)
    finally:
        await asyncio.to_thread(client.close)
    seen: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, m in received:
        seen[m.partition_key()].append((i, int(m.data()[1:])))
    assert sorted(seen) == sorted(f"key{k}" for k in range(30))
    assert {i for i, _ in received} == {0, 1}
    for key, got in seen.items():
        assert len({i for i, _ in got}) == 1, f"{key} went to both consumers"
        numbers = [n for _, n in got]
        assert numbers == sorted(numbers) and len(numbers) == 10, key


# -- acknowledgements -------------------------------------------------------------------
@together
async def test_after_a_resubscribe_only_the_unacked_come_back_counted(cluster: Cluster) -> None:
    """Individual acks of single messages and batch-index acks of batched ones: after the
    consumer closes, a new one gets exactly what was not acknowledged, redelivery 1."""
    topic = await _topic(cluster, "acks")
    await produce(cluster, topic, 10, batching=False)
    await produce(cluster, topic, 20, batching=True, batch=10, start=10)  # two entries of 10

    def first_round() -> None:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                        initial_position=pulsar.InitialPosition.Earliest,
                                        batch_index_ack_enabled=True)  # fmt: skip
            for m in _receive_all(consumer, 30):
                if int(m.data()[1:]) % 3 == 0:
                    consumer.acknowledge(m)
            consumer.close()  # flushes the grouped acks first
        finally:
            client.close()

    def second_round() -> list[pulsar.Message]:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                        batch_index_ack_enabled=True)  # fmt: skip
            got = _receive_all(consumer, 20)
            assert _nothing_more(consumer)
            return got
        finally:
            client.close()

    await asyncio.to_thread(first_round)
    got = await asyncio.to_thread(second_round)
    assert sorted(int(m.data()[1:]) for m in got) == [n for n in range(30) if n % 3]
    assert {m.redelivery_count() for m in got} == {1}


@together
async def test_a_cumulative_ack_acknowledges_everything_before(cluster: Cluster) -> None:
    topic = await _topic(cluster, "cumulative")
    await produce(cluster, topic, 20, batching=False)

    def round_(ack_through: int | None) -> list[int]:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            got = _receive_all(consumer, 20 if ack_through is not None else 9)
            if ack_through is not None:
                consumer.acknowledge_cumulative(got[ack_through])
            else:
                assert _nothing_more(consumer)
            consumer.close()
            return [int(m.data()[1:]) for m in got]
        finally:
            client.close()

    await asyncio.to_thread(round_, 10)
    assert await asyncio.to_thread(round_, None) == list(range(11, 20))


@together
async def test_a_cumulative_ack_inside_a_batch_acknowledges_up_to_that_message(cluster: Cluster) -> None:
    topic = await _topic(cluster, "cumulative-batch")
    await produce(cluster, topic, 5, batching=False)
    await produce(cluster, topic, 10, batching=True, batch=10, start=5)  # one entry of 10

    def round_(ack_through: int | None) -> list[tuple[int, int]]:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest,
                                        batch_index_ack_enabled=True)  # fmt: skip
            got = _receive_all(consumer, 15 if ack_through is not None else 6)
            if ack_through is not None:
                consumer.acknowledge_cumulative(got[ack_through])
            else:
                assert _nothing_more(consumer)
            consumer.close()
            return [(int(m.data()[1:]), m.redelivery_count()) for m in got]
        finally:
            client.close()

    await asyncio.to_thread(round_, 8)  # m8: index 3 of the batch
    assert await asyncio.to_thread(round_, None) == [(n, 1) for n in range(9, 15)]


@together
async def test_negative_acks_and_ack_timeouts_redeliver_with_the_count(cluster: Cluster) -> None:
    topic = await _topic(cluster, "nack")
    await produce(cluster, topic, 3, batching=False)

    def consume() -> tuple[list[tuple[bytes, int]], list[tuple[bytes, int]]]:
        client = _client(cluster.url)
        try:
            nacking = client.subscribe(topic, "nack", consumer_type=pulsar.ConsumerType.Shared,
                                       initial_position=pulsar.InitialPosition.Earliest,
                                       negative_ack_redelivery_delay_ms=100)  # fmt: skip
            seen = []
            for _ in range(9):  # each message three times: counts 0, 1, 2
                m = nacking.receive(10_000)
                seen.append((m.data(), m.redelivery_count()))
                if m.redelivery_count() < 2:
                    nacking.negative_acknowledge(m)
                else:
                    nacking.acknowledge(m)
            timing_out = client.subscribe(topic, "timeout", consumer_type=pulsar.ConsumerType.Shared,
                                          initial_position=pulsar.InitialPosition.Earliest,
                                          unacked_messages_timeout_ms=10_000)  # fmt: skip  # the client's least
            timed = []
            for _ in range(6):
                m = timing_out.receive(30_000)
                timed.append((m.data(), m.redelivery_count()))
                if m.redelivery_count() >= 1:
                    timing_out.acknowledge(m)
            return seen, timed
        finally:
            client.close()

    seen, timed = await asyncio.to_thread(consume)
    for n in range(3):
        assert sorted(c for d, c in seen if d == f"m{n}".encode()) == [0, 1, 2]
        assert sorted(c for d, c in timed if d == f"m{n}".encode()) == [0, 1]


# -- readers, seeks, last ids -----------------------------------------------------------
@together
async def test_readers_start_where_asked(cluster: Cluster) -> None:
    topic = await _topic(cluster, "readers")
    ids = await produce(cluster, topic, 10, batching=False)

    def read() -> dict[str, list[int]]:
        client = _client(cluster.url)
        out: dict[str, list[int]] = {}
        try:
            def drain(reader) -> list[int]:
                got = []
                while reader.has_message_available():
                    got.append(int(reader.read_next(5000).data()[1:]))
                reader.close()
                return got

            out["earliest"] = drain(client.create_reader(topic, pulsar.MessageId.earliest))
            out["latest"] = drain(client.create_reader(topic, pulsar.MessageId.latest))
            ledger, entry, _, _ = ids[4]
            at = pulsar.MessageId(-1, ledger, entry, -1)
            out["after 4"] = drain(client.create_reader(topic, at))
            out["from 4"] = drain(client.create_reader(topic, at, start_message_id_inclusive=True))
            return out
        finally:
            client.close()

    out = await asyncio.to_thread(read)
    assert out == {"earliest": list(range(10)), "latest": [], "after 4": list(range(5, 10)), "from 4": list(range(4, 10))}


@together
async def test_a_reader_reads_a_batch_to_its_last_message(cluster: Cluster) -> None:
    """The last message id names the last message of the last batch, so that
    ``has_message_available`` holds until the reader has read that one."""
    topic = await _topic(cluster, "batch-reader")
    ids = await produce(cluster, topic, 10, batching=True, batch=10)

    def read() -> tuple[tuple[int, int, int], list[int]]:
        client = _client(cluster.url)
        try:
            reader = client.create_reader(topic, pulsar.MessageId.earliest)
            got = []
            while reader.has_message_available():
                got.append(int(reader.read_next(5000).data()[1:]))
            consumer = client.subscribe(topic, "s")
            last = consumer.get_last_message_id()
            return (last.ledger_id(), last.entry_id(), last.batch_index()), got
        finally:
            client.close()

    last, got = await asyncio.to_thread(read)
    assert last == (ids[-1][0], ids[-1][1], ids[-1][3]) == (ids[0][0], ids[0][1], 9)
    assert got == list(range(10))


@together
async def test_seek_to_an_id_and_to_a_time_and_the_last_message_id(cluster: Cluster) -> None:
    topic = await _topic(cluster, "seek")
    first = await produce(cluster, topic, 5, batching=False)
    between = int(time.time() * 1000)
    await asyncio.sleep(0.05)  # publish times on either side of ``between``
    second = await produce(cluster, topic, 5, batching=False, start=5)

    def consume() -> dict[str, object]:
        client = _client(cluster.url)
        out: dict[str, object] = {}
        try:
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            last = consumer.get_last_message_id()
            out["last"] = (last.ledger_id(), last.entry_id())
            got = _receive_all(consumer, 10)
            for m in got:
                consumer.acknowledge(m)
            ledger, entry, _, _ = first[2]
            consumer.seek(pulsar.MessageId(-1, ledger, entry, -1))
            out["after id"] = [int(m.data()[1:]) for m in _receive_all(consumer, 7)]
            consumer.seek(between)
            out["after time"] = [int(m.data()[1:]) for m in _receive_all(consumer, 5)]
            out["nothing more"] = _nothing_more(consumer)
            return out
        finally:
            client.close()

    out = await asyncio.to_thread(consume)
    assert out["last"] == second[-1][:2]
    # The broker starts again at the entry sought; the C++ client drops the id it sought
    # itself (its startMessageIdInclusive is off), as it does against Pulsar.
    assert out["after id"] == list(range(3, 10))
    assert out["after time"] == list(range(5, 10))
    assert out["nothing more"]


# -- flow control -----------------------------------------------------------------------
async def _subscribed(conn: RawPulsarConnection, topic: str, subscription: str, consumer_id: int = 1) -> None:
    await conn.send(pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
        topic=topic, subscription=subscription, subType=pb.CommandSubscribe.Exclusive, consumer_id=consumer_id,
        request_id=1, initialPosition=pb.CommandSubscribe.Earliest,
    )))  # fmt: skip
    answer = await conn.receive()
    assert answer.command.type == Type.SUCCESS, answer.command


@together
async def test_failover_consumers_hear_which_one_is_active(cluster: Cluster) -> None:
    topic = await _topic(cluster, "active")

    async def subscribe(conn: RawPulsarConnection, name: str) -> None:
        await conn.send(pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="s", subType=pb.CommandSubscribe.Failover, consumer_id=5, request_id=1,
            consumer_name=name,
        )))  # fmt: skip
        assert (await conn.receive()).command.type == Type.SUCCESS

    async def told(conn: RawPulsarConnection) -> tuple[int, bool]:
        change = (await conn.receive()).command
        assert change.type == Type.ACTIVE_CONSUMER_CHANGE, change
        return change.active_consumer_change.consumer_id, change.active_consumer_change.is_active

    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as b:
        await b.handshake()
        await subscribe(b, "b")
        assert await told(b) == (5, True)
        async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as a:
            await a.handshake()
            await subscribe(a, "a")  # sorts first: it takes over
            assert await told(a) == (5, True)
            assert await told(b) == (5, False)
        assert await told(b) == (5, True)  # a's socket closed


async def _until_pong(conn: RawPulsarConnection) -> list[pb.BaseCommand]:
    """What the broker sent before it answered a PING (sent now)."""
    await conn.send(commands.ping())
    before = []
    while (frame := await conn.receive()).command.type != Type.PONG:
        before.append(frame.command)
    return before


@together
async def test_the_broker_sends_no_more_messages_than_the_permits(cluster: Cluster) -> None:
    topic = await _topic(cluster, "permits")
    await produce(cluster, topic, 20, batching=False)
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        await _subscribed(conn, topic, "s")
        await conn.send(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=5)))
        got = [await conn.receive() for _ in range(5)]
        assert [f.command.type for f in got] == [Type.MESSAGE] * 5
        assert [f.payload for f in got] == [f"m{n}".encode() for n in range(5)]
        async with AdminClient(cluster.address, 10) as admin:
            stats = await admin.topic_stats(topic)
        (sub,) = stats.subscriptions
        assert (sub.msg_out_counter, sub.consumer_stats[0].available_permits) == (5, 0)
        assert await _until_pong(conn) == []  # nothing beyond the permits came
        await conn.send(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=3)))
        more = [await conn.receive() for _ in range(3)]
        assert [f.payload for f in more] == [f"m{n}".encode() for n in range(5, 8)]
        assert await _until_pong(conn) == []


@together
async def test_a_consumer_with_a_small_or_no_receiver_queue_gets_everything(cluster: Cluster) -> None:
    topic = await _topic(cluster, "queues")
    await produce(cluster, topic, 30, batching=False)

    def consume(size: int, subscription: str) -> list[int]:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, subscription, receiver_queue_size=size,
                                        initial_position=pulsar.InitialPosition.Earliest)  # fmt: skip
            got = []
            for _ in range(30):
                # A consumer without a receiver queue cannot receive with a timeout.
                m = consumer.receive() if size == 0 else consumer.receive(10_000)
                got.append(int(m.data()[1:]))
                consumer.acknowledge(m)
            return got
        finally:
            client.close()

    assert await asyncio.to_thread(consume, 5, "five") == list(range(30))
    assert await asyncio.to_thread(consume, 0, "zero") == list(range(30))


# -- closing ----------------------------------------------------------------------------
@together
async def test_unsubscribe_deletes_the_subscription(cluster: Cluster) -> None:
    topic = await _topic(cluster, "unsub")
    await produce(cluster, topic, 3, batching=False)

    def unsubscribe() -> None:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "gone", initial_position=pulsar.InitialPosition.Earliest)
            consumer.receive(10_000)
            consumer.unsubscribe()
        finally:
            client.close()

    await asyncio.to_thread(unsubscribe)
    async with AdminClient(cluster.address, 10) as admin:
        stats = await admin.topic_stats(topic)
    assert [s.name for s in stats.subscriptions] == []


@together
async def test_an_unload_closes_the_consumer_and_it_goes_on_without_loss(cluster: Cluster) -> None:
    topic = await _topic(cluster, "unload")
    closes_before = cluster.broker.log_path.read_text().count("closing consumer")  # the broker is shared
    await produce(cluster, topic, 10, batching=False)
    client = _client(cluster.url)
    try:
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        first = await asyncio.to_thread(_receive_all, consumer, 10)
        for m in first[:5]:
            consumer.acknowledge(m)
        async with AdminClient(cluster.address, 10) as admin:
            async def acked() -> bool:  # the client sends its acks grouped, within 100 ms
                (sub,) = (await admin.topic_stats(topic)).subscriptions
                return sub.unacked == 5

            await _poll(acked)
            await admin.unload_topic(topic)
        await produce(cluster, topic, 10, batching=False, start=10)
        got: list[int] = []

        def rest() -> None:
            deadline = time.monotonic() + 20
            while len(set(got)) < 15 and time.monotonic() < deadline:
                try:
                    m = consumer.receive(500)
                except pulsar.Timeout:
                    continue
                got.append(int(m.data()[1:]))
                consumer.acknowledge(m)

        await asyncio.to_thread(rest)
    finally:
        await asyncio.to_thread(client.close)
    # the five unacked were delivered again after the reconnection, then the new ten
    assert sorted(set(got)) == list(range(5, 20))
    closes = cluster.broker.log_path.read_text().count("closing consumer")
    assert closes > closes_before, "the broker did not close the consumer"


# -- bad input --------------------------------------------------------------------------
@together
async def test_bad_consumer_commands_get_an_error_and_the_connection_goes_on(cluster: Cluster) -> None:
    topic = await _topic(cluster, "bad")
    await produce(cluster, topic, 1, batching=False)
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        await conn.send(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=77, messagePermits=5)))
        error = (await conn.receive()).command
        assert error.type == Type.ERROR and "no consumer 77" in error.error.message

        await conn.send(pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="bad/name", subType=pb.CommandSubscribe.Shared, consumer_id=2, request_id=9,
        )))  # fmt: skip
        error = (await conn.receive()).command
        assert (error.type, error.error.request_id) == (Type.ERROR, 9)
        assert "subscription name" in error.error.message, error.error.message

        await _subscribed(conn, topic, "s")
        await conn.send(pb.BaseCommand(type=Type.ACK, ack=pb.CommandAck(
            consumer_id=1, ack_type=pb.CommandAck.Individual, message_id=[commands.message_id(987654, 3)],
        )))  # fmt: skip
        error = (await conn.receive()).command
        assert error.type == Type.ERROR and "987654" in error.error.message, error

        await conn.send(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=1)))
        delivered = await conn.receive()
        assert (delivered.command.type, delivered.payload) == (Type.MESSAGE, b"m0")
    assert cluster.broker.alive
    assert "Traceback" not in cluster.broker.log_tail(400)


@together
async def test_closing_the_socket_gives_back_what_its_consumer_held(cluster: Cluster) -> None:
    topic = await _topic(cluster, "socket")
    await produce(cluster, topic, 3, batching=False)
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        await _subscribed(conn, topic, "s")
        await conn.send(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=3)))
        assert [(await conn.receive()).command.type for _ in range(3)] == [Type.MESSAGE] * 3
    async with AdminClient(cluster.address, 10) as admin:
        async def released() -> bool:
            (sub,) = (await admin.topic_stats(topic)).subscriptions
            return sub.consumers == 0 and sub.unacked == 0 and sub.backlog == 3

        await _poll(released)


# -- last: restarts the module's broker ---------------------------------------------------
async def test_redelivery_counts_survive_a_broker_restart(cluster: Cluster) -> None:
    topic = await _topic(cluster, "restart")
    await produce(cluster, topic, 5, batching=False)

    def first_round() -> None:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                        initial_position=pulsar.InitialPosition.Earliest)  # fmt: skip
            got = _receive_all(consumer, 5)
            consumer.acknowledge(got[0])
            consumer.close()
        finally:
            client.close()

    def second_round() -> list[tuple[int, int]]:
        client = _client(cluster.url)
        try:
            consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
            got = [(int(m.data()[1:]), m.redelivery_count()) for m in _receive_all(consumer, 4)]
            assert _nothing_more(consumer)
            return got
        finally:
            client.close()

    await asyncio.to_thread(first_round)
    await asyncio.to_thread(cluster.broker.restart)
    assert sorted(await asyncio.to_thread(second_round)) == [(n, 1) for n in range(1, 5)]


async def test_with_authorization_on_subscribe_needs_consume_on_the_namespace(
    keys: Keys, bookie_factory: ServiceFactory[BookieProcess], broker_factory: ServiceFactory[BrokerProcess],
) -> None:  # fmt: skip
    """The door makes the gRPC door's decision with the role of CONNECT's token."""
    bookie_factory(**keys.settings())
    port = free_port()
    broker = broker_factory(
        ensemble_size=1, write_quorum=1, ack_quorum=1, protocol_port=port,
        **keys.settings(authorization_enabled=True, broker_client_auth_token_file=str(keys.service_token_file)),
    )  # fmt: skip
    async with AdminClient(broker.address, 15, token=lambda: keys.service_token) as admin:
        await admin.create_tenant("acme", TenantInfo(admin_roles=["acme-admin"], allowed_clusters=["standalone"]))
        await admin.create_namespace("acme/orders")
        await admin.grant_permission("acme/orders", "reader", ["consume"])
        topic = "persistent://acme/orders/in"
        await admin.create_topic(topic)

    async def subscribe(role: str) -> pb.BaseCommand:
        async with await RawPulsarConnection.open("127.0.0.1", port) as conn:
            await conn.handshake(token=keys.token(role))
            await conn.send(pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
                topic=topic, subscription="s", subType=pb.CommandSubscribe.Shared, consumer_id=1, request_id=3,
            )))  # fmt: skip
            return (await conn.receive()).command

    refused = await subscribe("stranger")
    assert (refused.type, refused.error.error, refused.error.request_id) == (Type.ERROR, pb.AuthorizationError, 3)
    async with AdminClient(broker.address, 15, token=lambda: keys.service_token) as admin:
        assert [s.name for s in (await admin.topic_stats(topic)).subscriptions] == []  # nothing made
    assert (await subscribe("reader")).type == Type.SUCCESS


async def test_key_shared_sticky_ranges_from_the_real_client(cluster: Cluster) -> None:
    """Key_Shared STICKY: pulsar-client consumers declaring hash ranges get the keys whose
    hash (Murmur3_32Hash modulo 65536, as Pulsar's) their range holds; a range overlapping
    another consumer's is refused at once with ConsumerAssignError."""
    topic = await _topic(cluster, "sticky")
    keys = [f"k{i}" for i in range(30)]

    def sticky(*ranges: tuple[int, int]) -> pulsar.ConsumerKeySharedPolicy:
        return pulsar.ConsumerKeySharedPolicy(key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=list(ranges))

    def run() -> tuple[dict[str, set[str]], str, float]:
        client = _client(cluster.url)
        try:
            consumers = {
                name: client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, key_shared_policy=sticky(r))
                for name, r in (("low", (0, 32767)), ("high", (32768, 65535)))
            }  # fmt: skip
            started = time.monotonic()
            try:
                client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.KeyShared, key_shared_policy=sticky((30000, 40000)))
                refused = "created"
            except pulsar.PulsarException as exc:
                refused = type(exc).__name__
            took = time.monotonic() - started
            producer = client.create_producer(topic, batching_enabled=False)
            for key in keys:
                producer.send(key.encode(), partition_key=key)
            got: dict[str, set[str]] = {}
            for name, consumer in consumers.items():
                got[name] = set()
                while True:  # until it has nothing more
                    try:
                        msg = consumer.receive(timeout_millis=500)
                    except pulsar.Timeout:
                        break
                    got[name].add(msg.partition_key())
                    consumer.acknowledge(msg)
            return got, refused, took
        finally:
            client.close()

    got, refused, took = await asyncio.to_thread(run)
    assert refused == "ConsumerAssignError" and took < 5, (refused, took)
    assert got == {
        "low": {k for k in keys if key_hash(k) % 65536 <= 32767},
        "high": {k for k in keys if key_hash(k) % 65536 > 32767},
    }
