"""pulsar-client's own client-side policies through the Pulsar door: negative acks with
their redelivery delay, the ack timeout, and the dead-letter policy (the C++ client
counts redeliveries by the broker's ``redelivery_count``, produces the message to the
dead-letter topic through the door, with ``initial_subscription_name`` creating that
topic's subscription, and acknowledges the original).

The retry letter topic is the client's alone in Pulsar (the Java client's
``reconsumeLater``); the Python client 3.13 over the C++ core has none (no
``reconsume_later``). A test does on the wire what the Java client does, with
pulsar-client's primitives: one Shared consumer of the topic and its retry letter topic
``<topic>-<subscription>-RETRY``, a producer to that topic of a copy with
``RECONSUMETIMES``, ``DELAY_TIME``, ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` and the
delay as its deliver-after, then the ack; past the maximum, the copy goes to
``<topic>-<subscription>-DLQ`` instead.

The run's shared cluster (``shared_cluster``): 2 bookies and a broker; each test in a
namespace of its own, all at the same time (``magnetar.testing.together``)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pulsar
import pytest

from magnetar.client.admin import AdminClient
from magnetar.common.errors import TopicNotFound
from magnetar.proto.pulsar import pulsar_api_pb2 as ppb
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection
from magnetar.testing.together import together

pytestmark = pytest.mark.integration



@pytest.fixture(scope="module")
def broker(shared_cluster):  # type: ignore[no-untyped-def]
    """The run's shared cluster's broker (2 bookies, E=Qw=Qa=2); each test has its own namespace."""
    return shared_cluster.broker


def _client(broker) -> pulsar.Client:  # type: ignore[no-untyped-def]
    return pulsar_client(broker.pulsar_url, operation_timeout_seconds=15, connection_timeout_ms=5000)


def _id(mid: pulsar.MessageId) -> tuple[int, int, int, int]:
    return mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()


def _send(client: pulsar.Client, topic: str, count: int, *, batching: bool) -> dict[bytes, tuple]:
    """``count`` messages with a key and properties; payload -> the id its receipt carried."""
    producer = client.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=20)
    receipts: dict[bytes, tuple] = {}
    for i in range(count):
        payload = b"p%d" % i
        producer.send_async(payload, lambda res, mid, p=payload: receipts.__setitem__(p, (res, mid)),
                            properties={"i": str(i)}, partition_key=f"k{i}")  # fmt: skip
    producer.flush()
    producer.close()
    assert all(res == pulsar.Result.Ok for res, _ in receipts.values()) and len(receipts) == count
    return {p: _id(mid) for p, (_, mid) in receipts.items()}


def _wait_stored(client: pulsar.Client, topic: str, count: int, timeout_s: float = 20.0) -> None:
    """Wait until ``topic`` holds ``count`` messages (read by readers, which leave no
    subscription behind)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        stored = 0
        try:
            while True:
                reader.read_next(timeout_millis=500)
                stored += 1
        except pulsar.Timeout:
            pass
        reader.close()
        if stored >= count:
            return
        assert time.monotonic() < deadline, f"{topic} holds {stored} of {count} messages"


@pytest.mark.parametrize("batching", [False, True], ids=["single", "batched"])
@together
async def test_negative_acks_end_each_message_in_the_dead_letter_topic_once(broker, batching: bool) -> None:
    namespace = await new_namespace(broker.address, "dlq")
    topic, dlq = f"persistent://{namespace}/orders", f"persistent://{namespace}/orders-dlq"
    count, max_redeliver = 6, 2

    def run() -> tuple[dict[bytes, tuple], list[tuple[bytes, int]], list[pulsar.Message]]:
        client = _client(broker)
        try:
            consumer = client.subscribe(
                topic, "work", consumer_type=pulsar.ConsumerType.Shared, negative_ack_redelivery_delay_ms=100,
                dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(
                    max_redeliver_count=max_redeliver, dead_letter_topic=dlq, initial_subscription_name="dead",
                ),
            )  # fmt: skip
            sent = _send(client, topic, count, batching=batching)
            seen: list[tuple[bytes, int]] = []
            deadline = time.monotonic() + 30
            # Each message: delivered max_redeliver + 1 times, then moved (never handed out again).
            while len(seen) < count * (max_redeliver + 1) and time.monotonic() < deadline:
                try:
                    msg = consumer.receive(timeout_millis=500)
                except pulsar.Timeout:
                    continue
                seen.append((msg.data(), msg.redelivery_count()))
                consumer.negative_acknowledge(msg)
            _wait_stored(client, dlq, count)
            # The dead-letter topic's subscription exists since the client's producer made
            # it: a consumer coming after the moves, at the default initial position
            # (Latest), gets every message.
            dead = client.subscribe(dlq, "dead")
            moved = []
            while True:
                try:
                    moved.append(dead.receive(timeout_millis=3000))
                except pulsar.Timeout:
                    break
            for msg in moved:
                dead.acknowledge(msg)
            try:  # nothing more is handed out on the original subscription: all acknowledged
                extra = consumer.receive(timeout_millis=1500)
                seen.append((extra.data(), extra.redelivery_count()))
            except pulsar.Timeout:
                pass
            return sent, seen, moved
        finally:
            client.close()

    sent, seen, moved = await asyncio.to_thread(run)
    assert sorted(seen) == sorted((p, n) for p in sent for n in range(max_redeliver + 1))
    assert sorted(m.data() for m in moved) == sorted(sent)  # each exactly once
    for msg in moved:
        props = msg.properties()
        i = int(msg.data()[1:])
        assert props["i"] == str(i) and msg.partition_key() == f"k{i}"
        assert props["REAL_TOPIC"] == topic
        ledger, entry, partition, batch = sent[msg.data()]
        assert props["ORIGIN_MESSAGE_ID"] == f"({ledger},{entry},{partition},{batch})"


