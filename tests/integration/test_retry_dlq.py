"""Retry letter topics and dead letter queues on real processes (issue 6).

reconsume_later in its three modes (a delay, a level, the next level) with every property
checked; 16 retries then the 17th copy in the DLQ with nothing left in the retry topic's
backlog; custom names; negative acks past max_redeliver_count to the DLQ; Exclusive
redelivering at once; a move to a retry topic another broker serves (through the remote
move publisher); and a broker crash between publishing a copy and acknowledging the
original (injected) leaving exactly one copy.

The tests share one cluster (2 bookies and a broker; topics of their own); those that use
only it run at the same time (``magnetar.testing.together``), most of each is a retry
delay. The tests that need a second broker start it on the shared root and use a
namespace of their own, so that the broker they start takes the bundles it is asked
about; they run one after the other (a lookup places an unowned bundle on the least
loaded broker: with several new brokers at once, not necessarily on the one asked).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import timedelta

import grpc
import pytest

import magnetar as magnetar_client
import magnetar.asyncio as mg
from magnetar.broker.config import BrokerConfig
from magnetar.common.bundles import bundle_of
from magnetar.common.faults import CRASH_EXIT_CODE
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all
from magnetar.testing.shell import warm_magnetar as magnetar
from magnetar.testing.together import together

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
NS = "persistent://public/default"
BUNDLES = BrokerConfig.model_fields["bundles_per_namespace"].default
# A broker that a test kills: its bundles go to the shared broker once its session has
# expired, which a shorter session than the default 5 s makes quicker (the clients'
# reconnect backoff, 0.1 s doubling, then finds the new owner on its try at 3.1 s
# instead of 6.3 s). It lives for a second or two, not long enough to miss a ping.
KILLED_BROKER = dict(zk_session_timeout_s=2.0, **QUORUM)


async def backlog(broker, topic: str, sub: str) -> int:
    """The subscription's backlog, from the (single) broker's topic stats."""
    async with grpc.aio.insecure_channel(broker.address, options=CHANNEL_OPTIONS) as channel:
        stats = await pb_grpc.BrokerStub(channel).GetTopicStats(pb.TopicStatsRequest(topic=topic), timeout=10)
    return next(s.backlog for s in stats.subscriptions if s.name == sub)


async def drained(broker, topic: str, sub: str, timeout: float = 10.0) -> int:
    """The subscription's backlog once it is 0 (acks are stored asynchronously, the cursor
    also on close), or what it still is after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while (left := await backlog(broker, topic, sub)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return left


async def own_namespace(broker, prefix: str) -> str:
    """A new namespace (``public/<prefix>-<hex>``): no broker owns any of its bundles yet."""
    return await new_namespace(broker.address, prefix)


@pytest.fixture(scope="module")
def cluster(module_bookie_factory, module_broker_factory):
    broker = module_broker_factory.create(**QUORUM)
    start_all([module_bookie_factory.create(), module_bookie_factory.create(), broker])  # start-ups overlap
    return broker


@together
async def test_reconsume_later_in_three_modes_with_every_property(cluster):
    topic = f"{NS}/orders"
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(topic, "billing", consumer_type=mg.ConsumerType.Shared, enable_retry=True)
        producer = await client.create_producer(topic)
        sent = await producer.send(b"pay", properties={"k": "v"}, partition_key="user-1", event_timestamp=12345)
        original = await consumer.receive(timeout_millis=10_000)
        assert original.message_id() == sent

        # Mode 1: a given delay (timedelta).
        t0 = time.monotonic()
        await consumer.reconsume_later(original, timedelta(seconds=2))
        first = await consumer.receive(timeout_millis=10_000)
        waited = time.monotonic() - t0
        assert 2.0 <= waited <= 3.0, waited
        retry_topic = f"{NS}/orders-billing-RETRY"
        assert first.topic_name() == retry_topic
        assert first.message_id() != sent and first.message_id().ledger_id() != sent.ledger_id()
        assert first.data() == b"pay" and first.partition_key() == "user-1" and first.event_timestamp() == 12345
        assert first.properties() == {
            "k": "v", "REAL_TOPIC": topic, "ORIGIN_MESSAGE_ID": str(sent), "RETRY_TOPIC": retry_topic,
            "RECONSUMETIMES": "1", "DELAY_TIME": "2000",
        }

        # Mode 2: a level (level 1 is 1 s).
        t0 = time.monotonic()
        await consumer.reconsume_later(first, level=1)
        second = await consumer.receive(timeout_millis=10_000)
        assert 1.0 <= time.monotonic() - t0 <= 2.0
        assert second.properties()["RECONSUMETIMES"] == "2" and second.properties()["DELAY_TIME"] == "1000"
        assert second.properties()["ORIGIN_MESSAGE_ID"] == str(sent) and second.properties()["REAL_TOPIC"] == topic

        # Mode 3: the next level after RECONSUMETIMES 2 is level 3 (10 s); checked on the
        # copy's DELAY_TIME (the wait itself is covered by the modes above).
        await consumer.reconsume_later(second)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=8_000)
        third = await consumer.receive(timeout_millis=5_000)
        assert third.properties()["RECONSUMETIMES"] == "3" and third.properties()["DELAY_TIME"] == "10000"
        await consumer.acknowledge(third)

        # Milliseconds work too; bad arguments change nothing.
        with pytest.raises(mg.InvalidArgument):
            await consumer.reconsume_later(third, 999)
        with pytest.raises(mg.InvalidArgument):
            await consumer.reconsume_later(third, 1000, level=2)
        with pytest.raises(mg.InvalidArgument):
            await consumer.reconsume_later(third, level=19)
        await consumer.close()
    assert await drained(cluster, topic, "billing") == 0
    assert await drained(cluster, retry_topic, "billing") == 0


