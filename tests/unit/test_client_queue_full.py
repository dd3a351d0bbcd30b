"""A full producer queue, as pulsar-client reports it: ``send_async`` hands
``ProducerQueueIsFull`` to its callback (and, in the asyncio client, to the future it
returns) instead of raising; ``send`` raises it. Against the in-memory broker twin with
its receipts held back, so sends stay pending and the queue stays full."""

from __future__ import annotations

import asyncio
import threading

import pytest
from test_client_sdk import _eventually, _TwinThread

import magnetar
import magnetar.asyncio as ma
from magnetar.common import errors
from magnetar.common.errors import MagnetarError, ProducerQueueIsFull
from magnetar.common.message_id import MessageId


def test_the_error_is_in_the_tree_and_exported() -> None:
    assert issubclass(ProducerQueueIsFull, MagnetarError)
    assert magnetar.ProducerQueueIsFull is ma.ProducerQueueIsFull is ProducerQueueIsFull
    assert "ProducerQueueIsFull" in magnetar.__all__ and "ProducerQueueIsFull" in ma.__all__
    err = ProducerQueueIsFull("producer queue is full: 3 messages pending on t")
    assert err.code == "PRODUCER_QUEUE_IS_FULL" and err.retriable and str(err) == err.message
    rebuilt = errors.from_code(err.code, err.message)
    assert type(rebuilt) is ProducerQueueIsFull and rebuilt.message == err.message


def test_a_result_equals_the_errors_of_its_kind() -> None:
    full = ProducerQueueIsFull("full")
    assert full == magnetar.Result.ProducerQueueIsFull and magnetar.Result.ProducerQueueIsFull == full
    assert full != magnetar.Result.Ok and not (full == magnetar.Result.Ok)
    assert magnetar.Timeout("late") != magnetar.Result.ProducerQueueIsFull
    assert magnetar.Result.Ok == magnetar.Result.Ok != magnetar.Result.ProducerQueueIsFull
    assert magnetar.Result.ProducerQueueIsFull.value == 27  # Pulsar's ResultProducerQueueIsFull
    assert {magnetar.Result.Ok: "ok"}[magnetar.Result.Ok] == "ok"  # still hashable


async def test_aio_send_async_reports_a_full_queue_to_the_callback_and_the_future(twin, client) -> None:
    twin.state.hold_receipts = True  # every send stays pending (3 s: the send timeout)
    producer = await client.create_producer(
        "full-aio", batching_enabled=False, max_pending_messages=2, send_timeout_millis=3000
    )
    pending = [producer.send_async(b"a", None), producer.send_async(b"b", None)]
    await _eventually(lambda: len(twin.state.batches) == 2)
    loop_thread = threading.current_thread()
    calls: list[tuple[object, object, threading.Thread]] = []
    fut = producer.send_async(b"c", lambda res, mid: calls.append((res, mid, threading.current_thread())))
    assert calls == []  # not called inline: on the event loop, as every outcome
    with pytest.raises(magnetar.ProducerQueueIsFull, match="2 messages pending"):
        await fut
    await _eventually(lambda: len(calls) == 1)
    res, mid, thread = calls[0]
    assert isinstance(res, magnetar.ProducerQueueIsFull) and mid is None and thread is loop_thread
    assert res == ma.Result.ProducerQueueIsFull and res != ma.Result.Ok
    with pytest.raises(magnetar.ProducerQueueIsFull):
        await producer.send(b"d")
    bare = producer.send_async(b"e", None)  # no callback: the future alone says so
    with pytest.raises(magnetar.ProducerQueueIsFull):
        await bare
    await asyncio.sleep(0.05)
    assert len(twin.state.batches) == 2  # nothing refused went out
    assert not any(p.done() for p in pending)


async def test_aio_send_waits_with_block_if_queue_full_and_send_async_still_does_not(twin, client) -> None:
    twin.state.hold_receipts = True
    producer = await client.create_producer(
        "full-block", batching_enabled=False, max_pending_messages=1, block_if_queue_full=True,
        send_timeout_millis=300,
    )
    first = producer.send_async(b"a", None)
    refused = producer.send_async(b"b", None)  # never waits: fails at once
    with pytest.raises(magnetar.ProducerQueueIsFull):
        await refused
    waiting = asyncio.ensure_future(producer.send(b"c"))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # blocked for room, not refused
    with pytest.raises(magnetar.Timeout):
        await first  # its receipt never comes: the send timeout frees the room
    twin.state.hold_receipts = False
    assert isinstance(await asyncio.wait_for(waiting, 5), MessageId)


async def test_aio_room_comes_back_after_a_full_queue(twin, client) -> None:
    twin.state.hold_receipts = True
    producer = await client.create_producer(
        "full-again", batching_enabled=False, max_pending_messages=1, send_timeout_millis=200
    )
    first = producer.send_async(b"a", None)
    with pytest.raises(magnetar.ProducerQueueIsFull):
        await producer.send(b"b")
    with pytest.raises(magnetar.Timeout):
        await first
    twin.state.hold_receipts = False
    mid = await producer.send(b"c")  # retriable: the same call succeeds once there is room
    assert mid.entry_id() >= 0


def test_sync_send_async_calls_back_and_send_raises() -> None:
    server = _TwinThread()
    try:
        server.twin.state.hold_receipts = True
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            producer = client.create_producer(  # sends stay pending for the send timeout
                "full-sync", batching_enabled=False, max_pending_messages=2, send_timeout_millis=3000
            )
            producer.send_async(b"a", lambda res, mid: None)
            producer.send_async(b"b", lambda res, mid: None)
            got: list[tuple[object, object, str]] = []
            called = threading.Event()

            def callback(res: object, mid: object) -> None:
                got.append((res, mid, threading.current_thread().name))
                called.set()

            producer.send_async(b"c", callback)  # does not raise
            assert called.wait(5)
            res, mid, thread = got[0]
            assert isinstance(res, magnetar.ProducerQueueIsFull) and mid is None
            assert res == magnetar.Result.ProducerQueueIsFull and res != magnetar.Result.Ok
            assert thread == "magnetar-client"  # the client's thread, as every callback
            with pytest.raises(magnetar.ProducerQueueIsFull, match="2 messages pending"):
                producer.send(b"d")
            with pytest.raises(magnetar.ProducerQueueIsFull):
                producer.send_async(b"e", None)  # no callback to tell: raised instead
            assert len(server.twin.state.batches) <= 2
    finally:
        server.close()
