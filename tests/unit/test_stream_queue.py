"""StreamQueue (broker/rpc/streamqueue.py): asyncio.Queue's put/get for the broker's
producer and consumer streams, holding no buffer while empty."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest

from magnetar.broker.rpc.streamqueue import StreamQueue


async def test_items_come_out_in_order_and_a_getter_waits_for_one() -> None:
    q: StreamQueue[int] = StreamQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    for i in range(3):
        q.put_nowait(i)
    assert await getter == 0
    assert [q.get_nowait(), q.get_nowait()] == [1, 2]
    assert q.empty() and q.qsize() == 0
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()


async def test_a_bounded_queue_refuses_or_holds_a_put_until_there_is_room() -> None:
    q: StreamQueue[int] = StreamQueue(2)
    await q.put(1)
    q.put_nowait(2)
    assert q.full()
    with pytest.raises(asyncio.QueueFull):
        q.put_nowait(3)
    putter = asyncio.create_task(q.put(3))
    await asyncio.sleep(0)
    assert not putter.done()
    assert await q.get() == 1
    await asyncio.wait_for(putter, 1)
    assert [q.get_nowait(), q.get_nowait()] == [2, 3]


async def test_a_cancelled_getter_takes_nothing_and_others_still_get() -> None:
    q: StreamQueue[str] = StreamQueue()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), 0.01)
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    first.cancel()
    q.put_nowait("x")
    assert await asyncio.wait_for(second, 1) == "x"
    assert first.cancelled() and q.empty()


async def test_an_empty_queue_holds_no_buffer() -> None:
    """What an idle producer or consumer costs the broker: an empty asyncio.Queue is
    about 3.3 KiB; an emptied StreamQueue keeps only itself."""
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        queues: list[StreamQueue[int]] = [StreamQueue(1000) for _ in range(1000)]
        for q in queues:  # used, then emptied, as an idle stream's
            q.put_nowait(1)
            await q.get()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    per_queue = sum(d.size_diff for d in after.compare_to(before, "filename")) / len(queues)
    assert per_queue < 200, per_queue