@together
async def test_sixteen_retries_then_the_dlq_with_custom_names(cluster):
    topic = f"{NS}/jobs"
    policy = mg.ConsumerDeadLetterPolicy(
        max_redeliver_count=16, retry_letter_topic=f"{NS}/jobs-again", dead_letter_topic="jobs-dead",
        initial_subscription_name="keeper",
    )
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(
            topic, "work", consumer_type=mg.ConsumerType.KeyShared, enable_retry=True, dead_letter_policy=policy,
            retry_delay_levels="1s",
        )
        producer = await client.create_producer(topic)
        sent = await producer.send(b"job", partition_key="k")
        times = []
        msg = await consumer.receive(timeout_millis=10_000)
        for _ in range(16):
            await consumer.reconsume_later(msg)  # next level: always 1 s (one level)
            msg = await consumer.receive(timeout_millis=10_000)
            times.append(msg.properties()["RECONSUMETIMES"])
            assert msg.topic_name() == f"{NS}/jobs-again"
        assert times == [str(i) for i in range(1, 17)]
        await consumer.reconsume_later(msg)  # the 17th: to the DLQ
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=2_500)
        # Nobody else is subscribed to the DLQ: its initial subscription kept the copy.
        dlq = await client.subscribe(f"{NS}/jobs-dead", "keeper", consumer_type=mg.ConsumerType.Shared)
        dead = await dlq.receive(timeout_millis=10_000)
        props = dead.properties()
        assert dead.topic_name() == f"{NS}/jobs-dead" and dead.data() == b"job" and dead.partition_key() == "k"
        assert props["REAL_TOPIC"] == topic and props["ORIGIN_MESSAGE_ID"] == str(sent)
        assert "max_redeliver_count is 16" in props["DEAD_LETTER_REASON"]
        await dlq.acknowledge(dead)
        await consumer.close()
        await dlq.close()
    assert await drained(cluster, f"{NS}/jobs-again", "work") == 0
    assert await drained(cluster, topic, "work") == 0


@together
async def test_negative_acks_past_max_redeliver_count_go_to_the_dlq(cluster):
    topic = f"{NS}/nacked"
    policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=3)
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(
            topic, "s", consumer_type=mg.ConsumerType.Shared, dead_letter_policy=policy,
            negative_ack_redelivery_delay_ms=100,
        )
        producer = await client.create_producer(topic)
        sent = await producer.send(b"poison")
        await producer.send(b"fine")
        counts = []
        fine = None
        while len(counts) < 3 or fine is None:
            msg = await consumer.receive(timeout_millis=10_000)
            if msg.data() == b"fine":
                fine = msg
                await consumer.acknowledge(msg)
                continue
            counts.append(msg.redelivery_count())
            await consumer.negative_acknowledge(msg)
        assert counts == [0, 1, 2]  # the redelivery that would carry count 3 goes to the DLQ
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=2_000)
        dlq = await client.subscribe(f"{NS}/nacked-s-DLQ", "s-DLQ-sub", consumer_type=mg.ConsumerType.Shared)
        dead = await dlq.receive(timeout_millis=10_000)
        assert dead.data() == b"poison" and dead.properties()["ORIGIN_MESSAGE_ID"] == str(sent)
        assert dead.properties()["REAL_TOPIC"] == topic
        assert "redelivery count 3 reached max_redeliver_count 3" in dead.properties()["DEAD_LETTER_REASON"]
        await consumer.close()
        await dlq.close()
    assert await drained(cluster, topic, "s") == 0


