"""The receive queue a consumer's partitions fill and the application drains.

The loop fills it; the application drains it either on the loop (:meth:`ReceiveQueue.get`,
:meth:`ReceiveQueue.get_batch`) or from another thread (:meth:`ReceiveQueue.get_blocking`,
:meth:`ReceiveQueue.get_batch_blocking`, the blocking client's path: no round trip to the
loop per message).

A batch get waits for the queue to hold enough (items or bytes) or for its timeout, then
takes what is there in one go. While it waits it is a :class:`_Watch` that ``put`` feeds:
the waiter is woken once, when enough is queued, not per item.
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
Size = Callable[[T], int]


class _Watch(Generic[T]):
    """A batch get waiting for ``max_items`` queued items or ``max_bytes`` queued bytes."""

    __slots__ = ("max_items", "max_bytes", "size", "bytes", "ready", "future")

    def __init__(
        self, max_items: int, max_bytes: int, size: Size[T] | None, queued_bytes: int,
        future: asyncio.Future[None] | None,
    ) -> None:  # fmt: skip
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.size = size  # None: no byte limit
        self.bytes = queued_bytes  # may count an item twice (see _watch): at worst an early wake
        self.ready = False
        self.future = future  # None: a thread waits on the queue's batch condition


class ReceiveQueue(Generic[T]):
    """A FIFO with timed gets that never lose an item to a timeout or a cancellation."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiters: deque[asyncio.Future[T]] = deque()
        self.error: MagnetarError | None = None
        # For get_blocking: guards pops against remove_if, wakes blocked threads.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._blocked = 0
        # Batch gets waiting (either kind); threads among them wait on _batch_cond.
        self._watches: list[_Watch[T]] = []
        self._batch_cond = threading.Condition(self._lock)

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
        if self._watches:
            self._feed(item)

    def _feed(self, item: T) -> None:
        """Count a queued item towards the waiting batches; wake those that have enough."""
        notify = False
        with self._lock:
            queued = len(self._items)
            for w in self._watches:
                if w.ready:
                    continue
                if w.size is not None:
                    w.bytes += w.size(item)
                if queued >= w.max_items or (w.size is not None and w.bytes >= w.max_bytes):
                    w.ready = True
                    if w.future is None:
                        notify = True
                    elif not w.future.done():
                        w.future.set_result(None)
            if notify:
                self._batch_cond.notify_all()

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
        with self._lock:
            self._cond.notify_all()
            for w in self._watches:
                w.ready = True
                if w.future is not None and not w.future.done():
                    w.future.set_result(None)
            self._batch_cond.notify_all()

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

    # -- batches -----------------------------------------------------------------------
    async def get_batch(
        self, max_items: int, max_bytes: int = 0, timeout_s: float | None = None, size: Size[T] | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> list[T]:  # fmt: skip
        """Up to ``max_items`` items (and up to ``max_bytes`` by ``size``, but at least one),
        taken at once as soon as that many items or bytes are queued, or after
        ``timeout_s`` (None: no timeout) with what is queued then, possibly nothing.

        ``on_wait`` is called once if the get has to wait. A cancelled get takes nothing.
        ``max_bytes`` <= 0 means no byte limit (``size`` is then not called).

        Raises:
            MagnetarError: the queue failed (see :meth:`fail`) and holds nothing.
        """
        if max_bytes <= 0:
            size = None
        with self._lock:
            watch = self._watch(max_items, max_bytes, size, timeout_s, asyncio.get_running_loop())
            if watch is None:
                return self._take(max_items, max_bytes, size)
        assert watch.future is not None
        try:
            if on_wait is not None:
                on_wait()
            await asyncio.wait({watch.future}, timeout=timeout_s)
        finally:
            watch.future.cancel()
            with self._lock:
                self._watches.remove(watch)
        with self._lock:
            return self._take(max_items, max_bytes, size)

    def get_batch_blocking(
        self, max_items: int, max_bytes: int = 0, timeout_s: float | None = None, size: Size[T] | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> list[T]:  # fmt: skip
        """:meth:`get_batch`, waited for in the calling thread (never the loop's)."""
        if max_bytes <= 0:
            size = None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            watch = self._watch(max_items, max_bytes, size, timeout_s, None)
            if watch is None:
                return self._take(max_items, max_bytes, size)
        try:
            if on_wait is not None:
                on_wait()
            with self._lock:
                while not watch.ready:
                    if deadline is None:
                        self._batch_cond.wait()
                        continue
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._batch_cond.wait(left)
        finally:
            with self._lock:
                self._watches.remove(watch)
        with self._lock:
            return self._take(max_items, max_bytes, size)

    def _watch(
        self, max_items: int, max_bytes: int, size: Size[T] | None, timeout_s: float | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> _Watch[T] | None:  # fmt: skip
        """A registered watch, or None when the batch is to be taken now. Holds the lock."""
        items = self._items
        if len(items) >= max_items or self.error is not None or (timeout_s is not None and timeout_s <= 0):
            return None
        queued_bytes = 0
        if size is not None:
            # A copy: the loop may append meanwhile (only under the GIL is copy() atomic).
            # An item appended after the watch is registered is fed too: counted twice at
            # worst, which only wakes the waiter early.
            queued_bytes = sum(map(size, items.copy()))
            if queued_bytes >= max_bytes:
                return None
        watch = _Watch(max_items, max_bytes, size, queued_bytes, None if loop is None else loop.create_future())
        self._watches.append(watch)
        return watch

    def _take(self, max_items: int, max_bytes: int, size: Size[T] | None) -> list[T]:
        """Pop up to the limits (at least one item when any is queued). Holds the lock:
        the loop only appends meanwhile, so the first ``n`` items stay put."""
        items = self._items
        n = min(len(items), max_items)
        if not n and self.error is not None:
            raise self.error
        popleft = items.popleft
        if size is None:
            return [popleft() for _ in range(n)]
        out: list[T] = []
        total = 0
        for _ in range(n):
            s = size(items[0])
            if out and total + s > max_bytes:
                break
            total += s
            out.append(popleft())
        return out
