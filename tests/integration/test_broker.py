"""The broker with real ZooKeeper, bookies and broker processes, driven by the SDK.

The tests share one cluster: 3 bookies, 2 brokers for the SDK's clients, and a third,
strict broker (no auto-created topics, 64 KiB messages). Tests that need to know which
broker owns a topic use a namespace of their own, whose bundles nobody owns yet.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict

import grpc
import pytest

import magnetar.asyncio as mg
from magnetar.client.framed import FramedSessionTransport
from magnetar.common.errors import (
    ConsumerBusy,
    InvalidTopicName,
    MessageTooBig,
    NamespaceNotFound,
    TopicNotFound,
)
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all

pytestmark = pytest.mark.integration

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
STRICT = dict(allow_auto_topic_creation=False, max_message_bytes=64 * 1024, **QUORUM)
ID_FORMAT = re.compile(r"^\d+:\d+:-?\d+:-?\d+$")


class Cluster:
    """3 bookies and 2 brokers; clients get both broker addresses and follow lookups.
    ``strict`` is a third broker with ``STRICT`` settings."""

    def __init__(self, brokers, strict) -> None:
        self.brokers = brokers
        self.url = ",".join(b.address for b in brokers)
        self.address = brokers[0].address  # for direct admin calls
        self.strict = strict

    async def own_namespace(self, prefix: str) -> str:
        """A new namespace (``public/<prefix>-<hex>``): no broker owns any of its bundles yet."""
        return await new_namespace(self.address, prefix)


@pytest.fixture(scope="module")
def cluster(module_bookie_factory, module_broker_factory):
    brokers = [module_broker_factory.create(**QUORUM), module_broker_factory.create(**QUORUM)]
    strict = module_broker_factory.create(**STRICT)
    start_all([*(module_bookie_factory.create() for _ in range(3)), *brokers, strict])  # start-ups overlap
    return Cluster(brokers, strict)


async def produce_consume(url: str, topic: str, n: int, batching: bool) -> list[str]:
    async with mg.Client(url) as client:
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest, receiver_queue_size=1000)
        producer = await client.create_producer(topic, batching_enabled=batching, block_if_queue_full=True, max_pending_messages=5000)
        received: list[bytes] = []
        ids: list[str] = []

        async def consume() -> None:
            while len(received) < n:
                msg = await consumer.receive(timeout_millis=30_000)
                received.append(msg.data())
                ids.append(str(msg.message_id()))
                await consumer.acknowledge(msg)

        reader = asyncio.create_task(consume())
        sends = [await producer.enqueue(b"%d" % i) for i in range(n)]
        await asyncio.gather(*sends)
        await asyncio.wait_for(reader, 120)
        assert received == [b"%d" % i for i in range(n)]
        return ids


@pytest.mark.slow
@pytest.mark.parametrize(("batching", "n"), [(True, 100_000), (False, 100_000)])
async def test_produce_and_consume_in_order(cluster, batching, n):
    ids = await produce_consume(cluster.url, f"ordered-{batching}", n, batching)
    assert all(ID_FORMAT.match(i) for i in ids)
    parts = [tuple(map(int, i.split(":"))) for i in ids]
    assert all(p[2] == -1 for p in parts)  # not partitioned
    if batching:
        assert len({p[:2] for p in parts}) < n / 10  # many messages per entry
        assert all(p[3] >= 0 for p in parts)
    else:
        assert all(p[3] == -1 for p in parts) and len({p[:2] for p in parts}) == n


async def test_partitioned_topic_routes_by_key(cluster):
    async with grpc.aio.insecure_channel(cluster.address, options=CHANNEL_OPTIONS) as channel:
        await pb_grpc.BrokerStub(channel).CreateTopic(pb.CreateTopicRequest(topic="keyed", partitions=4))
    async with mg.Client(cluster.url) as client:
        assert len(await client.get_topic_partitions("keyed")) == 4
        consumer = await client.subscribe("keyed", "s", initial_position=mg.InitialPosition.Earliest)
        producer = await client.create_producer("keyed")
        keys = [f"user-{k}" for k in range(12)]
        sends = [producer.send_async(b"%s:%d" % (keys[i % 12].encode(), i), None, partition_key=keys[i % 12]) for i in range(600)]
        await asyncio.gather(*sends)
        partition_of: dict[str, set[int]] = defaultdict(set)
        order: dict[str, list[int]] = defaultdict(list)
        for _ in range(600):
            msg = await consumer.receive(timeout_millis=20_000)
            key, seq = msg.data().decode().split(":")
            assert msg.partition_key() == key
            partition_of[key].add(msg.message_id().partition())
            order[key].append(int(seq))
            assert ID_FORMAT.match(str(msg.message_id()))
            assert msg.topic_name().startswith("persistent://public/default/keyed-partition-")
            await consumer.acknowledge(msg)
        assert all(len(p) == 1 for p in partition_of.values()), partition_of  # one partition per key
        assert len(set().union(*partition_of.values())) > 1  # and keys spread over partitions
        assert all(seqs == sorted(seqs) for seqs in order.values())  # in order per key


async def test_exclusive_subscription_refuses_a_second_consumer(cluster):
    async with mg.Client(cluster.url) as client:
        await client.subscribe("excl", "only-one")
        with pytest.raises(ConsumerBusy, match="already has a consumer"):
            await client.subscribe("excl", "only-one")
        await client.subscribe("excl", "another-subscription")  # other subscriptions are fine


async def test_cursor_resumes_after_the_last_acked_message(cluster):
    async with mg.Client(cluster.url) as client:
        # Unbatched: a batch entry is acked only once all its messages are (as in Pulsar
        # without batch-index acks), so a half-acked batch would come back whole.
        producer = await client.create_producer("resume", batching_enabled=False)
        consumer = await client.subscribe("resume", "s", initial_position=mg.InitialPosition.Earliest)
        await asyncio.gather(*(producer.send_async(b"%d" % i, None) for i in range(50)))
        for i in range(20):
            msg = await consumer.receive(timeout_millis=10_000)
            assert msg.data() == b"%d" % i
            await consumer.acknowledge(msg)
        await consumer.close()
        again = await client.subscribe("resume", "s")
        assert (await again.receive(timeout_millis=10_000)).data() == b"20"


async def test_bad_input_gets_clear_errors(cluster):
    broker = cluster.strict
    ns = await cluster.own_namespace("strict")  # its bundles go to the strict broker
    async with mg.Client(broker.address) as client:
        for bad in ("persistent://public/default/", "a/b/c/d/e", "kafka://public/default/t", "public/de fault/t"):
            with pytest.raises(InvalidTopicName):
                await client.create_producer(bad)
        with pytest.raises(TopicNotFound, match="does not exist"):
            await client.create_producer(f"{ns}/never-created")
        with pytest.raises(NamespaceNotFound, match="nope"):
            await client.create_producer("public/nope/t")
        async with grpc.aio.insecure_channel(broker.address, options=CHANNEL_OPTIONS) as channel:
            await pb_grpc.BrokerStub(channel).CreateTopic(pb.CreateTopicRequest(topic=f"{ns}/small"))
        producer = await client.create_producer(f"{ns}/small", max_message_size=64 * 1024)
        with pytest.raises(MessageTooBig):
            await producer.send(b"x" * (64 * 1024 + 1))
        assert str(await producer.send(b"fits"))  # the producer is still usable


async def test_a_consumer_on_a_topic_another_broker_owns_is_told_to_look_it_up(cluster):
    first, second = cluster.brokers
    topic = f"{await cluster.own_namespace('owned')}/owned-by-first"
    async with mg.Client(first.address) as client:
        await (await client.create_producer(topic)).send(b"x")  # first takes the bundle
    async with grpc.aio.insecure_channel(second.address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.BrokerStub(channel)
        assert (await stub.Lookup(pb.LookupRequest(topic=topic))).broker_address == first.address
        call = stub.Consume()
        await call.write(pb.ConsumeRequest(subscribe=pb.Subscribe(topic=topic, subscription="s")))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call.read()
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "served by another broker" in info.value.details()
        assert dict(info.value.trailing_metadata())["magnetar-error-code"] == "NOT_OWNER"
        bad = stub.Consume()
        await bad.write(pb.ConsumeRequest(flow=pb.Flow(permits=10)))  # no Subscribe first
        with pytest.raises(grpc.aio.AioRpcError, match="must start with Subscribe"):
            await bad.read()
    async with mg.Client(second.address) as client:  # the SDK follows the lookup by itself
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"x"


def test_bad_broker_config_is_one_line(tmp_path):
    from magnetar.testing.shell import magnetar

    bad = tmp_path / "broker.toml"
    bad.write_text("ensemble_size = 0\n")
    result = magnetar("broker", "--config", str(bad))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "ensemble_size" in result.stderr and "Traceback" not in result.stderr
    missing = magnetar("broker", "--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "not found" in missing.stderr
    quorum = tmp_path / "quorum.toml"
    quorum.write_text("ensemble_size = 2\nwrite_quorum = 3\n")
    result = magnetar("broker", "--config", str(quorum))
    assert result.returncode == 2 and "ensemble_size >= write_quorum >= ack_quorum" in result.stderr


async def test_the_broker_refuses_an_oversized_entry_even_from_a_client_that_does_not_check(cluster):
    broker = cluster.strict
    topic = f"{await cluster.own_namespace('big')}/big"  # on the strict broker
    async with grpc.aio.insecure_channel(broker.address, options=CHANNEL_OPTIONS) as channel:
        await pb_grpc.BrokerStub(channel).CreateTopic(pb.CreateTopicRequest(topic=topic))  # none auto-created there
        call = pb_grpc.BrokerStub(channel).Produce()
        await call.write(pb.ProduceRequest(open=pb.OpenProducer(topic=topic)))
        assert (await call.read()).opened.producer_name
        too_big = pb.EntryBatch(messages=[pb.SingleMessage(payload=b"x" * (64 * 1024 + 1))]).SerializeToString()
        await call.write(pb.ProduceRequest(send=pb.SendBatch(request_id=7, entry=too_big, num_messages=1, lowest_sequence_id=0, highest_sequence_id=0)))
        receipt = (await call.read()).receipt
        assert receipt.request_id == 7 and receipt.error.code == "MESSAGE_TOO_BIG"
        assert "larger than the limit of 65536 bytes" in receipt.error.message
        fits = pb.EntryBatch(messages=[pb.SingleMessage(payload=b"ok")]).SerializeToString()
        await call.write(pb.ProduceRequest(send=pb.SendBatch(request_id=8, entry=fits, num_messages=1, lowest_sequence_id=1, highest_sequence_id=1)))
        ok = (await call.read()).receipt
        assert ok.request_id == 8 and not ok.HasField("error") and ok.message_id.entry_id == 0  # nothing stored before it
        await call.done_writing()


async def test_producers_and_consumers_of_one_client_share_one_session_per_broker(cluster):
    """Many producers and consumers on one stream to their broker, each served as its own
    stream would be; closing them detaches each from its topic on the broker."""
    broker = cluster.brokers[0]
    ns = await cluster.own_namespace("session")
    topics = [f"{ns}/t{i}" for i in range(20)]
    async with mg.Client(broker.address) as client:
        consumers = await asyncio.gather(*(client.subscribe(t, "s") for t in topics))
        producers = await asyncio.gather(*(client.create_producer(t, batching_enabled=False) for t in topics))
        pool = client._pool
        assert pool.uses_session(broker.address)
        session = pool.session(broker.address)
        # on the broker's framed session listener, which its lookups advertised
        assert isinstance(session.transport, FramedSessionTransport)
        assert session.transport.address == f"{broker.host}:{broker.session_port}"
        assert session.handles == 2 * len(topics)  # one session: every producer's and consumer's handle
        await asyncio.gather(*(p.send(t.encode()) for p, t in zip(producers, topics, strict=True)))
        received = await asyncio.gather(*(c.receive(timeout_millis=10_000) for c in consumers))
        assert [m.data() for m in received] == [t.encode() for t in topics]
        await asyncio.gather(*(c.acknowledge(m) for c, m in zip(consumers, received, strict=True)))
        async with grpc.aio.insecure_channel(broker.address, options=CHANNEL_OPTIONS) as channel:
            stub = pb_grpc.BrokerStub(channel)
            stats = await stub.GetTopicStats(pb.TopicStatsRequest(topic=topics[0]))
            assert len(stats.publishers) == 1 and [s.consumers for s in stats.subscriptions] == [1]
            await asyncio.gather(*(p.close() for p in producers), *(c.close() for c in consumers))
            assert session.handles == 0 and pool.session(broker.address) is session  # the session stays

            async def attached(topic: str) -> tuple[int, list[int]]:
                stats = await stub.GetTopicStats(pb.TopicStatsRequest(topic=topic))
                return len(stats.publishers), [s.consumers for s in stats.subscriptions]

            for topic in topics:  # a producer's cancel is not answered: the broker drops it soon after
                deadline = asyncio.get_running_loop().time() + 10
                while (now := await attached(topic)) != (0, [0]):
                    assert asyncio.get_running_loop().time() < deadline, (topic, now)
                    await asyncio.sleep(0.02)