@together
async def test_consumer_departures_do_not_count_toward_the_dlq(cluster):
    """Chaos finding 11: a consumer that leaves (closed here; a broken connection or an
    unloaded topic is the same departure) gives back what it held flagged, not failed.
    With max_redeliver_count 1, the message survives two departures (each next consumer
    gets it flagged, count 1) and goes to the DLQ only at its first negative ack."""
    topic = f"{NS}/departures"
    policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=1)
    async with mg.Client(cluster.address) as client:
        producer = await client.create_producer(topic)

        async def subscribe():
            return await client.subscribe(
                topic, "s", consumer_type=mg.ConsumerType.Shared, dead_letter_policy=policy,
                negative_ack_redelivery_delay_ms=100,
            )

        first = await subscribe()
        sent = await producer.send(b"held twice")
        counts = []
        for _ in range(3):
            msg = await first.receive(timeout_millis=10_000)
            assert str(msg.message_id()) == str(sent)
            counts.append(msg.redelivery_count())
            if len(counts) < 3:
                await first.close()  # a departure: what it held goes back
                first = await subscribe()
        assert counts == [0, 1, 1]  # flagged, not counted up
        await first.negative_acknowledge(msg)  # the first failure reaches the maximum
        dlq = await client.subscribe(f"{topic}-s-DLQ", "s-DLQ-sub", consumer_type=mg.ConsumerType.Shared)
        dead = await dlq.receive(timeout_millis=10_000)
        assert dead.properties()["ORIGIN_MESSAGE_ID"] == str(sent)
        assert "redelivery count 1 reached max_redeliver_count 1" in dead.properties()["DEAD_LETTER_REASON"]
        with pytest.raises(mg.Timeout):
            await first.receive(timeout_millis=1_000)
        await first.close()
        await dlq.close()
    assert await drained(cluster, topic, "s") == 0


@together
async def test_exclusive_reconsume_later_redelivers_at_once(cluster):
    topic = f"{NS}/excl"
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(topic, "x", enable_retry=True)
        producer = await client.create_producer(topic)
        sent = await producer.send(b"again")
        msg = await consumer.receive(timeout_millis=10_000)
        t0 = time.monotonic()
        await consumer.reconsume_later(msg, timedelta(seconds=30))
        again = await consumer.receive(timeout_millis=5_000)
        assert time.monotonic() - t0 < 2.0
        assert again.message_id() == sent and again.redelivery_count() == 1
        assert "RECONSUMETIMES" not in again.properties()
        await consumer.acknowledge(again)


@together
async def test_reconsume_later_without_enable_retry_is_refused(cluster):
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(f"{NS}/noretry", "s", consumer_type=mg.ConsumerType.Shared)
        producer = await client.create_producer(f"{NS}/noretry")
        await producer.send(b"x")
        msg = await consumer.receive(timeout_millis=10_000)
        with pytest.raises(mg.InvalidArgument, match="enable_retry"):
            await consumer.reconsume_later(msg, 1000)
        await consumer.acknowledge(msg)


