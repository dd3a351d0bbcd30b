"""The blocking client's per-message paths (posted to the loop, no round trip each)."""

from __future__ import annotations

import threading
import time

import pytest
from test_client_sdk import _TwinThread

import magnetar
from magnetar.client.receive_queue import ReceiveQueue
from magnetar.client.sync import _LoopThread, _Room


def test_posted_calls_run_in_order_and_wake_the_loop_once_per_burst():
    runner = _LoopThread()
    try:
        seen: list[int] = []
        done = threading.Event()
        wakeups = []
        real = runner.drain

        def counting_drain() -> None:
            wakeups.append(1)
            real()

        runner.drain = counting_drain  # type: ignore[method-assign]
        for i in range(10_000):
            runner.post(seen.append, i)
        runner.post(lambda: done.set())
        assert done.wait(5)
        assert seen == list(range(10_000))
        assert len(wakeups) < 10_000
    finally:
        runner.stop()


def test_room_blocks_a_thread_until_the_loop_releases():
    room = _Room(2)
    room.take()
    room.take()
    assert room.full()
    released = threading.Event()

    def waiter() -> None:
        room.wait(lambda: None)
        released.set()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    assert not released.is_set()
    room.release()
    assert released.wait(2)
    t.join(2)


def test_receive_queue_get_blocking_from_a_thread():
    q: ReceiveQueue[int] = ReceiveQueue()
    q.put(1)
    assert q.get_blocking(0) == 1
    with pytest.raises(magnetar.Timeout):
        q.get_blocking(0.02)
    threading.Timer(0.05, q.put, (2,)).start()
    assert q.get_blocking(2) == 2
    q.put(3)
    q.put(4)
    assert q.remove_if(lambda i: i == 3) == 1
    assert q.get_blocking(0) == 4
    threading.Timer(0.05, q.fail, (magnetar.ServiceClosed("closed"),)).start()
    with pytest.raises(magnetar.ServiceClosed):
        q.get_blocking(None)


def test_blocking_client_many_sends_acks_and_a_full_queue():
    server = _TwinThread()
    try:
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            consumer = client.subscribe("fast", "s", initial_position=magnetar.InitialPosition.Earliest)
            producer = client.create_producer("fast", max_pending_messages=50, block_if_queue_full=True)
            results: list[object] = []
            for i in range(2000):  # more than the pending limit: the caller blocks, never fails
                producer.send_async(b"m%d" % i, lambda res, mid: results.append(res))
            mid = producer.send(b"last")
            assert mid.entry_id() >= 0
            producer.flush()
            assert len(results) == 2000 and all(r is magnetar.Result.Ok for r in results)
            got = []
            for _ in range(2001):
                msg = consumer.receive(2000)
                got.append(msg.data())
                consumer.acknowledge(msg)
            assert got == [b"m%d" % i for i in range(2000)] + [b"last"]
            with pytest.raises(TypeError):
                consumer.acknowledge("not a message")  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                producer.send_async("not bytes", None)  # type: ignore[arg-type]
            consumer.close()
            acked = {e for _, _, ids in server.twin.state.acks for _, e in ids}
            assert acked and max(acked) == max(e for e in acked)

            strict = client.create_producer("strict", max_pending_messages=1, batching_max_publish_delay_ms=1000)
            strict.send_async(b"a", None)
            with pytest.raises(magnetar.ProducerQueueIsFull):  # no callback: raised
                strict.send_async(b"b", None)
            strict.close()
            with pytest.raises(magnetar.ServiceClosed):
                strict.send_async(b"c", None)
            producer.close()
    finally:
        server.close()