@together
async def test_unacknowledged_messages_come_back_after_the_ack_timeout(broker) -> None:
    namespace = await new_namespace(broker.address, "acktimeout")
    topic = f"persistent://{namespace}/slow"
    count = 5

    def run() -> tuple[dict[bytes, tuple], list[tuple[bytes, int, float]], float]:
        client = _client(broker)
        try:
            # 10 s: the C++ client's least ack timeout.
            consumer = client.subscribe(topic, "work", consumer_type=pulsar.ConsumerType.Shared,
                                        unacked_messages_timeout_ms=10_000)  # fmt: skip
            sent = _send(client, topic, count, batching=False)
            got: list[tuple[bytes, int, float]] = []
            start = time.monotonic()
            while len(got) < 2 * count and time.monotonic() - start < 40:
                try:
                    msg = consumer.receive(timeout_millis=500)
                except pulsar.Timeout:
                    continue
                got.append((msg.data(), msg.redelivery_count(), time.monotonic() - start))
                if msg.redelivery_count() > 0:
                    consumer.acknowledge(msg)  # the second time: acknowledged
            try:
                extra = consumer.receive(timeout_millis=1500)
                got.append((extra.data(), extra.redelivery_count(), time.monotonic() - start))
            except pulsar.Timeout:
                pass
            return sent, got, start
        finally:
            client.close()

    sent, got, _ = await asyncio.to_thread(run)
    first = [g for g in got if g[1] == 0]
    again = [g for g in got if g[1] > 0]
    assert sorted(p for p, _, _ in first) == sorted(sent)
    assert sorted((p, n) for p, n, _ in again) == sorted((p, 1) for p in sent)  # each once more, counted
    assert min(t for _, _, t in again) >= 9.0  # not before the timeout


@together
async def test_a_producers_initial_subscription_is_made_once_and_a_bad_name_changes_nothing(broker) -> None:
    namespace = await new_namespace(broker.address, "initialsub")
    topic = f"persistent://{namespace}/letters"
    T = ppb.BaseCommand

    def producer(pid: int, initial: str) -> ppb.BaseCommand:
        return T(type=T.PRODUCER, producer=ppb.CommandProducer(
            topic=topic, producer_id=pid, request_id=pid, initial_subscription_name=initial,
        ))  # fmt: skip

    async with await RawPulsarConnection.open("127.0.0.1", broker.protocol_port) as conn:
        await conn.handshake()
        await conn.send(producer(1, "a/b"))
        refused = (await conn.receive()).command
        assert refused.type == T.ERROR and refused.error.error == ppb.NotAllowedError
        assert "invalid subscription name 'a/b'" in refused.error.message
        async with AdminClient(broker.address, 10) as admin:
            with pytest.raises(TopicNotFound):  # nothing made, not even the topic
                await admin.subscriptions(topic)
        for pid in (2, 3):  # the second finds it made
            await conn.send(producer(pid, "kept"))
            answer = (await conn.receive()).command
            assert answer.type == T.PRODUCER_SUCCESS, answer
        async with AdminClient(broker.address, 10) as admin:
            assert await admin.subscriptions(topic) == ["kept"]


def _java_id(ledger: int, entry: int, partition: int, batch: int) -> str:
    """A message id as the Java client's ``MessageId.toString()`` spells it (the
    ``ORIGIN_MESSAGE_ID`` of its retry letters): ``ledger:entry:partition[:batch]``."""
    return f"{ledger}:{entry}:{partition}" + (f":{batch}" if batch >= 0 else "")


