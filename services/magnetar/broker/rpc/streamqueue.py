"""The queue a producer's or consumer's stream (or session handle) hands its messages
through between its tasks: what ``asyncio.Queue`` offers them (``put``, ``put_nowait``,
``get``, ``get_nowait``, ``empty``; bounded or not), holding no buffer while empty.

An idle broker holds one or two per attached producer and consumer, for hours: an empty
``asyncio.Queue`` is about 3.3 KiB (its three deques and an Event), this one about
100 bytes. Every waiter (getter or putter) is woken on any change and looks again, so
any number may wait and a cancelled one takes nothing with it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class StreamQueue(Generic[T]):
    """A FIFO queue; ``maxsize`` 0: unbounded."""

    __slots__ = ("_items", "_maxsize", "_waiters")

    def __init__(self, maxsize: int = 0) -> None:
        self._items: deque[T] | None = None
        self._maxsize = maxsize
        self._waiters: list[asyncio.Future[None]] | None = None

    def qsize(self) -> int:
        return len(self._items) if self._items is not None else 0

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return 0 < self._maxsize <= self.qsize()

    def put_nowait(self, item: T) -> None:
        """Raises: asyncio.QueueFull."""
        items = self._items
        if items is None:
            items = self._items = deque()
        elif 0 < self._maxsize <= len(items):
            raise asyncio.QueueFull
        items.append(item)
        if self._waiters is not None:
            self._wake()

    async def put(self, item: T) -> None:
        """Add ``item``, waiting for room first."""
        while self.full():
            await self._wait()
        self.put_nowait(item)

    def get_nowait(self) -> T:
        """Raises: asyncio.QueueEmpty."""
        items = self._items
        if not items:
            raise asyncio.QueueEmpty
        item = items.popleft()
        if not items:
            self._items = None
        if self._waiters is not None:
            self._wake()
        return item

    async def get(self) -> T:
        """The oldest item, waiting for one."""
        while not self._items:
            await self._wait()
        return self.get_nowait()

    def _wait(self) -> asyncio.Future[None]:
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = [waiter]
        else:
            self._waiters.append(waiter)
        return waiter

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)
