"""A rate limit on entries copied, shared by one replica's workers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Throttle:
    """Entries are let through at ``rate`` per second on average (0: no limit): each
    :meth:`acquire` of ``n`` books ``n / rate`` seconds of a shared schedule and sleeps
    until its slot. Unused time is not saved up, so there are no bursts after idling."""

    def __init__(self, rate: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._next = 0.0

    def delay_for(self, n: int) -> float:
        """Book ``n`` entries; the seconds to wait before copying them."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        start = max(self._next, now)
        self._next = start + n / self.rate
        return start - now

    async def acquire(self, n: int) -> None:
        delay = self.delay_for(n)
        if delay > 0:
            await asyncio.sleep(delay)
