"""Background tasks with an owner (CONVENTIONS rule 8): spawned, kept until done, logged
when they fail, awaited or cancelled when the owner closes.

The event loop keeps only weak references to tasks, so a task nobody holds may be
garbage-collected mid-flight, and an exception nobody retrieves surfaces only as
"Task exception was never retrieved" at collection time. :class:`BackgroundTasks` holds
each task until it ends and logs an exception as soon as the task ends with one.
:class:`KeyedTasks` does the same with the latest task per key reachable by that key
(a broker's topic closes, by topic name). :class:`PeriodicRounds` is one owned task that
runs a round every interval (a broker's retention and namespace policy checks).

Spawning after :meth:`BackgroundTasks.close` is allowed: the task is kept like any other
and a later ``close()`` stops it. Owners that must not start work once closed check their
own closed flag first (most already refuse the request that would spawn it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

TaskErrorHandler = Callable[["asyncio.Task[Any]", BaseException], None]


def _others(tasks: Iterable[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """``tasks`` without the calling task (awaiting or cancelling itself would hang or abort it)."""
    current = asyncio.current_task()
    return [t for t in tasks if t is not current]


async def _wait(tasks: list[asyncio.Task[Any]], timeout_s: float | None) -> None:
    if not tasks:
        return
    if timeout_s is None:
        await asyncio.gather(*tasks, return_exceptions=True)
    else:
        await asyncio.wait(tasks, timeout=timeout_s)


class BackgroundTasks:
    """The background tasks of one owner.

    Args:
        owner: names the owner in the log line of a failed task.
        on_error: called with the task and its exception instead of logging it, when a
            task ends with an exception (not when it is cancelled).
    """

    __slots__ = ("owner", "_on_error", "_tasks")

    def __init__(self, owner: str = "", *, on_error: TaskErrorHandler | None = None) -> None:
        self.owner = owner
        self._on_error = on_error
        # None while no task runs: a broker has several owners per topic, mostly idle (a set is 216 bytes)
        self._tasks: set[asyncio.Task[Any]] | None = None

    def spawn(self, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        """Run ``coro`` as a task of the running loop, kept until it ends.

        Args:
            coro: the coroutine to run.
            name: the task's name (shown in logs and ``asyncio`` debugging).

        Returns:
            The task; the caller may await or cancel it too.
        """
        task = asyncio.get_running_loop().create_task(coro, name=name)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        if self._tasks is not None:
            self._tasks.discard(task)
            if not self._tasks:
                self._tasks = None
        exc = _failure(task)
        if exc is not None:
            _report(self.owner, f"background task {task.get_name()}", exc, self._on_error, task)

    def __len__(self) -> int:
        return len(self._tasks) if self._tasks is not None else 0

    def __contains__(self, task: object) -> bool:
        return self._tasks is not None and task in self._tasks

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks not ended yet (their done callbacks not run yet), the caller's excluded."""
        return _others(self._tasks or ())

    async def wait(self, timeout_s: float | None = None) -> None:
        """Wait until the current tasks end; their exceptions are not raised.

        Args:
            timeout_s: give up waiting (the tasks keep running) after this many seconds;
                None waits for all. Without a timeout, cancelling the waiter cancels the
                tasks too (as ``asyncio.gather`` does); with one, it does not.
        """
        await _wait(self.tasks(), timeout_s)

    def cancel(self) -> list[asyncio.Task[Any]]:
        """Cancel the current tasks without waiting for them.

        Returns:
            The tasks cancelled.
        """
        tasks = self.tasks()
        for task in tasks:
            task.cancel()
        return tasks

    async def close(self) -> None:
        """Cancel the current tasks and wait until they have ended."""
        await _wait(self.cancel(), None)


class KeyedTasks(Generic[K]):
    """Background tasks of one owner, the latest one per key reachable by its key.

    A task spawned under a key already in use replaces the older one in the index (the
    older task keeps running, still owned, but :meth:`get` and :meth:`wait` no longer see
    it); a task leaves the index when it ends, unless replaced meanwhile.

    Args:
        owner: names the owner in the log line of a failed task.
        on_error: called with the key and the exception instead of logging it, when a
            task ends with an exception (not when it is cancelled).
    """

    def __init__(self, owner: str = "", *, on_error: Callable[[K, BaseException], None] | None = None) -> None:
        self.owner = owner
        self._on_error = on_error
        self._all = BackgroundTasks(owner, on_error=lambda _task, _exc: None)  # reported by _done below
        self._latest: dict[K, asyncio.Task[Any]] = {}

    def spawn(self, key: K, coro: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
        """Run ``coro`` as a task kept until it ends and reachable by ``key`` meanwhile.

        Args:
            key: the key the task is found by.
            coro: the coroutine to run.
            name: the task's name.

        Returns:
            The task.
        """
        task = self._all.spawn(coro, name=name)
        self._latest[key] = task
        task.add_done_callback(lambda t: self._done(key, t))
        return task

    def _done(self, key: K, task: asyncio.Task[Any]) -> None:
        if self._latest.get(key) is task:
            del self._latest[key]
        exc = _failure(task)
        if exc is not None:
            _report(self.owner, f"background task for {key!r}", exc, self._on_error, key)

    def get(self, key: K) -> asyncio.Task[Any] | None:
        """The running task spawned last under ``key``, or None."""
        return self._latest.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._latest

    def __len__(self) -> int:
        return len(self._latest)

    async def wait(self, keys: Iterable[K] | None = None, timeout_s: float | None = None) -> None:
        """Wait until the latest task of each of ``keys`` (default: every key) has ended;
        exceptions are not raised.

        Args:
            keys: the keys to wait for; keys without a running task are skipped.
            timeout_s: as in :meth:`BackgroundTasks.wait`.
        """
        chosen = self._latest.values() if keys is None else [self._latest[k] for k in keys if k in self._latest]
        await _wait(_others(chosen), timeout_s)

    async def close(self) -> None:
        """Cancel every task (replaced ones too) and wait until they have ended."""
        await self._all.close()


def _failure(task: asyncio.Task[Any]) -> BaseException | None:
    """What a finished task raised (None when it returned or was cancelled)."""
    return None if task.cancelled() else task.exception()


def _report(owner: str, what: str, exc: BaseException, on_error: Callable[[Any, BaseException], object] | None, arg: Any) -> None:
    """Hand a failure to the owner's ``on_error(arg, exc)``, or log it."""
    if on_error is not None:
        on_error(arg, exc)
    else:
        log.error("%s: %s failed", owner or "owner", what, exc_info=exc)


class PeriodicRounds:
    """One owned task running ``round_()`` every ``interval_s()`` seconds (read anew
    each time) from :meth:`start` until :meth:`close`. A round that raises is logged and
    the next one runs: a bug must not end the rounds for good."""

    def __init__(self, name: str, interval_s: Callable[[], float], round_: Callable[[], Awaitable[Any]]) -> None:
        self.name = name
        self._interval_s = interval_s
        self._round = round_
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s())
            try:
                await self._round()
            except Exception:
                log.exception("%s round failed", self.name)
