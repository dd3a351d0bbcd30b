"""Writing a ledger: pipelined, striped, quorum-acknowledged adds with ensemble changes.

``add_entry`` gives the entry the next id (LAP), sends it to its write set and returns a
future. An entry is confirmed once Qa bookies of its write set acknowledged it, and
confirmations are delivered strictly in entry order, advancing the LAC (which rides on
every later add). Adds to one bookie that are made in the same event-loop turn, of this
ledger and of every other ledger of the client, travel as one request on that bookie's
add stream (``addbatcher.py``); its answer comes back here per ledger.

When a bookie fails or times out, it stops counting at once; confirmations pause; a new
fragment starting at the first unconfirmed entry (LAC + 1) with a replacement bookie is
written to ZooKeeper with compare-and-set; then every pending entry is resent to the
bookies of its new write set it was not already acknowledged by, and confirmations go on.
A ``LEDGER_FENCED`` answer, or metadata showing recovery began, ends the handle: every
pending and later add fails with :class:`LedgerFenced`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable

from magnetar.common.errors import (
    EntryTooLarge,
    LedgerFenced,
    MagnetarError,
    MetadataVersionConflict,
    NoSuchLedger,
    ServiceClosed,
)
from magnetar.common.retry import RetryPolicy
from magnetar.common.tasks import BackgroundTasks
from magnetar.ledger.context import ClientContext
from magnetar.ledger.framing import frame
from magnetar.ledger.metadata import LedgerMetadata, LedgerState, write_set
from magnetar.ledger.placement import replace_bookies
from magnetar.ledger.reader import LedgerEntry, LedgerReader
from magnetar.proto.v1 import bookie_pb2 as pb

log = logging.getLogger(__name__)

class PendingAdd:
    __slots__ = ("entry_id", "message", "length", "future", "acked", "write_set")

    def __init__(self, entry_id: int, message: pb.AddEntry, length: int, future: asyncio.Future[int]) -> None:
        self.entry_id = entry_id
        self.message = message  # built once, sent to every bookie of the write set
        self.length = length
        self.future = future
        self.acked: set[str] = set()
        self.write_set: list[str] = []


_CLOSE_DRAIN_S = 2.0
"""How long :meth:`LedgerHandle.close` waits for writes beyond the ack quorum."""


class LedgerHandle:
    """The one writer of an open ledger (see the module docstring)."""

    # One per loaded topic (thousands per broker): attributes in slots; the __dict__ is made
    # only when something else is set on an instance (tests replace methods).
    __slots__ = (
        "ctx", "ledger_id", "metadata", "_version", "last_add_pushed", "last_add_confirmed", "length",
        "_pushed_length", "_pending", "_unanswered", "_drained", "_failed_bookies", "_changing", "_held",
        "_error", "_closed", "_tasks", "_write_sets", "_first_of_current",
        "__dict__",
    )

    def __init__(self, ctx: ClientContext, ledger_id: int, metadata: LedgerMetadata, version: int) -> None:
        self.ctx = ctx
        self.ledger_id = ledger_id
        self.metadata = metadata
        self._version = version
        self.last_add_pushed = -1
        self.last_add_confirmed = -1
        self.length = 0  # of confirmed entries
        self._pushed_length = 0
        self._pending: deque[PendingAdd] | tuple[()] = ()  # () while none: an idle ledger holds no deque
        self._unanswered = 0
        """Entries sent to a bookie (counted once per bookie) whose request is not answered yet."""
        self._drained: asyncio.Future[None] | None = None
        self._failed_bookies: set[str] = set()
        self._changing = False
        self._held: list[PendingAdd] = []
        self._error: MagnetarError | None = None
        self._closed = False
        self._tasks = BackgroundTasks(f"ledger {ledger_id} writer")
        self._write_sets: list[list[str]] = []
        self._first_of_current = 0
        self._cache_write_sets()

    def _cache_write_sets(self) -> None:
        """Entry e of the current fragment goes to ``_write_sets[e % E]``."""
        m = self.metadata
        self._first_of_current = m.fragments[-1].first_entry
        self._write_sets = [write_set(m.current_ensemble, m.write_quorum, e) for e in range(m.ensemble_size)]

    def _write_set(self, entry_id: int) -> list[str]:
        if entry_id >= self._first_of_current:
            return self._write_sets[entry_id % len(self._write_sets)]
        return self.metadata.write_set(entry_id)

    # -- adding --------------------------------------------------------------
    def add_entry(self, payload: bytes) -> asyncio.Future[int]:
        """Append ``payload``; the future gives its entry id once Qa bookies have it."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self._error is not None or self._closed:
            fut.set_exception(self._error or ServiceClosed(f"ledger {self.ledger_id} is closed"))
            return fut
        if len(payload) > self.ctx.config.max_entry_bytes:
            fut.set_exception(EntryTooLarge(len(payload), self.ctx.config.max_entry_bytes))
            return fut
        self.last_add_pushed += 1
        self._pushed_length += len(payload)
        entry_id = self.last_add_pushed
        message = pb.AddEntry(
            ledger_id=self.ledger_id, entry_id=entry_id, last_add_confirmed=self.last_add_confirmed,
            payload=frame(self._pushed_length, payload),
        )
        p = PendingAdd(entry_id, message, self._pushed_length, fut)
        pending = self._pending or deque()
        pending.append(p)
        self._pending = pending
        if self._changing:
            self._held.append(p)
        else:
            self._send(p, self._write_set(entry_id))
        return fut

    async def append(self, payload: bytes) -> int:
        """``add_entry`` and wait for the confirmation."""
        return await self.add_entry(payload)

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Confirmed entries first..last from the bookies, as the metadata places them now.

        Raises:
            InvalidArgument: the range is empty or reaches past the LAC.
        """
        reader = LedgerReader(self.ctx, self.ledger_id, self.metadata, self.last_add_confirmed)
        return await reader.read(first, last)

    def _send(self, p: PendingAdd, write_set: list[str], only: list[str] | None = None) -> None:
        p.write_set = write_set
        adds = self.ctx.adds
        bookies = only if only is not None else write_set
        self._unanswered += len(bookies)
        for bookie in bookies:
            adds.add(bookie, self, p)

    def on_add_answer(
        self, bookie: str, adds: list[PendingAdd], failed: dict[int, MagnetarError], error: MagnetarError | None
    ) -> None:
        self._unanswered -= len(adds)
        if self._unanswered == 0 and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._closed:  # answers of the writes beyond Qa still landing after close
            return
        if error is not None:
            self._on_bookie_error(bookie, error)
            return
        if failed:
            for p in adds:
                err = failed.get(p.entry_id)
                if isinstance(err, LedgerFenced | NoSuchLedger):
                    self._fail(err)
                    return
                if err is not None:
                    self._on_bookie_error(bookie, err)
                    return
        if bookie in self._failed_bookies:
            return
        for p in adds:
            if bookie in p.write_set:  # not an answer from a bookie replaced meanwhile
                p.acked.add(bookie)
        self._complete_in_order()

    def _complete_in_order(self) -> None:
        if self._changing:
            return
        qa = self.metadata.ack_quorum
        pending = self._pending
        while pending and len(pending[0].acked) >= qa:
            p = pending.popleft()  # type: ignore[union-attr]  # not empty: a deque
            self.last_add_confirmed = p.entry_id
            self.length = p.length
            if not p.future.done():
                p.future.set_result(p.entry_id)
        if not pending:
            self._pending = ()

    # -- failures and ensemble changes --------------------------------------
    def _on_bookie_error(self, bookie: str, exc: MagnetarError) -> None:
        if self._error is not None or bookie not in self.metadata.current_ensemble:
            return
        if bookie not in self._failed_bookies:
            log.warning("ledger %d: bookie %s failed (%s); changing the ensemble", self.ledger_id, bookie, exc.message)
            self._failed_bookies.add(bookie)
            for p in self._pending:
                p.acked.discard(bookie)
        if not self._changing:
            self._changing = True
            self._tasks.spawn(self._change_ensemble())

    async def _change_ensemble(self) -> None:
        try:
            while True:
                failed = self._failed_bookies & set(self.metadata.current_ensemble)
                if not failed:
                    break
                first = self.last_add_confirmed + 1
                writable = await self.ctx.registry.list_writable()
                new_ensemble = tuple(replace_bookies(self.metadata.current_ensemble, failed, writable))
                await self._update_metadata(functools.partial(LedgerMetadata.with_fragment, first_entry=first, bookies=new_ensemble))
                self._cache_write_sets()
                # Out of the ensemble now, so its late answers are ignored anyway; if it is
                # picked again later, its acks must count.
                self._failed_bookies -= failed
                log.info("ledger %d: new fragment from entry %d: %s", self.ledger_id, first, ",".join(new_ensemble))
                for p in self._pending:
                    if not p.write_set:  # held back, never sent: goes out below
                        continue
                    ws = self._write_set(p.entry_id)
                    p.acked &= set(ws)
                    self._send(p, ws, only=[b for b in ws if b not in p.acked and b not in p.write_set])
        except MagnetarError as exc:
            self._fail(exc)
            return
        finally:
            self._changing = False
        held, self._held = self._held, []
        for p in held:
            self._send(p, self._write_set(p.entry_id))
        self._complete_in_order()

    async def _update_metadata(self, fn: Callable[[LedgerMetadata], LedgerMetadata], attempts: int = 10) -> None:
        """Compare-and-set ``fn(metadata)``. On a conflict, re-read: a ledger no longer
        OPEN means recovery has begun (fenced); otherwise apply ``fn`` to the fresh copy."""
        async for _ in RetryPolicy(max_tries=attempts, delay_s=0.0).attempts():
            updated = fn(self.metadata)
            try:
                self._version = await self.ctx.store.write(self.ledger_id, updated, self._version)
                self.metadata = updated
                return
            except MetadataVersionConflict as exc:
                current, version = await self.ctx.store.read(self.ledger_id)
                if current.state is not LedgerState.OPEN:
                    raise LedgerFenced(self.ledger_id) from exc
                self.metadata, self._version = current, version
        raise MetadataVersionConflict(f"ledger {self.ledger_id}: metadata kept changing; gave up after {attempts} attempts")

    def _fail(self, exc: MagnetarError) -> None:
        if self._error is None:
            self._error = exc
            log.warning("ledger %d: writer stopped: %s", self.ledger_id, exc.message)
        pending, self._pending = self._pending, ()
        self._held = []
        for p in pending:
            if not p.future.done():
                p.future.set_exception(exc)

    # -- closing -------------------------------------------------------------
    async def close(self) -> LedgerMetadata:
        """Wait for pending adds, then mark the ledger CLOSED at the LAC.

        A writer whose adds failed (no writable bookie to replace a failed one, ZooKeeper
        trouble during an ensemble change) closes at its LAC too, as BookKeeper's does:
        the failed adds stay failed, and entries past the LAC that reached some bookies
        are never read. Calling ``close`` again after it failed retries it.

        Raises:
            LedgerFenced: another client recovered the ledger meanwhile.
            ServiceClosed: the handle was aborted.
            MetadataError: the metadata could not be written (nothing changed).
        """
        if self._pending:
            await asyncio.gather(*(p.future for p in list(self._pending)), return_exceptions=True)
        # Adds confirm at Qa; let the writes to the other Qw - Qa bookies land too (briefly),
        # so a closed ledger is fully replicated unless a bookie is slow or down.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CLOSE_DRAIN_S
        if self._unanswered:
            self._drained = loop.create_future()
            await asyncio.wait([self._drained], timeout=_CLOSE_DRAIN_S)
        await self._tasks.wait(timeout_s=max(0.0, deadline - loop.time()))
        self._closed = True
        try:
            if isinstance(self._error, LedgerFenced | ServiceClosed):
                raise self._error
            if self.metadata.is_closed:
                return self.metadata
            lac, length = self.last_add_confirmed, self.length
            await self._update_metadata(lambda m: m.closed(lac, length))
            return self.metadata
        finally:
            await self._tasks.close()

    async def abort(self, drain: bool = False) -> None:
        """Stop without closing the ledger (what a crashed writer leaves behind); with
        ``drain``, let pending adds finish first (their writers get their answers)."""
        if drain and self._pending:
            await asyncio.gather(*(p.future for p in list(self._pending)), return_exceptions=True)
        self._closed = True
        self._fail(ServiceClosed(f"ledger {self.ledger_id} handle aborted"))
        await self._tasks.close()
