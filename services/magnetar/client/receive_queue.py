"""The receive queue a consumer's partitions fill and the application drains.

The loop fills it; the application drains it either on the loop (:meth:`ReceiveQueue.get`)
or from another thread (:meth:`ReceiveQueue.get_blocking`, the blocking client's path:
no round trip to the loop per message).
"""

from __future__ import annotations

import asyncio
import threading
import time
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
        # For get_blocking: guards pops against remove_if, wakes blocked threads.
        self._cond = threading.Condition(threading.Lock())
        self._blocked = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(item)
                return
        self._items.append(item)
        if self._blocked:
            with self._cond:
                self._cond.notify()

    def remove_if(self, predicate: Callable[[T], bool]) -> int:
        """Drop the queued items for which ``predicate(item)`` is true; return how many."""
        with self._cond:  # in place: a thread in get_blocking may hold this deque
            keep = [i for i in self._items if not predicate(i)]
            dropped = len(self._items) - len(keep)
            if dropped:
                self._items.clear()
                self._items.extend(keep)
        return dropped

    def fail(self, exc: MagnetarError) -> None:
        """Gets raise ``exc`` once the queued items are drained."""
        self.error = exc
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(exc)
        with self._cond:
            self._cond.notify_all()

    def get_blocking(self, timeout_s: float | None = None) -> T:
        """The next item, waited for in the calling thread (never the loop's).

        Raises:
            Timeout: nothing arrived within ``timeout_s``.
        """
        with self._cond:
            if self._items:
                return self._items.popleft()
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            self._blocked += 1
            try:
                while not self._items:
                    if self.error is not None:
                        raise self.error
                    if deadline is None:
                        self._cond.wait()
                    else:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise Timeout(f"no message received within {timeout_s:g} s")
                        self._cond.wait(left)
                return self._items.popleft()
            finally:
                self._blocked -= 1

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