async def test_a_crash_between_publishing_the_copy_and_acking_leaves_exactly_one_copy(cluster, module_broker_factory):
    crashing = module_broker_factory(crash_point="after_move_publish", **KILLED_BROKER)
    other = cluster
    ns = f"persistent://{await own_namespace(other, 'crashy')}"
    topic, retry_topic = f"{ns}/crashy", f"{ns}/crashy-s-RETRY"
    async with grpc.aio.insecure_channel(crashing.address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.BrokerStub(channel)
        for t in (topic, retry_topic):  # the crashing broker serves both topics
            owner = (await stub.Lookup(pb.LookupRequest(topic=t), timeout=10)).broker_address
            assert owner == crashing.address
    async with mg.Client(f"{crashing.address},{other.address}") as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared, enable_retry=True)
        producer = await client.create_producer(topic, send_timeout_millis=60_000)
        sent = await producer.send(b"once")
        msg = await consumer.receive(timeout_millis=10_000)
        with pytest.raises(mg.MagnetarError):  # the broker stored the copy, then died
            await consumer.reconsume_later(msg, timedelta(seconds=1))
        code = await asyncio.to_thread(crashing.process.wait, 10)
        assert code == CRASH_EXIT_CODE  # the injected crash, not something else
        # The original was never acked: it comes back (from the other broker), maybe after
        # the copy stored before the crash ...
        copies = []
        while (again := await consumer.receive(timeout_millis=30_000)).topic_name() != topic:
            copies.append(again)
        assert again.message_id() == sent
        # ... and moving it again stores nothing new (ORIGIN_MESSAGE_ID + RECONSUMETIMES).
        await consumer.reconsume_later(again, timedelta(seconds=1))
        with pytest.raises(mg.Timeout):
            while True:
                copies.append(await consumer.receive(timeout_millis=4_000))
        assert [(c.topic_name(), c.data(), c.properties()["RECONSUMETIMES"]) for c in copies] == [(retry_topic, b"once", "1")]
        assert copies[0].properties()["ORIGIN_MESSAGE_ID"] == str(sent)
        await consumer.acknowledge(copies[0])
    async with grpc.aio.insecure_channel(other.address, options=CHANNEL_OPTIONS) as channel:
        stats = await pb_grpc.BrokerStub(channel).GetTopicStats(pb.TopicStatsRequest(topic=retry_topic), timeout=10)
    assert stats.entries == 1


async def test_a_crash_in_the_middle_of_moving_a_chunked_message_leaves_it_in_the_dlq_once_whole(
    cluster, module_broker_factory
):
    """The broker dies right after storing the copy of the first chunk of a dead chunked
    message (``after_move_publish`` is reached once per chunk copy): the other broker
    moves it again, and the DLQ's consumer gets it once, whole; the stored half copy is
    never delivered."""
    crashing = module_broker_factory(crash_point="after_move_publish", **KILLED_BROKER)
    ns = f"persistent://{await own_namespace(cluster, 'crashchunk')}"
    topic, dlq_topic = f"{ns}/big", f"{ns}/big-s-DLQ"
    async with grpc.aio.insecure_channel(crashing.address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.BrokerStub(channel)
        for t in (topic, dlq_topic):  # the crashing broker serves both topics
            owner = (await stub.Lookup(pb.LookupRequest(topic=t), timeout=10)).broker_address
            assert owner == crashing.address
    chunk = 16 * 1024  # the SDK cuts at its own max_message_size
    payload = os.urandom(3 * chunk + 99)
    policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=1)
    async with mg.Client(f"{crashing.address},{cluster.address}") as client:
        consumer = await client.subscribe(
            topic, "s", consumer_type=mg.ConsumerType.Shared, dead_letter_policy=policy,
            negative_ack_redelivery_delay_ms=100,
        )  # fmt: skip
        producer = await client.create_producer(
            topic, chunking_enabled=True, batching_enabled=False, max_message_size=chunk, send_timeout_millis=60_000
        )
        sent = await producer.send(payload)
        msg = await consumer.receive(timeout_millis=10_000)
        assert msg.data() == payload
        await consumer.negative_acknowledge(msg)  # its redelivery (count 1) goes to the DLQ
        code = await asyncio.to_thread(crashing.process.wait, 20)
        assert code == CRASH_EXIT_CODE  # the injected crash, after the first chunk's copy
        dlq = await client.subscribe(dlq_topic, "s-DLQ-sub", consumer_type=mg.ConsumerType.Shared)
        dead = await dlq.receive(timeout_millis=30_000)
        assert dead.data() == payload
        assert dead.properties()["REAL_TOPIC"] == topic and dead.properties()["ORIGIN_MESSAGE_ID"] == str(sent)
        await dlq.acknowledge(dead)
        with pytest.raises(mg.Timeout):
            await dlq.receive(timeout_millis=3_000)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=500)