@together
async def test_the_retry_letter_topic_as_the_java_client_uses_it(broker) -> None:
    """The Java client's ``reconsumeLater(msg, delay)``, step by step on the wire."""
    namespace = await new_namespace(broker.address, "retry")
    topic = f"persistent://{namespace}/orders"
    retry, dlq = f"{topic}-work-RETRY", f"{topic}-work-DLQ"  # the Java client's default names
    count, max_reconsume = 4, 2

    def delay_ms(times: int) -> int:  # each reconsume its own delay, to see each one kept
        return 400 * times

    def run() -> tuple[dict[bytes, tuple], list[tuple], dict[tuple[bytes, int], int], list[pulsar.Message], list]:
        client = _client(broker)
        try:
            consumer = client.subscribe([topic, retry], "work", consumer_type=pulsar.ConsumerType.Shared)
            retry_producer = client.create_producer(retry, batching_enabled=False)
            dlq_producer = client.create_producer(dlq, batching_enabled=False)
            sent = _send(client, topic, count, batching=True)
            received: list[tuple] = []  # (payload, topic, RECONSUMETIMES, properties, key, wall ms)
            retried_at: dict[tuple[bytes, int], int] = {}  # (payload, RECONSUMETIMES) -> wall ms of the send
            moved = 0
            deadline = time.monotonic() + 30
            while moved < count and time.monotonic() < deadline:
                try:
                    msg = consumer.receive(timeout_millis=500)
                except pulsar.Timeout:
                    continue
                now_ms = time.time() * 1000
                props = dict(msg.properties())
                received.append((msg.data(), msg.topic_name(), int(props.get("RECONSUMETIMES", 0)), dict(props),
                                 msg.partition_key(), now_ms))  # fmt: skip
                # reconsumeLater: the message's properties, the first origin kept, the count raised.
                origin = _java_id(*_id(msg.message_id()))
                props.setdefault("REAL_TOPIC", msg.topic_name())
                props.setdefault("ORIGIN_MESSAGE_IDY_TIME", origin)  # the Java client's old name, still written
                props.setdefault("ORIGIN_MESSAGE_ID", origin)
                times = int(props.get("RECONSUMETIMES", 0)) + 1
                props["RECONSUMETIMES"] = str(times)
                props["DELAY_TIME"] = str(delay_ms(times))
                if times > max_reconsume:
                    dlq_producer.send(msg.data(), properties=props, partition_key=msg.partition_key())
                    moved += 1
                else:
                    retried_at[(msg.data(), times)] = int(time.time() * 1000)
                    retry_producer.send(msg.data(), properties=props, partition_key=msg.partition_key(),
                                        deliver_after=timedelta(milliseconds=delay_ms(times)))  # fmt: skip
                consumer.acknowledge(msg)  # after the copy is stored, as the Java client does
            extra = []
            try:  # everything acknowledged: nothing more comes on either topic
                extra.append(consumer.receive(timeout_millis=1500).data())
            except pulsar.Timeout:
                pass
            reader = client.create_reader(dlq, pulsar.MessageId.earliest)
            dead = []
            while True:
                try:
                    dead.append(reader.read_next(timeout_millis=3000))
                except pulsar.Timeout:
                    break
            return sent, received, retried_at, dead, extra
        finally:
            client.close()

    sent, received, retried_at, dead, extra = await asyncio.to_thread(run)
    assert extra == []
    # Each message: once from the topic, then from the retry topic with RECONSUMETIMES 1..max.
    assert sorted((p, t, n) for p, t, n, *_ in received) == sorted(
        [(p, topic, 0) for p in sent] + [(p, retry, n) for p in sent for n in range(1, max_reconsume + 1)]
    )
    for payload, from_topic, times, props, key, at_ms in received:
        i = int(payload[1:])
        assert props["i"] == str(i) and key == f"k{i}"  # the message's own properties and key kept
        if from_topic == retry:
            assert props["REAL_TOPIC"] == topic and props["ORIGIN_MESSAGE_ID"] == _java_id(*sent[payload])
            assert props["DELAY_TIME"] == str(delay_ms(times))
            assert at_ms >= retried_at[(payload, times)] + delay_ms(times)  # not before its delay
    # Past the maximum: in the dead-letter topic, each once, with its history.
    assert sorted(m.data() for m in dead) == sorted(sent)
    for msg in dead:
        props = msg.properties()
        assert props["RECONSUMETIMES"] == str(max_reconsume + 1) and props["REAL_TOPIC"] == topic
        assert props["ORIGIN_MESSAGE_ID"] == _java_id(*sent[msg.data()])
        assert msg.partition_key() == f"k{int(msg.data()[1:])}"
