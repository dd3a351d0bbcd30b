"""A full producer queue against a real broker and bookie, as pulsar-client reports it:
``send_async`` does not raise but hands ``ProducerQueueIsFull`` to its callback (the
asyncio client's future fails with it too), ``send`` raises it, and nothing refused is
stored."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

import magnetar
import magnetar.asyncio as mg
from magnetar.testing.processes import start_all

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(bookie_factory, broker_factory):
    bookie = bookie_factory.create()
    broker = broker_factory.create(ensemble_size=1, write_quorum=1, ack_quorum=1)
    start_all([bookie, broker])  # start-ups overlap
    return bookie, broker


async def _drain(consumer: mg.Consumer) -> list[bytes]:
    """Every message the subscription has, until none comes for a while."""
    got = []
    while True:
        try:
            msg = await consumer.receive(timeout_millis=1000)
        except magnetar.Timeout:
            return got
        got.append(msg.data())
        await consumer.acknowledge(msg)


async def test_aio_send_async_reports_a_full_queue_and_send_raises(cluster):
    _, broker = cluster
    topic = "persistent://public/default/queue-full-aio"
    async with mg.Client(broker.address) as client:
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        producer = await client.create_producer(topic, batching_enabled=False, max_pending_messages=3)
        calls: list[tuple[object, object]] = []
        # No await in between: no receipt can come back, so the 4th and 5th find it full.
        futures = [
            producer.send_async(b"m%d" % i, lambda res, mid: calls.append((res, mid))) for i in range(5)
        ]
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert all(isinstance(o, mg.MessageId) for o in outcomes[:3]), outcomes
        assert [type(o) for o in outcomes[3:]] == [mg.ProducerQueueIsFull] * 2
        for _ in range(100):
            if len(calls) == 5:
                break
            await asyncio.sleep(0.01)
        assert sorted(m for r, m in calls if r == mg.Result.Ok) == outcomes[:3]
        refused = [(r, m) for r, m in calls if r == mg.Result.ProducerQueueIsFull]
        assert len(refused) == 2 and all(isinstance(r, mg.ProducerQueueIsFull) and m is None for r, m in refused)

        held = [producer.send_async(b"h%d" % i, None) for i in range(3)]
        with pytest.raises(mg.ProducerQueueIsFull):
            await producer.send(b"refused")
        await asyncio.gather(*held)
        after = await producer.send(b"after")  # room again: the same call succeeds
        assert after > outcomes[2]

        assert await _drain(consumer) == [b"m0", b"m1", b"m2", b"h0", b"h1", b"h2", b"after"]


def test_sync_send_async_calls_back_and_send_raises_while_the_bookie_is_paused(cluster):
    bookie, broker = cluster
    topic = "persistent://public/default/queue-full-sync"
    with magnetar.Client(broker.address) as client:
        consumer = client.subscribe(topic, "s", initial_position=magnetar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False, max_pending_messages=2)
        producer.send(b"first")  # the topic's ledger is open before the bookie stops
        stored: list[tuple[object, object]] = []
        stored_both = threading.Event()
        refused: list[tuple[object, object, str]] = []
        refused_one = threading.Event()

        def on_stored(res: object, mid: object) -> None:
            stored.append((res, mid))
            if len(stored) == 2:
                stored_both.set()

        def on_refused(res: object, mid: object) -> None:
            refused.append((res, mid, threading.current_thread().name))
            refused_one.set()

        pid = bookie.process.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # nothing can be stored: the two sends stay pending
        try:
            producer.send_async(b"a", on_stored)
            producer.send_async(b"b", on_stored)
            producer.send_async(b"c", on_refused)  # does not raise
            assert refused_one.wait(10)
            res, mid, thread = refused[0]
            assert isinstance(res, magnetar.ProducerQueueIsFull) and mid is None and thread == "magnetar-client"
            assert res == magnetar.Result.ProducerQueueIsFull
            with pytest.raises(magnetar.ProducerQueueIsFull):
                producer.send(b"d")
            with pytest.raises(magnetar.ProducerQueueIsFull):
                producer.send_async(b"e", None)  # no callback to tell: raised instead
            assert not stored
        finally:
            os.kill(pid, signal.SIGCONT)
        assert stored_both.wait(30)
        assert [r for r, _ in stored] == [magnetar.Result.Ok] * 2
        producer.send(b"last")
        got = []
        while True:
            try:
                msg = consumer.receive(timeout_millis=1000)
            except magnetar.Timeout:
                break
            got.append(msg.data())
            consumer.acknowledge(msg)
        assert got == [b"first", b"a", b"b", b"last"]
