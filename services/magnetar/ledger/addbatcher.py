"""Adds to one bookie, from every ledger a client writes, gathered into one request.

BookKeeper's client writes every add for a bookie on that bookie's one channel, whatever
its ledger, and the bookie's journal groups them into one write and one fsync. Here a
:class:`BookieAddBatcher` per bookie takes the adds of every ledger handle of a client:
all adds made in one event-loop turn travel as ONE ``AddRequest`` (each entry names its
ledger), and at most ``MAX_IN_FLIGHT`` requests per bookie await an answer; adds made
meanwhile wait and go out together in the next request (as Nagle's algorithm does). No
added delay when the bookie keeps up, and one request for many entries of many ledgers
when it does not: 10,000 topics at 1 msg/s are 10,000 ledgers with one entry each per
second, which as one request per entry would cost 20,000 requests per second.

The answer is routed back per ledger: each handle gets its own entries of the request
with the failures the bookie reported for them, or the error that ended the request (a
broken stream, no answer within ``add_timeout_s``). Per ledger, entries reach a bookie
in the order they were added: one request's entries are journalled in order, and the
requests of one stream in the order they were written.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.common.errors import MagnetarError, Timeout
from magnetar.common.tasks import BackgroundTasks
from magnetar.proto.v1 import bookie_pb2 as pb

if TYPE_CHECKING:
    from magnetar.ledger.bookie_client import AddFailure

MAX_IN_FLIGHT = 2
"""Add requests per bookie awaiting an answer."""
MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""Payload bytes one request carries at most (more than three max-size entries; well
under gRPC's message limit, ``common/grpcutil.MAX_MESSAGE_BYTES``): many ledgers' large
entries queued while requests are in flight would otherwise make one request over that
limit, and the broken stream would fail every ledger in it. The rest goes next."""


class _AddTimeout(Protocol):
    @property
    def add_timeout_s(self) -> float: ...


class _AddSender(Protocol):
    async def send_add_request(self, request: pb.AddRequest) -> asyncio.Future[list[AddFailure]]: ...


class _AddSenders(Protocol):
    def get(self, address: str) -> _AddSender: ...


class AddContext(Protocol):
    """What the batchers need of the ledger client's context (``context.ClientContext``,
    which holds them: declared here, so this module does not import it)."""

    @property
    def config(self) -> _AddTimeout: ...

    @property
    def pool(self) -> _AddSenders: ...


class PendingEntry(Protocol):
    """What the batcher needs of an add (``handle.PendingAdd``)."""

    message: pb.AddEntry


class AddWriter(Protocol):
    """The writer of one ledger (``LedgerHandle``), told how its adds to a bookie went."""

    ledger_id: int

    def on_add_answer(
        self, bookie: str, adds: list[Any], failed: dict[int, MagnetarError], error: MagnetarError | None
    ) -> None:
        """The request that carried ``adds`` of this writer ended: ``failed`` are the
        bookie's rejections by entry id; ``error`` (or None) ended the whole request."""


class BookieAddBatcher:
    """The adds of every ledger for one bookie (see the module docstring)."""

    def __init__(self, ctx: AddContext, bookie: str, tasks: BackgroundTasks) -> None:
        self.ctx = ctx
        self.bookie = bookie
        self._tasks = tasks
        self.queued: list[tuple[AddWriter, PendingEntry]] = []
        self.in_flight = 0
        self.requests = 0
        """Requests sent so far (a measure of the batching)."""
        self._scheduled = False

    def add(self, writer: AddWriter, p: PendingEntry) -> None:
        self.queued.append((writer, p))
        if not self._scheduled and self.in_flight < MAX_IN_FLIGHT:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        batch = self._take()
        if batch:
            self.in_flight += 1
            self.requests += 1
            by_writer: dict[AddWriter, list[PendingEntry]] = {}
            for writer, p in batch:
                adds = by_writer.get(writer)
                if adds is None:
                    adds = by_writer[writer] = []
                adds.append(p)
            request = pb.AddRequest(entries=[p.message for _, p in batch])
            self._tasks.spawn(self._send(request, by_writer), name=f"adds to {self.bookie}")

    def _take(self) -> list[tuple[AddWriter, PendingEntry]]:
        """The queued adds up to ``MAX_REQUEST_BYTES`` of payload (at least one), in order."""
        queued = self.queued
        size, n = 0, 0
        for _, p in queued:
            size += len(p.message.payload)
            if size > MAX_REQUEST_BYTES and n:
                break
            n += 1
        if n == len(queued):
            self.queued = []
            return queued
        self.queued = queued[n:]
        return queued[:n]

    async def _send(self, request: pb.AddRequest, by_writer: dict[AddWriter, list[PendingEntry]]) -> None:
        error, failed = await self._request(request)
        rejected: dict[int, dict[int, MagnetarError]] = {}
        for lid, eid, err in failed:
            rejected.setdefault(lid, {})[eid] = err
        for writer, adds in by_writer.items():
            writer.on_add_answer(self.bookie, adds, rejected.get(writer.ledger_id, {}), error)

    async def _request(self, request: pb.AddRequest) -> tuple[MagnetarError | None, list[AddFailure]]:
        """Send, await the answer; (the error that ended the request, the rejected entries)."""
        timeout_s = self.ctx.config.add_timeout_s
        try:
            # The bound covers opening the add stream too: to an address that vanished
            # (packets dropped) gRPC would try to connect for 20 s.
            async with asyncio.timeout(timeout_s):
                answer = await self.ctx.pool.get(self.bookie).send_add_request(request)
                return None, await answer
        except TimeoutError:
            return Timeout(f"bookie {self.bookie} did not answer adds within {timeout_s:g} s"), []
        except MagnetarError as exc:
            return exc, []
        finally:
            self.in_flight -= 1
            if self.queued and not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)


class AddBatchers:
    """One :class:`BookieAddBatcher` per bookie address, shared by a client's ledgers."""

    def __init__(self, ctx: AddContext) -> None:
        self.ctx = ctx
        self._batchers: dict[str, BookieAddBatcher] = {}
        self._tasks = BackgroundTasks("ledger add batchers")

    def add(self, bookie: str, writer: AddWriter, p: PendingEntry) -> None:
        """Queue ``p`` for ``bookie``; it goes out with every other add made this turn."""
        batcher = self._batchers.get(bookie)
        if batcher is None:
            batcher = self._batchers[bookie] = BookieAddBatcher(self.ctx, bookie, self._tasks)
        batcher.add(writer, p)

    def requests(self, bookie: str) -> int:
        """Add requests sent to ``bookie`` so far."""
        batcher = self._batchers.get(bookie)
        return 0 if batcher is None else batcher.requests

    async def close(self) -> None:
        """Cancel the requests still awaiting an answer (their writers are closing)."""
        await self._tasks.close()
