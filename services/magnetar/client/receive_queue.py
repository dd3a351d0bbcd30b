"""The receive queue a consumer's partitions fill and the application drains."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from magnetar.common.errors import MagnetarError, Timeout

T = TypeVar("T")


class ReceiveQueue(Generic[T]):
    """A FIFO with timed gets that never lose an item to a timeout or a cancellation."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiters: deque[asyncio.Future[T]] = deque()
        self.error: MagnetarError | None = None

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(item)
                return
        self._items.append(item)

    def remove_if(self, predicate: Callable[[T], bool]) -> int:
        """Drop the queued items for which ``predicate(item)`` is true; return how many."""
        keep = deque(i for i in self._items if not predicate(i))
        dropped = len(self._items) - len(keep)
        self._items = keep
        return dropped

    def fail(self, exc: MagnetarError) -> None:
        """Gets raise ``exc`` once the queued items are drained."""
        self.error = exc
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(exc)

    async def get(self, timeout_s: float | None = None) -> T:
        """The next item.

        Raises:
            Timeout: nothing arrived within ``timeout_s``.
        """
        if self._items:
            return self._items.popleft()
        if self.error is not None:
            raise self.error
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            # asyncio.wait, not wait_for: an item handed over as the timeout fires is kept.
            done, _ = await asyncio.wait({waiter}, timeout=timeout_s)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._items.appendleft(waiter.result())
            waiter.cancel()
            raise
        if not done:
            waiter.cancel()
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass
            raise Timeout(f"no message received within {timeout_s:g} s")
        return waiter.result()