async def test_a_move_to_a_topic_another_broker_serves_goes_there_through_the_sdk(cluster, module_broker_factory):
    here, there = cluster, module_broker_factory(**QUORUM)
    ns = f"persistent://{await own_namespace(here, 'far')}"
    # A source topic and its retry topic in different bundles, owned by different brokers.
    local = next(
        f"far-{i}" for i in range(100)
        if bundle_of(f"{ns}/far-{i}", BUNDLES) != bundle_of(f"{ns}/far-{i}-s-RETRY", BUNDLES)
    )
    topic, retry_topic = f"{ns}/{local}", f"{ns}/{local}-s-RETRY"
    for broker, t in ((here, topic), (there, retry_topic)):
        async with grpc.aio.insecure_channel(broker.address, options=CHANNEL_OPTIONS) as channel:
            owner = (await pb_grpc.BrokerStub(channel).Lookup(pb.LookupRequest(topic=t), timeout=10)).broker_address
            assert owner == broker.address
    async with mg.Client(here.address) as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared, enable_retry=True)
        producer = await client.create_producer(topic)
        sent = await producer.send(b"far", properties={"k": "v"}, partition_key="key", ordering_key=b"\x00lane")
        msg = await consumer.receive(timeout_millis=10_000)
        await consumer.reconsume_later(msg, timedelta(seconds=1))
        copy = await consumer.receive(timeout_millis=20_000)
        assert (copy.topic_name(), copy.data(), copy.partition_key()) == (retry_topic, b"far", "key")
        assert copy.ordering_key() == b"\x00lane"  # kept, as Pulsar's retry producer keeps it
        assert copy.properties()["RECONSUMETIMES"] == "1" and copy.properties()["k"] == "v"
        assert copy.properties()["ORIGIN_MESSAGE_ID"] == str(sent)
        await consumer.acknowledge(copy)
    async with grpc.aio.insecure_channel(there.address, options=CHANNEL_OPTIONS) as channel:
        stats = await pb_grpc.BrokerStub(channel).GetTopicStats(pb.TopicStatsRequest(topic=retry_topic), timeout=10)
    assert stats.entries == 1


async def test_a_dead_chunked_message_goes_whole_to_a_dlq_another_broker_serves(cluster, module_broker_factory):
    """The remote move publisher sends each chunk's copy as a chunk through the SDK."""
    here, there = cluster, module_broker_factory(**QUORUM)
    ns = f"persistent://{await own_namespace(here, 'farchunk')}"
    local = next(
        f"big-{i}" for i in range(100)
        if bundle_of(f"{ns}/big-{i}", BUNDLES) != bundle_of(f"{ns}/big-{i}-s-DLQ", BUNDLES)
    )  # fmt: skip
    topic, dlq_topic = f"{ns}/{local}", f"{ns}/{local}-s-DLQ"
    for broker, t in ((here, topic), (there, dlq_topic)):
        async with grpc.aio.insecure_channel(broker.address, options=CHANNEL_OPTIONS) as channel:
            owner = (await pb_grpc.BrokerStub(channel).Lookup(pb.LookupRequest(topic=t), timeout=10)).broker_address
            assert owner == broker.address
    chunk = 16 * 1024
    payload = os.urandom(2 * chunk + 7)
    policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=1)
    async with mg.Client(here.address) as client:
        consumer = await client.subscribe(
            topic, "s", consumer_type=mg.ConsumerType.Shared, dead_letter_policy=policy,
            negative_ack_redelivery_delay_ms=100,
        )  # fmt: skip
        producer = await client.create_producer(
            topic, chunking_enabled=True, batching_enabled=False, max_message_size=chunk
        )
        sent = await producer.send(payload, properties={"k": "v"})
        await consumer.negative_acknowledge(await consumer.receive(timeout_millis=10_000))
        dlq = await client.subscribe(dlq_topic, "s-DLQ-sub", consumer_type=mg.ConsumerType.Shared)
        dead = await dlq.receive(timeout_millis=20_000)
        assert dead.data() == payload and dead.properties()["k"] == "v"
        assert dead.properties()["ORIGIN_MESSAGE_ID"] == str(sent)
        await dlq.acknowledge(dead)
        assert await drained(here, topic, "s") == 0
    async with grpc.aio.insecure_channel(there.address, options=CHANNEL_OPTIONS) as channel:
        stats = await pb_grpc.BrokerStub(channel).GetTopicStats(pb.TopicStatsRequest(topic=dlq_topic), timeout=10)
    assert stats.entries == 3  # one per chunk


