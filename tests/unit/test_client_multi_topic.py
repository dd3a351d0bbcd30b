"""The multi-topic consumer: ``subscribe([...])`` of the asyncio and the blocking client.

Part pure (names, routing and retry targets on hand-built partition consumers), part
against the broker twin of test_client_sdk (what went over the wire is asserted on).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict

import pytest
import test_client_sdk
from test_client_sdk import LEDGER, BrokerTwin, Twin, _eventually, _TwinThread

import magnetar
import magnetar.asyncio as ma
from magnetar.client.connection import ConnectionPool
from magnetar.client.consumer import Consumer, retry_targets, topic_names
from magnetar.client.message import Message
from magnetar.client.options import ConsumerConfig, ConsumerDeadLetterPolicy, InitialPosition
from magnetar.client.partition_consumer import PartitionConsumer, Queued
from magnetar.client.receive_queue import ReceiveQueue
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb

NS = "persistent://public/default"


# -- names ------------------------------------------------------------------------------------
def test_topic_names_normalises_a_name_or_a_list():
    assert topic_names("a") == [f"{NS}/a"]
    assert topic_names(["a", "acme/orders/b"]) == [f"{NS}/a", "persistent://acme/orders/b"]
    assert topic_names(("a",)) == [f"{NS}/a"]


@pytest.mark.parametrize(
    ("topics", "problem"),
    [
        ([], "the list is empty"),
        (["a", f"{NS}/a"], "listed twice"),
        (["p", "p-partition-1"], "is a partition of"),
        ({"a"}, "a compiled pattern, not set"),
        (None, "a compiled pattern, not NoneType"),
        (["a", b"b"], "a topic name is a str"),
    ],
)
def test_topic_names_refuses(topics, problem):
    with pytest.raises(magnetar.InvalidArgument, match=problem):
        topic_names(topics)


def test_topic_names_refuses_an_invalid_name():
    with pytest.raises(magnetar.InvalidTopicName):
        topic_names(["a", "x/y/z/w"])


# -- routing, by hand ---------------------------------------------------------------------------
def _partition_consumers(topic: str, partitions: int, queue: ReceiveQueue[Queued]) -> list[PartitionConsumer]:
    conf = ConsumerConfig(subscription_name="s")
    pool = ConnectionPool("127.0.0.1:1")
    name = TopicName.parse(topic)
    if partitions == 0:
        return [PartitionConsumer(pool, str(name), -1, conf, "c", queue)]
    return [PartitionConsumer(pool, str(name.partition(i)), i, conf, "c", queue) for i in range(partitions)]


def _message(topic: str, mid: MessageId) -> Message:
    return Message(topic, mid, pb.SingleMessage(payload=b"x"), 0)


@pytest.fixture
def multi():
    """A consumer of ``a`` and of ``p`` (2 partitions), with ``a-s-RETRY``; never connected."""
    queue: ReceiveQueue[Queued] = ReceiveQueue()
    a = _partition_consumers("a", 0, queue)
    p = _partition_consumers("p", 2, queue)
    retry = _partition_consumers("a-s-RETRY", 0, queue)
    conf = ConsumerConfig(subscription_name="s")
    return Consumer([f"{NS}/a", f"{NS}/p"], conf, a + p, queue, retry), a + p + retry


def test_a_message_goes_to_the_partition_consumer_of_its_topic(multi):
    consumer, (a, p0, p1, retry) = multi
    mid = MessageId(ledger_id=LEDGER, entry_id=3, partition=1, batch_index=-1)
    assert consumer.target_of(_message(f"{NS}/p-partition-1", mid)) == (p1, mid)
    assert consumer.target_of(_message(f"{NS}/p-partition-0", MessageId(ledger_id=LEDGER, entry_id=3, partition=0)))[0] is p0
    # Both topics have a message 7:0: the topic tells them apart, not the id.
    assert consumer.target_of(_message(f"{NS}/a", MessageId(ledger_id=LEDGER, entry_id=0)))[0] is a
    assert consumer.target_of(_message(f"{NS}/a-s-RETRY", MessageId(ledger_id=LEDGER, entry_id=0)))[0] is retry
    assert consumer.topic() == f"{NS}/a,{NS}/p"
    assert consumer.topics() == [f"{NS}/a", f"{NS}/p"]


def test_a_bare_message_id_or_a_foreign_message_is_refused_on_several_topics(multi):
    consumer, _ = multi
    with pytest.raises(magnetar.InvalidArgument, match="pass the Message"):
        consumer.target_of(MessageId(ledger_id=LEDGER, entry_id=0, partition=1))
    with pytest.raises(magnetar.InvalidArgument, match="not from a topic of this consumer"):
        consumer.target_of(_message(f"{NS}/other", MessageId(ledger_id=LEDGER, entry_id=0)))
    with pytest.raises(TypeError):
        consumer.target_of("7:0:-1:-1")  # type: ignore[arg-type]


async def test_a_seek_to_one_message_id_is_refused_on_several_topics(multi):
    consumer, _ = multi
    with pytest.raises(magnetar.InvalidArgument, match="MessageId.earliest or MessageId.latest"):
        await consumer.seek(MessageId(ledger_id=LEDGER, entry_id=0, partition=1))


def test_one_topic_keeps_routing_a_message_id_by_partition_index():
    queue: ReceiveQueue[Queued] = ReceiveQueue()
    p = _partition_consumers("p", 2, queue)
    consumer = Consumer([f"{NS}/p"], ConsumerConfig(subscription_name="s"), p, queue)
    assert consumer.target_of(MessageId(ledger_id=LEDGER, entry_id=0, partition=1))[0] is p[1]
    assert consumer.topic() == f"{NS}/p"
    with pytest.raises(magnetar.InvalidArgument, match="names no partition"):
        consumer.target_of(MessageId(ledger_id=LEDGER, entry_id=0, partition=2))


def _with_policy(topic: str, partitions: int, retry_topic: str | None) -> list[PartitionConsumer]:
    group = _partition_consumers(topic, partitions, ReceiveQueue())
    if retry_topic is not None:
        group[0].dead_letter_policy = pb.DeadLetterPolicy(
            max_redeliver_count=5, retry_letter_topic=retry_topic, dead_letter_topic=f"{retry_topic}-DLQ"
        )
    return group


def test_retry_targets_subscribe_each_retry_topic_once_from_the_earliest():
    conf = ConsumerConfig(subscription_name="s", enable_retry=True, initial_position=InitialPosition.Latest)
    names = [f"{NS}/a", f"{NS}/p", f"{NS}/b", f"{NS}/c-s-RETRY", f"{NS}/c"]
    groups = [
        _with_policy("a", 0, f"{NS}/a-s-RETRY"),
        _with_policy("p", 2, f"{NS}/p-s-RETRY"),
        _with_policy("b", 0, "a-s-RETRY"),  # the same topic as a's, in short form
        _with_policy("c-s-RETRY", 0, f"{NS}/c-s-RETRY-s-RETRY"),
        _with_policy("c", 0, f"{NS}/c-s-RETRY"),  # listed already: subscribed as it is
    ]
    targets = retry_targets(conf, names, groups)
    assert [t for t, _ in targets] == [f"{NS}/a-s-RETRY", f"{NS}/p-s-RETRY", f"{NS}/c-s-RETRY-s-RETRY"]
    for topic, retry_conf in targets:
        assert retry_conf.initial_position == InitialPosition.Earliest and retry_conf.enable_retry
        assert retry_conf.dead_letter_policy == ConsumerDeadLetterPolicy(
            max_redeliver_count=5, retry_letter_topic=topic, dead_letter_topic=f"{topic}-DLQ",
            initial_subscription_name="",
        )


def test_retry_targets_need_a_policy_from_the_broker_for_every_topic():
    conf = ConsumerConfig(subscription_name="s", enable_retry=True)
    groups = [_with_policy("a", 0, f"{NS}/a-s-RETRY"), _with_policy("b", 0, None)]
    with pytest.raises(magnetar.MagnetarError, match=f"no retry letter topic for {NS}/b"):
        retry_targets(conf, [f"{NS}/a", f"{NS}/b"], groups)


# -- against the twin ---------------------------------------------------------------------------
async def test_one_consumer_receives_and_acks_two_topics_one_partitioned(twin, client):
    twin.state.partitions[f"{NS}/p"] = 2
    consumer = await client.subscribe(
        ["a", f"{NS}/p"], "s", consumer_type=ma.ConsumerType.Shared, initial_position=ma.InitialPosition.Earliest
    )
    assert consumer.topics() == [f"{NS}/a", f"{NS}/p"] and consumer.topic() == f"{NS}/a,{NS}/p"
    subscribed = {(s.topic, s.subscription, s.consumer_name, s.type) for s in twin.state.subscribes}
    name = consumer.consumer_name()
    assert subscribed == {(t, "s", name, pb.SHARED) for t in (f"{NS}/a", f"{NS}/p-partition-0", f"{NS}/p-partition-1")}

    pa = await client.create_producer("a", batching_enabled=False)
    pp = await client.create_producer("p", batching_enabled=False)
    for i in range(3):
        await pa.send(b"a%d" % i)
    for i in range(4):
        await pp.send(b"p%d" % i, partition_key=f"k{i % 2}")
    got = [await consumer.receive(timeout_millis=2000) for _ in range(7)]
    with pytest.raises(magnetar.Timeout):
        await consumer.receive(timeout_millis=100)
    by_topic = defaultdict(list)
    for msg in got:
        by_topic[msg.topic_name()].append(msg.message_id().entry_id())
    assert by_topic[f"{NS}/a"] == [0, 1, 2]
    parts = {t: ids for t, ids in by_topic.items() if t.startswith(f"{NS}/p-partition-")}
    assert sum(len(ids) for ids in parts.values()) == 4 and all(ids == sorted(ids) for ids in parts.values())

    with pytest.raises(magnetar.InvalidArgument, match="pass the Message"):
        await consumer.acknowledge(got[0].message_id())
    for msg in got:
        await consumer.acknowledge(msg)
    await consumer.close()  # flushes the grouped acks
    acked: defaultdict[str, set[int]] = defaultdict(set)
    for topic, _, ids in twin.state.acks:
        acked[topic].update(e for _, e in ids)
    assert acked == {f"{NS}/a": {0, 1, 2}, **{t: set(ids) for t, ids in parts.items()}}


async def test_nack_and_cumulative_ack_go_to_the_topic_of_the_message(twin, client):
    consumer = await client.subscribe(
        ("a", "b"), "s", initial_position=ma.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=0
    )
    for topic in ("a", "b"):
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(2):
            await producer.send(b"%s%d" % (topic.encode(), i))
    got = {m.data(): m for m in [await consumer.receive(timeout_millis=2000) for _ in range(4)]}
    await consumer.negative_acknowledge(got[b"b0"])
    again = await consumer.receive(timeout_millis=2000)
    assert again.data() == b"b0" and again.topic_name() == f"{NS}/b" and again.redelivery_count() == 1
    assert twin.state.redeliveries == [[(LEDGER, 0)]]

    await consumer.acknowledge_cumulative(got[b"a1"])
    await _eventually(lambda: twin.state.acks)
    assert twin.state.acks == [(f"{NS}/a", pb.CUMULATIVE, [(LEDGER, 1)])]
    with pytest.raises(magnetar.InvalidArgument, match="pass the Message"):
        await consumer.negative_acknowledge(again.message_id())


async def test_seek_moves_every_partition_of_every_topic(twin, client):
    twin.state.partitions[f"{NS}/p"] = 2
    consumer = await client.subscribe(["a", "p"], "s", initial_position=ma.InitialPosition.Earliest)
    await (await client.create_producer("a")).send(b"a")
    pp = await client.create_producer("p", batching_enabled=False)
    for i in range(2):
        await pp.send(b"p", partition_key=f"key{i}")
    first = [await consumer.receive(timeout_millis=2000) for _ in range(3)]
    for msg in first:
        await consumer.acknowledge(msg)

    await consumer.seek(ma.MessageId.earliest)
    assert len(twin.state.seeks) == 3
    again = [await consumer.receive(timeout_millis=2000) for _ in range(3)]
    assert sorted((m.topic_name(), m.message_id()) for m in again) == sorted(
        (m.topic_name(), m.message_id()) for m in first
    )
    await consumer.seek(int(time.time() * 1000) + 60_000)  # after everything: nothing left
    assert len(twin.state.seeks) == 6 and all(s.WhichOneof("target") == "timestamp_ms" for s in twin.state.seeks[3:])
    with pytest.raises(magnetar.Timeout):
        await consumer.receive(timeout_millis=100)
    with pytest.raises(magnetar.InvalidArgument):
        await consumer.seek(first[0].message_id())
    assert len(twin.state.seeks) == 6


async def test_unsubscribe_deletes_the_subscription_of_every_topic(twin, client):
    twin.state.partitions[f"{NS}/p"] = 2
    consumer = await client.subscribe(["a", "p"], "s")
    assert len(twin.state.subs) == 3
    await consumer.unsubscribe()
    assert twin.state.subs == {}
    with pytest.raises(magnetar.ServiceClosed):
        await consumer.receive(timeout_millis=10)


async def test_a_failing_topic_leaves_nothing_subscribed(twin, client):
    twin.state.partitions[f"{NS}/p"] = 2
    twin.state.missing.add(f"{NS}/nope")
    with pytest.raises(magnetar.TopicNotFound):
        await client.subscribe(["a", "p", "nope"], "x")
    await _eventually(lambda: all(sub.consumer is None for sub in twin.state.subs.values()))
    # An Exclusive subscription: any consumer left open would make this ConsumerBusy.
    await client.subscribe(["a", "p"], "x")
    with pytest.raises(magnetar.ConsumerBusy):
        await client.subscribe(["b", "p"], "x")
    # The busy partition cancels b's subscribe: it either never reached the broker or was closed.
    await _eventually(lambda: getattr(twin.state.subs.get((f"{NS}/b", "x")), "consumer", None) is None)


async def test_bad_topic_lists_are_refused_before_any_subscribe(twin, client):
    for topics in ([], ["a", "a"], {"a"}, ["a", 1]):
        with pytest.raises(magnetar.InvalidArgument):
            await client.subscribe(topics, "s")  # type: ignore[arg-type]
    assert twin.state.subscribes == []


async def test_a_list_of_one_topic_is_a_consumer_of_that_topic(twin, client):
    consumer = await client.subscribe(["solo"], "s", initial_position=ma.InitialPosition.Earliest)
    assert consumer.topic() == f"{NS}/solo"
    await (await client.create_producer("solo")).send(b"x")
    msg = await consumer.receive(timeout_millis=2000)
    await consumer.acknowledge(msg.message_id())  # a bare id is fine with one topic
    await consumer.close()
    assert twin.state.acks == [(f"{NS}/solo", pb.INDIVIDUAL, [(LEDGER, 0)])]


# -- retry letter topics, with a twin that names them ---------------------------------------------
class _NamingContext:
    """The twin's stream context, adding the retry policy the broker resolves to ``subscribed``."""

    def __init__(self, context) -> None:
        self._context = context
        self.subscribe: pb.Subscribe | None = None

    async def write(self, resp: pb.ConsumeResponse) -> None:
        s = self.subscribe
        if resp.HasField("subscribed") and s is not None and s.enable_retry:
            base = TopicName.parse(s.topic).partitioned_topic_name
            retry = s.dead_letter_policy.retry_letter_topic or f"{base}-{s.subscription}-RETRY"
            resp.subscribed.dead_letter_policy.CopyFrom(
                pb.DeadLetterPolicy(max_redeliver_count=16, retry_letter_topic=retry, dead_letter_topic=f"{base}-DLQ")
            )
        await self._context.write(resp)

    def __getattr__(self, name: str):
        return getattr(self._context, name)


