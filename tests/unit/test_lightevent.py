"""LightEvent behaves as asyncio.Event for set, clear, is_set and wait (cancelled waits included)."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.common.lightevent import LightEvent

pytestmark = pytest.mark.asyncio


async def test_waiters_wake_on_set_and_a_set_event_does_not_block():
    event = LightEvent()
    waiters = [asyncio.create_task(event.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters) and not event.is_set()
    event.set()
    assert await asyncio.gather(*waiters) == [True, True, True]
    assert await event.wait() is True
    event.clear()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(event.wait(), 0.01)


async def test_a_cancelled_waiter_leaves_and_the_others_still_wake():
    event = LightEvent()
    gone, stays = asyncio.create_task(event.wait()), asyncio.create_task(event.wait())
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    event.set()
    assert await stays is True and gone.cancelled()
