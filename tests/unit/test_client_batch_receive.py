"""``Consumer.batch_receive`` (pulsar-client's batch receive) against the in-memory broker
twin of test_client_sdk: the policy's limits and timeout, permits granted back once per
batch, multi-topic and partitioned consumers, the blocking client, and the receive
queue's batch gets on their own."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from test_client_sdk import LEDGER, _eventually, _TwinThread

import magnetar
import magnetar.asyncio as ma
from magnetar.client.consumer import batch_limits
from magnetar.client.options import CONSUMER_DEFAULTS, ConsumerConfig
from magnetar.client.receive_queue import ReceiveQueue

NS = "persistent://public/default"
Policy = ma.ConsumerBatchReceivePolicy


async def _produce(client, topic: str, payloads, **kwargs) -> None:
    producer = await client.create_producer(topic, batching_enabled=False)
    await asyncio.gather(*(producer.send_async(p, None, **kwargs) for p in payloads))
    await producer.close()


def _values(messages) -> list[int]:
    return [int(m.data()) for m in messages]


# -- the policy -----------------------------------------------------------------------------
def test_the_policy_has_pulsars_defaults_and_refuses_no_limit_and_no_timeout():
    assert Policy() == Policy(-1, 10 * 1024 * 1024, 100)
    assert CONSUMER_DEFAULTS.batch_receive_policy == Policy()
    for values in [(-1, -1, -1), (0, 0, 0), (-5, 0, -100)]:
        with pytest.raises(magnetar.InvalidArgument, match="at least one of max_num_message, max_num_bytes"):
            Policy(*values)
    with pytest.raises(magnetar.InvalidArgument, match="timeout_ms must be an int"):
        Policy(10, -1, 1.5)
    with pytest.raises(magnetar.InvalidArgument, match="max_num_message must be an int"):
        Policy(True, -1, 100)
    # Neither a count nor a byte limit: Pulsar's default byte limit, the timeout kept.
    assert Policy(-1, -1, 123) == Policy(-1, 10 * 1024 * 1024, 123)
    assert Policy(max_num_message=10, max_num_bytes=-1, timeout_ms=0).max_num_message == 10


def test_limits_cap_the_count_at_the_receiver_queue_size():
    conf = ConsumerConfig(subscription_name="s", receiver_queue_size=50)
    assert batch_limits(conf) == (50, 10 * 1024 * 1024, 0.1)  # no count limit: the queue's size
    conf.batch_receive_policy = Policy(500, -1, 0)
    assert batch_limits(conf) == (50, 0, None)  # capped, as Pulsar caps it; no bytes, no timeout
    conf.batch_receive_policy = Policy(20, 4096, 2500)
    assert batch_limits(conf) == (20, 4096, 2.5)
    conf.batch_receive_policy = None
    assert batch_limits(conf) == (50, 10 * 1024 * 1024, 0.1)


async def test_subscribe_refuses_a_policy_that_is_not_one_before_subscribing(twin, client):
    with pytest.raises(magnetar.InvalidArgument, match="must be a ConsumerBatchReceivePolicy"):
        await client.subscribe("bad-policy", "s", batch_receive_policy={"max_num_message": 10})
    assert twin.state.subscribes == []


# -- limits and timeout ----------------------------------------------------------------------
async def test_max_num_message_reached_returns_at_once_in_order(twin, client):
    consumer = await client.subscribe(
        "count", "s", initial_position=ma.InitialPosition.Earliest,
        batch_receive_policy=Policy(max_num_message=10, max_num_bytes=-1, timeout_ms=30_000),
    )  # fmt: skip
    await _produce(client, "count", [b"%d" % i for i in range(25)])
    started = time.monotonic()
    first = await asyncio.wait_for(consumer.batch_receive(), 5)
    second = await asyncio.wait_for(consumer.batch_receive(), 5)
    assert time.monotonic() - started < 5  # nowhere near the 30 s timeout
    assert _values(first) == list(range(10)) and _values(second) == list(range(10, 20))
    assert all(isinstance(m, ma.Message) for m in first)


async def test_a_waiting_batch_completes_when_enough_arrives(twin, client):
    consumer = await client.subscribe(
        "arrive", "s", batch_receive_policy=Policy(max_num_message=30, max_num_bytes=-1, timeout_ms=30_000)
    )
    waiting = asyncio.create_task(consumer.batch_receive())
    await _eventually(lambda: len(twin.state.flows) == 1)  # subscribed: the batch waits
    assert not waiting.done()
    await _produce(client, "arrive", [b"%d" % i for i in range(12)])
    await asyncio.sleep(0.2)
    assert not waiting.done()  # 12 of 30: still waiting
    await _produce(client, "arrive", [b"%d" % i for i in range(12, 40)])
    batch = await asyncio.wait_for(waiting, 5)
    assert _values(batch) == list(range(30))


async def test_timeout_returns_what_arrived_or_an_empty_list(twin, client):
    consumer = await client.subscribe(
        "slow", "s", initial_position=ma.InitialPosition.Earliest,
        batch_receive_policy=Policy(max_num_message=100, max_num_bytes=-1, timeout_ms=200),
    )  # fmt: skip
    started = time.monotonic()
    assert await consumer.batch_receive() == []  # nothing: an empty list, no Timeout
    assert time.monotonic() - started >= 0.18
    await _produce(client, "slow", [b"1", b"2", b"3"])
    await _eventually(lambda: consumer.queued() == 3)
    started = time.monotonic()
    assert _values(await consumer.batch_receive()) == [1, 2, 3]
    assert 0.18 <= time.monotonic() - started < 3


async def test_max_num_bytes_completes_the_batch_and_bounds_it(twin, client):
    consumer = await client.subscribe(
        "bytes", "s", initial_position=ma.InitialPosition.Earliest,
        batch_receive_policy=Policy(max_num_message=-1, max_num_bytes=250, timeout_ms=30_000),
    )  # fmt: skip
    await _produce(client, "bytes", [b"%03d" % i + b"x" * 97 for i in range(7)])  # 100 bytes each
    started = time.monotonic()
    batches = [await asyncio.wait_for(consumer.batch_receive(), 5) for _ in range(3)]
    assert time.monotonic() - started < 5
    # 250 bytes are queued once 3 messages are: the batch takes what fits in 250 (2).
    assert [[int(m.data()[:3]) for m in b] for b in batches] == [[0, 1], [2, 3], [4, 5]]


async def test_a_message_larger_than_max_num_bytes_comes_alone(twin, client):
    consumer = await client.subscribe(
        "big", "s", initial_position=ma.InitialPosition.Earliest,
        batch_receive_policy=Policy(max_num_message=-1, max_num_bytes=50, timeout_ms=30_000),
    )  # fmt: skip
    await _produce(client, "big", [b"a" * 80, b"b" * 10, b"c" * 10])
    assert [m.data() for m in await asyncio.wait_for(consumer.batch_receive(), 5)] == [b"a" * 80]
    await _eventually(lambda: consumer.queued() == 2)
    # 20 bytes queued, under the limit: the rest comes after the timeout (not waited for here).


# -- permits ---------------------------------------------------------------------------------
async def test_permits_are_granted_back_once_per_batch_and_delivery_goes_on(twin, client):
    consumer = await client.subscribe(
        "permits", "s", initial_position=ma.InitialPosition.Earliest, receiver_queue_size=10,
        batch_receive_policy=Policy(max_num_message=10, max_num_bytes=-1, timeout_ms=2000),
    )  # fmt: skip
    await _produce(client, "permits", [b"%d" % i for i in range(55)])
    got = []
    while len(got) < 55:
        batch = await asyncio.wait_for(consumer.batch_receive(), 5)
        assert batch and len(batch) <= 10
        got += batch
        for msg in batch:
            await consumer.acknowledge(msg)
    assert _values(got) == list(range(55))  # the twin went on delivering after each batch
    # The whole queue first, then one grant of 10 per full batch (not 10 grants of 1).
    await _eventually(lambda: sum(twin.state.flows) >= 10 + 50)
    assert twin.state.flows[:6] == [10, 10, 10, 10, 10, 10]
    await _eventually(lambda: sum(len(ids) for _, _, ids in twin.state.acks) == 55)


async def test_a_batch_waiting_without_timeout_gets_the_permits_receive_held_back(twin, client):
    consumer = await client.subscribe(
        "held", "s", initial_position=ma.InitialPosition.Earliest, receiver_queue_size=10,
        batch_receive_policy=Policy(max_num_message=10, max_num_bytes=-1, timeout_ms=0),
    )  # fmt: skip
    await _produce(client, "held", [b"%d" % i for i in range(30)])
    assert _values([await consumer.receive(2000)]) == [0]  # its permit is held (1 < half of 10)
    await _eventually(lambda: consumer.queued() == 9)
    # Only 9 can be queued until that permit goes back: the waiting batch grants it.
    batch = await asyncio.wait_for(consumer.batch_receive(), 5)
    assert _values(batch) == list(range(1, 11))


async def test_receive_and_batch_receive_share_the_queue(twin, client):
    consumer = await client.subscribe(
        "mixed", "s", initial_position=ma.InitialPosition.Earliest,
        batch_receive_policy=Policy(max_num_message=5, max_num_bytes=-1, timeout_ms=1000),
    )  # fmt: skip
    await _produce(client, "mixed", [b"%d" % i for i in range(8)])
    assert _values([await consumer.receive(2000)]) == [0]
    assert _values(await consumer.batch_receive()) == [1, 2, 3, 4, 5]
    assert _values([await consumer.receive(2000), await consumer.receive(2000)]) == [6, 7]


# -- several partitions and topics -------------------------------------------------------------
async def test_partitioned_and_multi_topic_batches_keep_each_messages_owner(twin, client):
    twin.state.partitions[f"{NS}/bparts"] = 3
    consumer = await client.subscribe(
        [f"{NS}/bparts", "bplain"], "s", initial_position=ma.InitialPosition.Earliest,
        consumer_type=ma.ConsumerType.Shared,
        batch_receive_policy=Policy(max_num_message=40, max_num_bytes=-1, timeout_ms=300),
    )  # fmt: skip
    producer = await client.create_producer(f"{NS}/bparts", batching_enabled=False)
    await asyncio.gather(*(producer.send_async(b"%d" % i, None, partition_key=f"k{i}") for i in range(60)))
    await _produce(client, "bplain", [b"%d" % i for i in range(60, 90)])
    got = []
    while len(got) < 90:
        batch = await asyncio.wait_for(consumer.batch_receive(), 5)
        assert len(batch) <= 40
        got += batch
        for msg in batch:
            await consumer.acknowledge(msg)  # routed by the message's topic
    assert sorted(_values(got)) == list(range(90))
    topics = {m.topic_name() for m in got}
    assert topics == {f"{NS}/bparts-partition-{i}" for i in range(3)} | {f"{NS}/bplain"}
    for topic in topics:  # order holds per partition
        values = [int(m.data()) for m in got if m.topic_name() == topic]
        assert values == sorted(values)
    await _eventually(lambda: sum(len(ids) for _, _, ids in twin.state.acks) == 90)
    acked = {(t, e) for t, _, ids in twin.state.acks for _, e in ids}
    assert acked == {(m.topic_name(), m.message_id().entry_id()) for m in got}


async def test_batch_receive_on_a_closed_consumer_raises_service_closed(twin, client):
    consumer = await client.subscribe("closed", "s", batch_receive_policy=Policy(10, -1, 0))
    waiting = asyncio.create_task(consumer.batch_receive())
    await _eventually(lambda: len(twin.state.flows) == 1)
    await consumer.close()
    with pytest.raises(magnetar.ServiceClosed):
        await asyncio.wait_for(waiting, 5)
    with pytest.raises(magnetar.ServiceClosed):
        await consumer.batch_receive()


# -- the blocking client -------------------------------------------------------------------------
def test_blocking_client_batch_receive():
    server = _TwinThread()
    try:
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            consumer = client.subscribe(
                "sync-batch", "s", initial_position=magnetar.InitialPosition.Earliest, receiver_queue_size=20,
                batch_receive_policy=magnetar.ConsumerBatchReceivePolicy(5, -1, 300),
            )  # fmt: skip
            producer = client.create_producer("sync-batch", batching_enabled=False)
            for i in range(12):
                producer.send(b"%d" % i)
            assert producer.send(b"12") == magnetar.MessageId(ledger_id=LEDGER, entry_id=12, partition=-1, batch_index=-1)
            batches = [consumer.batch_receive() for _ in range(3)]
            assert [_values(b) for b in batches] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12]]
            for batch in batches:
                for msg in batch:
                    consumer.acknowledge(msg)
            started = time.monotonic()
            assert consumer.batch_receive() == []  # after the 300 ms timeout
            assert time.monotonic() - started >= 0.28

            # A batch waiting in a thread is woken once enough arrives.
            result: list[list[magnetar.Message]] = []
            waiter = threading.Thread(target=lambda: result.append(consumer.batch_receive()))
            waiter.start()
            for i in range(13, 18):
                producer.send_async(b"%d" % i, None)
            producer.flush()
            waiter.join(5)
            assert [_values(b) for b in result] == [[13, 14, 15, 16, 17]]

            # 18 taken and the queue size is 20: the twin delivers only if permits came back.
            for i in range(18, 40):
                producer.send_async(b"%d" % i, None)
            producer.flush()
            more = []
            deadline = time.monotonic() + 10
            while len(more) < 22 and time.monotonic() < deadline:
                more += consumer.batch_receive()
            assert _values(more) == list(range(18, 40))
            for msg in result[0] + more:
                consumer.acknowledge(msg)
            consumer.close()
            with pytest.raises(magnetar.ServiceClosed):
                consumer.batch_receive()
        acked = {e for _, _, ids in server.twin.state.acks for _, e in ids}
        assert acked == set(range(40))
    finally:
        server.close()


def test_blocking_and_asyncio_subscribe_take_the_same_batch_receive_policy_default():
    import inspect

    for cls in (magnetar.Client, ma.Client):
        default = inspect.signature(cls.subscribe).parameters["batch_receive_policy"].default
        assert default is CONSUMER_DEFAULTS.batch_receive_policy


# -- the receive queue's batch gets -------------------------------------------------------------
async def test_queue_get_batch_takes_at_once_or_waits_once():
    q: ReceiveQueue[bytes] = ReceiveQueue()
    for i in range(5):
        q.put(b"%d" % i)
    assert await q.get_batch(3) == [b"0", b"1", b"2"]
    waits: list[int] = []
    waiting = asyncio.create_task(q.get_batch(4, timeout_s=5, on_wait=lambda: waits.append(1)))
    await asyncio.sleep(0.01)
    q.put(b"5")
    await asyncio.sleep(0.01)
    assert not waiting.done() and waits == [1]
    q.put(b"6")
    assert await asyncio.wait_for(waiting, 1) == [b"3", b"4", b"5", b"6"]
    assert len(q) == 0 and q._watches == []


async def test_queue_get_batch_by_bytes_and_timeout():
    q: ReceiveQueue[bytes] = ReceiveQueue()
    q.put(b"x" * 30)
    waiting = asyncio.create_task(q.get_batch(100, 100, 5, len))
    await asyncio.sleep(0.01)
    q.put(b"y" * 30)
    q.put(b"z" * 30)
    await asyncio.sleep(0.01)
    assert not waiting.done()  # 90 of 100 bytes
    q.put(b"w" * 30)
    assert await asyncio.wait_for(waiting, 1) == [b"x" * 30, b"y" * 30, b"z" * 30]  # 120 > 100: 3 fit
    assert await q.get_batch(100, 100, 0.05, len) == [b"w" * 30]  # the timeout: what is there
    assert await q.get_batch(100, 100, 0.05, len) == []


async def test_a_cancelled_queue_batch_takes_nothing_and_a_failed_queue_drains_first():
    q: ReceiveQueue[int] = ReceiveQueue()
    q.put(1)
    waiting = asyncio.create_task(q.get_batch(10))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert len(q) == 1 and q._watches == []
    waiting = asyncio.create_task(q.get_batch(10))
    await asyncio.sleep(0.01)
    q.fail(magnetar.ServiceClosed("closed"))
    assert await waiting == [1]  # woken by the failure, with what was queued
    with pytest.raises(magnetar.ServiceClosed):
        await q.get_batch(10)


async def test_queue_get_batch_blocking_is_woken_once_enough_is_queued():
    q: ReceiveQueue[int] = ReceiveQueue()
    loop = asyncio.get_running_loop()
    wakeups = []
    real_notify_all = q._batch_cond.notify_all

    def counting_notify_all() -> None:
        wakeups.append(1)
        real_notify_all()

    q._batch_cond.notify_all = counting_notify_all  # type: ignore[method-assign]
    taking = loop.run_in_executor(None, q.get_batch_blocking, 100, 0, 5.0)
    await _eventually(lambda: q._watches)
    for i in range(250):
        q.put(i)  # from the loop, as a consumer's partitions put
    assert await asyncio.wait_for(taking, 2) == list(range(100))
    assert wakeups == [1]  # one wake for the batch, not one per message
    assert q.get_batch_blocking(1000, 0, 0.01) == list(range(100, 250))
    started = time.monotonic()
    assert await loop.run_in_executor(None, q.get_batch_blocking, 10, 0, 0.1) == []
    assert time.monotonic() - started >= 0.09