@together
async def test_namespace_defaults_name_the_topics_and_set_the_count(cluster):
    url = ("--url", cluster.address)
    # A namespace of its own: its defaults would rename the other tests' retry topics.
    namespace = await own_namespace(cluster, "defaults")
    bad = await asyncio.to_thread(magnetar, "admin", *url, "namespaces", "set-dead-letter-policy", namespace,
                                  "--max-redeliver-count", "0")
    assert bad.returncode != 0 and "max-redeliver-count" in bad.stderr and "Traceback" not in bad.stderr
    bad = await asyncio.to_thread(magnetar, "admin", *url, "namespaces", "set-dead-letter-policy", namespace,
                                  "--retry-letter-topic", "a/b/c/d")
    assert bad.returncode != 0 and "not a valid topic name" in bad.stderr and "Traceback" not in bad.stderr
    ok = await asyncio.to_thread(magnetar, "admin", *url, "namespaces", "set-dead-letter-policy", namespace,
                                 "--max-redeliver-count", "1", "--retry-letter-topic", "{topic}-again-{subscription}")
    assert ok.returncode == 0, ok.stderr
    got = await asyncio.to_thread(magnetar, "admin", *url, "namespaces", "get-dead-letter-policy", namespace)
    assert json.loads(got.stdout) == {
        "maxRedeliverCount": 1, "retryLetterTopic": "{topic}-again-{subscription}", "deadLetterTopic": None,
        "initialSubscriptionName": None,
    }
    ns = f"persistent://{namespace}"
    topic = f"{ns}/nsdefaults"
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared, enable_retry=True)
        producer = await client.create_producer(topic)
        await producer.send(b"m")
        msg = await consumer.receive(timeout_millis=10_000)
        await consumer.reconsume_later(msg, 1000)
        msg = await consumer.receive(timeout_millis=10_000)
        assert msg.topic_name() == f"{ns}/nsdefaults-again-s"
        await consumer.reconsume_later(msg, 1000)  # the 2nd retry exceeds the namespace's 1
        dlq = await client.subscribe(f"{ns}/nsdefaults-s-DLQ", "s-DLQ-sub", consumer_type=mg.ConsumerType.Shared)
        dead = await dlq.receive(timeout_millis=10_000)
        assert dead.data() == b"m" and dead.properties()["RECONSUMETIMES"] == "1"


@together
async def test_retry_on_a_partitioned_topic_goes_through_one_retry_topic(cluster):
    topic = f"{NS}/parted"
    async with grpc.aio.insecure_channel(cluster.address, options=CHANNEL_OPTIONS) as channel:
        await pb_grpc.BrokerStub(channel).CreateTopic(pb.CreateTopicRequest(topic=topic, partitions=3), timeout=10)
    async with mg.Client(cluster.address) as client:
        consumer = await client.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared, enable_retry=True)
        producer = await client.create_producer(topic, batching_enabled=False)
        sent = {await producer.send(b"%d" % i, partition_key=f"key-{i}"): i for i in range(6)}
        originals = [await consumer.receive(timeout_millis=10_000) for _ in range(6)]
        assert {m.message_id() for m in originals} == set(sent)
        for m in originals:
            await consumer.reconsume_later(m, 1000)
        copies = [await consumer.receive(timeout_millis=10_000) for _ in range(6)]
        assert {c.topic_name() for c in copies} == {f"{NS}/parted-s-RETRY"}
        by_origin = {c.properties()["ORIGIN_MESSAGE_ID"]: c for c in copies}
        for m in originals:
            copy = by_origin[str(m.message_id())]
            assert copy.data() == m.data() and copy.properties()["REAL_TOPIC"] == m.topic_name()
            assert m.topic_name().startswith(f"{topic}-partition-")
            await consumer.acknowledge(copy)


def test_the_blocking_client_reconsumes_later(cluster):
    with magnetar_client.Client(cluster.address) as client:
        consumer = client.subscribe("blocking", "s", consumer_type=magnetar_client.ConsumerType.Shared, enable_retry=True)
        producer = client.create_producer("blocking")
        producer.send(b"b")
        msg = consumer.receive(timeout_millis=10_000)
        consumer.reconsume_later(msg, timedelta(seconds=1))
        copy = consumer.receive(timeout_millis=10_000)
        assert copy.properties()["RECONSUMETIMES"] == "1" and copy.topic_name() == f"{NS}/blocking-s-RETRY"
        consumer.acknowledge(copy)
