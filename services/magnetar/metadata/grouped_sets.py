"""Compare-and-set writes made in one event-loop turn, sent as one ZooKeeper multi-operation.

A broker with 10,000 topics at 1 msg/s stores 10,000 cursors a second (each at most once
a second, as Pulsar's ``managedLedgerDefaultMarkDeleteRateLimit``). As one ``setData``
each, that is 10,000 ZooKeeper requests a second through one session: the kazoo client's
thread and the server spend themselves on them, and the lease's pings wait behind them.
:class:`GroupedSets` sends the writes queued in one loop turn as one multi-operation
(one request, one transaction in ZooKeeper's log), at most ``MAX_IN_FLIGHT`` at once:
writes made while that many are unanswered go out together in the next one.

Each write keeps its own compare-and-set: a multi-operation is all or nothing, so when one
of its writes fails (the version changed: another broker took the topic; the znode is
gone) nothing was written, and each write of it is sent again on its own, so only that
one fails and the others succeed as if sent alone.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from magnetar.common.errors import MagnetarError, MetadataVersionConflict, NotFound, ServiceClosed
from magnetar.common.tasks import BackgroundTasks
from magnetar.metadata.errors import MetadataTooLarge
from magnetar.metadata.nodes import NodeStat, Op
from magnetar.metadata.session import MAX_REQUEST_BYTES, OP_OVERHEAD_BYTES

MAX_IN_FLIGHT = 4
"""Multi-operations awaiting ZooKeeper's answer."""
MAX_GROUP_BYTES = MAX_REQUEST_BYTES // 4
"""Paths and data of one multi-operation at most (a quarter of ZooKeeper's request limit:
a large request delays every answer behind it, the lease's pings among them)."""


class SetSession(Protocol):
    """What :class:`GroupedSets` calls (``ZkSession``)."""

    async def set(self, path: str, data: bytes, version: int = -1) -> NodeStat: ...

    async def multi(self, ops: list[Op]) -> list[object]: ...


class _Write:
    __slots__ = ("op", "size", "future")

    def __init__(self, op: Op, future: asyncio.Future[int]) -> None:
        self.op = op
        self.size = OP_OVERHEAD_BYTES + len(op.path.encode()) + len(op.data)
        self.future = future


class GroupedSets:
    """Versioned ``set`` calls grouped per loop turn (see the module docstring)."""

    def __init__(self, session: SetSession) -> None:
        self._session = session
        self._queued: list[_Write] = []
        self._in_flight = 0
        self._scheduled = False
        self._tasks = BackgroundTasks("grouped ZooKeeper writes")
        self.requests = 0
        """Requests sent (multi-operations and single sets)."""

    async def set(self, path: str, data: bytes, version: int) -> int:
        """Replace ``path``'s data if its version is ``version``; returns the new version.

        Raises:
            As ``ZkSession.set``: MetadataVersionConflict, NotFound, MetadataError …
        """
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queued.append(_Write(Op.set(path, data, version), fut))
        self._schedule()
        return await fut

    def _schedule(self) -> None:
        if not self._scheduled and self._queued and self._in_flight < MAX_IN_FLIGHT:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        queued = [w for w in self._queued if not w.future.done()]  # callers cancelled meanwhile
        size, n = 0, 0
        for w in queued:
            size += w.size
            if size > MAX_GROUP_BYTES and n:
                break
            n += 1
        group, self._queued = queued[:n], queued[n:]
        if group:
            self._in_flight += 1
            self._tasks.spawn(self._send(group), name="grouped ZooKeeper writes")
        self._schedule()

    async def _send(self, group: list[_Write]) -> None:
        try:
            if len(group) > 1:
                self.requests += 1
                try:
                    results = await self._session.multi([w.op for w in group])
                except (MetadataVersionConflict, NotFound, MetadataTooLarge):
                    pass  # one of them failed, so none was written: each goes again alone
                except MagnetarError as exc:  # ZooKeeper trouble: as each would have met it
                    for w in group:
                        if not w.future.done():
                            w.future.set_exception(exc)
                    return
                else:
                    for w, stat in zip(group, results, strict=True):
                        if not w.future.done():
                            w.future.set_result(stat.version)  # type: ignore[attr-defined]
                    return
            await asyncio.gather(*(self._one(w) for w in group))
        except BaseException as exc:  # closed, or a bug: fail the writers, never hang them
            failure = exc if isinstance(exc, Exception) else ServiceClosed("grouped ZooKeeper writes closed")
            for w in group:
                if not w.future.done():
                    w.future.set_exception(failure)
            raise
        finally:
            self._in_flight -= 1
            self._schedule()

    async def _one(self, w: _Write) -> None:
        self.requests += 1
        try:
            stat = await self._session.set(w.op.path, w.op.data, w.op.version)
        except MagnetarError as exc:
            if not w.future.done():
                w.future.set_exception(exc)
        else:
            if not w.future.done():
                w.future.set_result(stat.version)

    async def close(self) -> None:
        """Stop the writes awaiting ZooKeeper (their callers see them cancelled)."""
        await self._tasks.close()
        for w in self._queued:
            w.future.cancel()
        self._queued = []