class RetryTwin(BrokerTwin):
    async def Consume(self, request_iterator, context):
        ctx = _NamingContext(context)

        async def requests():
            async for req in request_iterator:
                if req.HasField("subscribe"):
                    ctx.subscribe = req.subscribe
                yield req

        return await super().Consume(requests(), ctx)


@pytest.fixture
async def retry_twin(monkeypatch):
    monkeypatch.setattr(test_client_sdk, "BrokerTwin", RetryTwin)
    t = Twin()
    await t.start()
    yield t
    await t.stop()


async def test_enable_retry_subscribes_the_retry_topic_of_each_topic(retry_twin):
    async with ma.Client(f"magnetar://{retry_twin.address}", operation_timeout_seconds=5) as client:
        consumer = await client.subscribe(["a", "b"], "s", consumer_type=ma.ConsumerType.Shared, enable_retry=True)
        retries = [s for s in retry_twin.state.subscribes if s.topic.endswith("-RETRY")]
        assert sorted(s.topic for s in retries) == [f"{NS}/a-s-RETRY", f"{NS}/b-s-RETRY"]
        assert all(s.initial_position == pb.EARLIEST and s.subscription == "s" for s in retries)

        # A copy the broker put in b's retry topic arrives, and its ack goes there.
        await (await client.create_producer("b-s-RETRY")).send(b"copy")
        copy = await consumer.receive(timeout_millis=2000)
        assert copy.topic_name() == f"{NS}/b-s-RETRY"
        await consumer.acknowledge(copy)
        await consumer.close()
        assert retry_twin.state.acks == [(f"{NS}/b-s-RETRY", pb.INDIVIDUAL, [(LEDGER, 0)])]

        # One retry topic named for both: subscribed once.
        before = len(retry_twin.state.subscribes)
        policy = ma.ConsumerDeadLetterPolicy(max_redeliver_count=3, retry_letter_topic="shared-retry")
        await client.subscribe(["a", "b"], "t", enable_retry=True, dead_letter_policy=policy)
        assert sorted(s.topic for s in retry_twin.state.subscribes[before:]) == [
            f"{NS}/a", f"{NS}/b", f"{NS}/shared-retry"
        ]


# -- the blocking client ----------------------------------------------------------------------------
def test_blocking_client_subscribes_to_a_list():
    server = _TwinThread()
    try:
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            consumer = client.subscribe(["x", "y"], "s", initial_position=magnetar.InitialPosition.Earliest)
            assert consumer.topics() == [f"{NS}/x", f"{NS}/y"]
            for topic in ("x", "y"):
                producer = client.create_producer(topic)
                for i in range(2):
                    producer.send(b"%s%d" % (topic.encode(), i))
            got = [consumer.receive(timeout_millis=2000) for _ in range(4)]
            assert sorted(m.data() for m in got) == [b"x0", b"x1", b"y0", b"y1"]
            assert {m.topic_name() for m in got} == {f"{NS}/x", f"{NS}/y"}
            with pytest.raises(magnetar.InvalidArgument, match="pass the Message"):
                consumer.acknowledge(got[0].message_id())
            for m in got:
                consumer.acknowledge(m)
            with pytest.raises(magnetar.Timeout):
                consumer.receive(timeout_millis=50)
            consumer.close()
            with pytest.raises(magnetar.InvalidTopicName, match="one namespace"):
                client.subscribe(re.compile("persistent://public/.*/x"), "s")
    finally:
        server.close()
