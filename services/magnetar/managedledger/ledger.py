"""The managed ledger: a topic partition's log as an ordered list of ledgers.

One ledger is open for writes; adds are pipelined into it and complete in order with
their :class:`Position`. When it holds ``max_entries_per_ledger`` entries or
``max_size_per_ledger`` bytes, or is older than ``max_ledger_age_s``, it is closed and
a new ledger is created and appended to the stored list (compare-and-set); adds made
meanwhile wait and then go to the new ledger, in order. The age is checked by a loop
timer (``call_later``, every ``max_ledger_age_s / 4``, at most 60 s) armed by the first
add to a ledger: an empty ledger never rolls, so an idle topic has no timer.

Opening a managed ledger whose last ledger was left open (its owner died, or lost the
topic) recovers that ledger, which fences the old writer, so its next add fails with
:class:`LedgerFenced`.

A failed add fails every later pending add too (in flight or waiting for a new ledger),
so a producer that resends finds its messages in order. What happens next depends on
the error, as in Pulsar's ManagedLedgerImpl:

- A retriable one (not enough writable bookies, ZooKeeper trouble, a timeout): the
  ledger is closed at its last confirmed entry (state ``ClosedLedger``) and the next add
  creates a new ledger, trying again on every add until one can be created. Entries past
  the last confirmed one are never read, so a resent message is stored once.
- A lasting one (:class:`LedgerFenced`, the list changed by another broker, the topic
  deleted): the managed ledger is failed (``Fenced``): later adds fail at once with an
  error of the same class; the owner closes the topic (another broker owns it now).

Recently added entries are served from an in-memory cache; older ones, including older
entries of the open ledger, from the bookies (see :mod:`.reads`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from magnetar.common.errors import (
    EntryTooLarge,
    InvalidArgument,
    MagnetarError,
    MetadataVersionConflict,
    NoSuchLedger,
    ServiceClosed,
)
from magnetar.common.lightevent import LightEvent
from magnetar.common.tasks import BackgroundTasks
from magnetar.managedledger import retention, timesearch
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.cursor import ManagedCursor
from magnetar.managedledger.cursors import CursorRegistry
from magnetar.managedledger.layout import LedgerInfo, LedgerList
from magnetar.managedledger.ledgers import Ledgers, WriteHandle
from magnetar.managedledger.opening import load_ledger_list, register_new_ledger
from magnetar.managedledger.position import ManagedLedgerName, Position
from magnetar.managedledger.reads import Entry, EntryReads
from magnetar.managedledger.store import ManagedLedgerStore

log = logging.getLogger(__name__)


def is_lasting(exc: MagnetarError) -> bool:
    """True for an add or ledger-switch failure after which this broker must not write
    the managed ledger again: a fenced ledger, a list changed by another broker (both
    mean it took the topic over), a deleted topic, any non-retriable error."""
    return not exc.retriable or isinstance(exc, MetadataVersionConflict)


def same_error(exc: MagnetarError) -> MagnetarError:
    """A fresh error of the same class and fields, caused by ``exc`` (one per future)."""
    copy = exc.__class__.__new__(exc.__class__)
    copy.__dict__.update(exc.__dict__)
    copy.args = exc.args
    copy.__cause__ = exc
    return copy


class _AddOp:
    __slots__ = ("data", "future", "ledger_id", "entry_future", "deliver_at_ms")

    def __init__(self, data: bytes, future: asyncio.Future[Position], deliver_at_ms: int = 0) -> None:
        self.data = data
        self.future = future
        self.deliver_at_ms = deliver_at_ms
        self.ledger_id = -1
        self.entry_future: asyncio.Future[int] | None = None


class ManagedLedger:
    """A topic partition"s log (see the module docstring). Build with :meth:`open`."""

    # One per loaded topic (thousands per broker): attributes in slots; the __dict__ is made
    # only when something else is set on an instance (tests replace methods).
    __slots__ = (
        "name", "config", "_client", "_store", "_ledgers", "_version", "_properties", "_clock", "_reads",
        "_current", "_unclosed", "_pushed_entries", "_pushed_bytes", "_entries_added", "_inflight", "_queued",
        "_roll_task", "_age_timer", "_error", "_closing", "_closed", "_meta_lock", "_new_entries", "_cursors",
        "recovered_before", "_tasks",
        "__dict__",
    )

    def __init__(
        self,
        name: ManagedLedgerName,
        client: Ledgers,
        store: ManagedLedgerStore,
        config: ManagedLedgerConfig,
        ledgers: LedgerList,
        version: int,
        properties: dict[str, str],
        clock: Callable[[], float],
    ) -> None:
        self.name = name
        self.config = config
        self._client = client
        self._store = store
        self._ledgers = ledgers
        self._version = version
        self._properties = properties
        self._clock = clock
        self._reads = EntryReads(client, config)
        self._current: WriteHandle | None = None  # the open ledger
        self._unclosed: WriteHandle | None = None  # a ledger whose adds failed, until closed
        self._pushed_entries = 0
        self._pushed_bytes = 0
        self._entries_added = 0
        # () until the first add: an idle topic holds no deque (760 bytes each)
        self._inflight: deque[_AddOp] | tuple[()] = ()
        self._queued: deque[_AddOp] | tuple[()] = ()
        self._roll_task: asyncio.Task[None] | None = None
        self._age_timer: asyncio.TimerHandle | None = None
        """Armed while the open ledger has entries: rolls it over by age (no task, none while empty)."""
        self._error: MagnetarError | None = None
        self._closing = False
        self._closed = False
        self._meta_lock = asyncio.Lock()
        self._new_entries = LightEvent()
        self._cursors = CursorRegistry(self, store)
        self.recovered_before: Position | None = None
        """Set when the previous owner crashed (a ledger was left open): every entry before
        it may have been delivered by that owner (see :meth:`ManagedCursor.delivery_count`)."""
        self._tasks = BackgroundTasks(f"managed ledger {name}")

    # -- opening -----------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        tenant: str,
        namespace: str,
        topic: str,
        ledger_client: Ledgers,
        store: ManagedLedgerStore,
        config: ManagedLedgerConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> ManagedLedger:
        """Load (or create) the ledger list, recover a ledger left open, open a new one.

        Args:
            ledger_client: the process's :class:`LedgerClient`.
            clock: wall-clock seconds (ledger creation times and ages).

        Raises:
            MetadataVersionConflict: another broker changed the list meanwhile (it took the
                topic over); nothing was clobbered.
            NotEnoughBookies, RecoveryError, MetadataError: retriable trouble.
        """
        config = config or ManagedLedgerConfig()
        name = ManagedLedgerName(tenant, namespace, topic)
        loaded = await load_ledger_list(name, ledger_client, store)
        ledgers, version, properties, readers = loaded.ledgers, loaded.version, loaded.properties, loaded.readers
        last_stored = ledgers.last_confirmed()
        handle, version = await register_new_ledger(name, ledger_client, store, config, ledgers, version, properties, clock)
        ml = cls(name, ledger_client, store, config, ledgers, version, properties, clock)
        if loaded.recovered:
            ml.recovered_before = ml.next_position(last_stored)
        await ml._delete_ledgers(loaded.dropped)  # only now that the list without them is stored
        for ledger_id, reader in readers.items():
            ml._reads.remember(ledger_id, reader)
        ml._set_writer(handle)
        try:
            await ml._cursors.load()
        except BaseException:
            await ml.close()
            raise
        log.info("managed ledger %s opened: %d ledgers, %d entries", name, len(ledgers.ledgers), ml.number_of_entries)
        return ml

    def _set_writer(self, handle: WriteHandle) -> None:
        self._current = handle
        self._reads.writer = handle
        self._pushed_entries = 0
        self._pushed_bytes = 0

    # -- state -------------------------------------------------------------------
    @property
    def last_confirmed_position(self) -> Position:
        """The last stored entry; ``(ledger, -1)`` when the managed ledger is empty."""
        return self._ledgers.last_confirmed()

    @property
    def first_position(self) -> Position:
        """Where the first stored entry is (or the next one will be written)."""
        return self._ledgers.first_position()

    @property
    def number_of_entries(self) -> int:
        """Entries stored in all ledgers of the list."""
        return self._ledgers.number_of_entries

    @property
    def total_size(self) -> int:
        """Payload bytes stored in all ledgers of the list."""
        return self._ledgers.total_size

    @property
    def ledgers(self) -> list[LedgerInfo]:
        """Copies of the ledger list (the open ledger's entries: those confirmed so far)."""
        return [
            LedgerInfo(i.ledger_id, i.entries, i.size, i.created_ms, i.max_deliver_at_ms) for i in self._ledgers.ledgers
        ]

    @property
    def current_ledger_id(self) -> int | None:
        """The ledger open for writes (None while rolling over or closed)."""
        return self._current.ledger_id if self._current is not None else None

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def put_property(self, key: str, value: str | None) -> None:
        """Set (None: remove) a property of the ledger list, in memory: it is stored with
        the list's next write (a rollover, a trim, a clean close) or :meth:`store_properties`."""
        if value is None:
            self._properties.pop(key, None)
        else:
            self._properties[key] = value

    async def store_properties(self) -> None:
        """Write the ledger list (and so its properties) now.

        Raises:
            MetadataVersionConflict: another broker changed the list (it took the topic over).
            MetadataError: ZooKeeper trouble.
        """
        self._check_open()
        await self._save_list()

    @property
    def entries_added(self) -> int:
        """Entries added since this managed ledger was opened (Pulsar's entriesAddedCounter)."""
        return self._entries_added

    @property
    def pending_adds(self) -> int:
        """Adds not confirmed yet (sent to the bookies, or waiting for a new ledger)."""
        return len(self._inflight) + len(self._queued)

    @property
    def state(self) -> str:
        """As Pulsar names it: ``LedgerOpened`` (a ledger takes adds), ``ClosedLedger``
        (between ledgers), ``Fenced`` (an add failed), ``Closed``."""
        if self._closing:
            return "Closed"
        if self._error is not None:
            return "Fenced"
        return "LedgerOpened" if self._current is not None else "ClosedLedger"

    @property
    def is_fenced(self) -> bool:
        """True once an add failed (the managed ledger accepts no more adds)."""
        return self._error is not None

    @property
    def cache(self) -> Any:
        """The entry cache (size, hits and misses for stats)."""
        return self._reads.cache

    @property
    def layout(self) -> LedgerList:
        """The ledger list itself, for position arithmetic (do not change it)."""
        return self._ledgers

    def next_position(self, p: Position) -> Position:
        """The position after ``p`` (across ledger boundaries, skipping empty ledgers)."""
        return self._ledgers.next_position(Position.of(p))

    def previous_position(self, p: Position) -> Position:
        """The mark-delete position just before ``p``: ``(L, E - 1)``; ``(L, 0)`` gives ``(L, -1)``."""
        return self._ledgers.previous_position(Position.of(p))

    async def find_position_by_time(self, timestamp_ms: int, publish_time: Callable[[bytes], int]) -> Position:
        """The first stored entry with ``publish_time(data) >= timestamp_ms`` (binary
        search, see :mod:`.timesearch`); the position after the last entry when none is.

        Raises:
            InvalidArgument, NoSuchEntry, MagnetarError: a bad timestamp, an unreadable entry.
        """
        return await timesearch.find_position_by_time(self, timestamp_ms, publish_time)

    def contains(self, p: Position) -> bool:
        """True when ``p`` is a stored entry."""
        return self._ledgers.contains(p)

    def count_entries(self, first: Position, last: Position) -> int:
        """Stored entries in ``[first, last]``."""
        return self._ledgers.count(first, last)

    # -- adding ------------------------------------------------------------------
    def add_entry(self, data: bytes, deliver_at_ms: int = 0) -> asyncio.Future[Position]:
        """Append ``data``; the future gives its position once Qa bookies have it.

        ``deliver_at_ms``: the entry holds a delayed message due then (0: none); the
        ledger's :attr:`LedgerInfo.max_deliver_at_ms` follows it (retention counts from it).

        Futures complete in the order of the calls. A failure fails this and every later
        pending add with the same error class, and every add after it at once.
        """
        fut: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        error = self._refuse(data)
        if error is not None:
            fut.set_exception(error)
            return fut
        op = _AddOp(bytes(data), fut, deliver_at_ms)
        if self._roll_task is not None or self._current is None:
            queued = self._queued or deque()
            queued.append(op)
            self._queued = queued
            if self._roll_task is None:  # ClosedLedger: this add opens a new ledger
                self._roll_task = asyncio.get_running_loop().create_task(self._rollover())
        else:
            self._submit(op)
            self._maybe_roll()
        return fut

    def _refuse(self, data: bytes) -> MagnetarError | None:
        if self._error is not None:
            return same_error(self._error)
        if self._closing:
            return ServiceClosed(f"managed ledger {self.name} is closed")
        if not isinstance(data, bytes | bytearray | memoryview):
            return InvalidArgument(f"an entry is bytes, not {type(data).__name__}")
        limit = self._client.config.max_entry_bytes
        if len(data) > limit:
            return EntryTooLarge(len(data), limit)
        return None

    def _submit(self, op: _AddOp) -> None:
        handle = self._current
        assert handle is not None
        op.ledger_id = handle.ledger_id
        op.entry_future = handle.add_entry(op.data)
        self._pushed_entries += 1
        self._pushed_bytes += len(op.data)
        if self._age_timer is None:
            self._arm_age_timer()
        inflight = self._inflight or deque()
        inflight.append(op)
        self._inflight = inflight
        op.entry_future.add_done_callback(self._on_entry_done)

    def _on_entry_done(self, fut: asyncio.Future[int]) -> None:
        if not fut.cancelled():
            fut.exception()  # retrieved here even when the op was failed already
        added = False
        while self._inflight and self._inflight[0].entry_future.done():  # type: ignore[union-attr]
            op = self._inflight.popleft()  # type: ignore[union-attr]  # not empty: a deque
            ef = op.entry_future
            assert ef is not None
            exc = ServiceClosed("add cancelled") if ef.cancelled() else ef.exception()
            if exc is not None:
                err = exc if isinstance(exc, MagnetarError) else MagnetarError(f"add failed: {exc!r}")
                self._add_failed(err, op)
                break
            position = Position(op.ledger_id, ef.result())
            info = self._ledgers.find(op.ledger_id)
            if info is not None:
                info.entries = position.entry_id + 1
                info.size += len(op.data)
                if op.deliver_at_ms > info.max_deliver_at_ms:
                    info.max_deliver_at_ms = op.deliver_at_ms
            self._reads.cache.put(position, op.data)
            self._entries_added += 1
            if not op.future.done():
                op.future.set_result(position)
            added = True
        if not self._inflight:
            self._inflight = ()  # an idle topic gives its deque back
        if added:
            self._notify()

    def _add_failed(self, exc: MagnetarError, op: _AddOp) -> None:
        """An add failed: fail it and every pending add; then either fail the managed
        ledger (a lasting error) or close the failed ledger (see the module docstring)."""
        if is_lasting(exc) or self._closing:
            self._fail(exc, [op])
            return
        log.warning("managed ledger %s: ledger %d failed (%s); closing it, the next add opens a new one",
                    self.name, op.ledger_id, exc.message)
        self._fail_pending(exc, [op])
        handle = self._current
        if handle is not None and handle.ledger_id == op.ledger_id and self._roll_task is None:
            self._unclosed, self._current = handle, None
            self._roll_task = asyncio.get_running_loop().create_task(self._rollover())
        # else a rollover is closing that ledger already and opens the next one

    def _switch_failed(self, exc: MagnetarError) -> None:
        """Closing a ledger or creating the next one failed: a lasting error fails the
        managed ledger; otherwise the adds waiting fail and the next add tries again."""
        if is_lasting(exc) or self._closing:
            self._fail(exc)
            return
        log.warning("managed ledger %s: no ledger to write (%s); the next add tries again", self.name, exc.message)
        self._fail_pending(exc)

    def _fail(self, exc: MagnetarError, first: list[_AddOp] | None = None) -> None:
        """Fail the managed ledger: this and every pending add get ``exc``'s class."""
        if self._error is None:
            self._error = exc
            log.warning("managed ledger %s failed: %s", self.name, exc.message)
        self._fail_pending(exc, first)

    def _fail_pending(self, exc: MagnetarError, first: list[_AddOp] | None = None) -> None:
        """Fail ``first`` and every add in flight or waiting with ``exc``'s class."""
        ops = list(first or []) + list(self._inflight) + list(self._queued)
        self._inflight = self._queued = ()
        for op in ops:
            if not op.future.done():
                op.future.set_exception(same_error(exc))
        self._notify()

    def _notify(self) -> None:
        event, self._new_entries = self._new_entries, LightEvent()
        event.set()

    async def wait_for_new_entries(self, after: Position, timeout_s: float | None = None) -> bool:
        """Wait until an entry after ``after`` is stored; False when ``timeout_s`` passed first.

        Raises:
            ServiceClosed: the managed ledger was closed; or the error that failed it.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            if self.last_confirmed_position > after:
                return True
            if self._error is not None:
                raise same_error(self._error)
            if self._closing:
                raise ServiceClosed(f"managed ledger {self.name} is closed")
            event = self._new_entries
            try:
                async with asyncio.timeout_at(deadline):
                    await event.wait()
            except TimeoutError:
                return self.last_confirmed_position > after

    # -- rollover ----------------------------------------------------------------
    def _should_roll(self) -> bool:
        if self._pushed_entries == 0:
            return False
        if self._pushed_entries >= self.config.max_entries_per_ledger:
            return True
        if self._pushed_bytes >= self.config.max_size_per_ledger:
            return True
        assert self._current is not None
        info = self._ledgers.find(self._current.ledger_id)
        age_s = self._clock() - (info.created_ms / 1000 if info else 0)
        return age_s >= self.config.max_ledger_age_s

    def _maybe_roll(self) -> None:
        if self._roll_task is not None or self._current is None or self._error or self._closing:
            return
        if self._should_roll():
            self._roll_task = asyncio.get_running_loop().create_task(self._rollover())

    async def _rollover(self) -> None:
        try:
            await self._roll_once()
        finally:
            self._roll_task = None
        self._submit_queued()

    async def _roll_once(self) -> None:
        """Close the open ledger (or one whose adds failed), then create the next one:
        at once for a rollover, only for waiting adds after a failure."""
        rolling = self._current is not None
        old = self._current or self._unclosed
        empty: list[int] = []  # deleted once the list without them is stored
        if old is not None:
            try:
                closed = await old.close()
            except MagnetarError as exc:
                # Closed first or not at all: a new ledger beside a failed one still open
                # would let the next owner's recovery store entries never acknowledged.
                self._current, self._unclosed = None, old
                self._switch_failed(exc)
                return
            self._unclosed = None
            self._reads.writer = None
            self._current = None
            self._ledgers.open_ledger_id = None
            info = self._ledgers.find(old.ledger_id)
            if info is not None:
                info.entries, info.size = closed.last_entry_id + 1, closed.length
                if info.entries == 0:  # as Pulsar: an empty ledger leaves the list
                    self._ledgers.remove({old.ledger_id})
                    self._reads.forget({old.ledger_id})
                    empty.append(old.ledger_id)
            log.info("managed ledger %s: ledger %d closed at %d entries", self.name, old.ledger_id, closed.last_entry_id + 1)
        if self._closing or (not rolling and not self._queued):
            # Store the closed ledger's count; after a failure the next add creates a ledger.
            if old is not None and await self._save_list_quietly():
                self._delete_later(empty)
            if self._closing or not self._queued:
                return
        try:
            async with self._meta_lock:
                handle, self._version = await register_new_ledger(
                    self.name, self._client, self._store, self.config, self._ledgers, self._version,
                    self._properties, self._clock,
                )
        except MagnetarError as exc:
            self._switch_failed(exc)
            return
        self._set_writer(handle)
        self._delete_later(empty)

    def _delete_later(self, ledger_ids: list[int]) -> None:
        if ledger_ids:  # in the background: bookies that are down must not hold up adds
            self._tasks.spawn(self._delete_ledgers(ledger_ids), name=f"delete-empty-ledgers:{self.name}")

    def _submit_queued(self) -> None:
        """Send adds that waited for the new ledger, rolling over again when it fills up."""
        while self._queued and self._current is not None and self._error is None:
            if self._roll_task is None and not self._closing and self._should_roll():
                self._maybe_roll()
            if self._roll_task is not None:
                return
            self._submit(self._queued.popleft())  # type: ignore[union-attr]  # not empty: a deque
        self._maybe_roll()

    def _arm_age_timer(self) -> None:
        interval = max(0.05, min(self.config.max_ledger_age_s / 4, 60.0))
        self._age_timer = asyncio.get_running_loop().call_later(interval, self._on_age_timer)

    def _on_age_timer(self) -> None:
        self._age_timer = None
        if self._closing:
            return
        self._maybe_roll()
        if self._pushed_entries:  # still the full ledger (or rolling): look again; a new one re-arms on its first add
            self._arm_age_timer()

    async def _save_list(self) -> None:
        async with self._meta_lock:
            doc = {"ledgers": self._ledgers.to_docs(), "properties": self._properties}
            self._version = await self._store.update(*self.name, doc, self._version)

    async def _save_list_quietly(self) -> bool:
        """Store the list; False (logged) when that failed."""
        try:
            await self._save_list()
        except MagnetarError as exc:
            log.warning("managed ledger %s: could not store the ledger list: %s", self.name, exc.message)
            return False
        return True

    # -- reading -----------------------------------------------------------------
    async def read_entries(self, start: Position, max_entries: int, max_bytes: int) -> list[Entry]:
        """Stored entries from ``start`` on, across ledgers, in order.

        Reads at most ``max_entries`` entries, and stops before an entry that would take
        the total payload above ``max_bytes`` (the first entry is always returned).
        A ``start`` past the last stored entry gives an empty list; a ``start`` inside a
        deleted (trimmed) ledger or before the first one starts at the first entry after.

        Raises:
            InvalidArgument: a bad position or non-positive limits.
            ServiceClosed: the managed ledger is closed.
            NoSuchEntry, MagnetarError: the bookies could not serve an entry.
        """
        start = Position.of(start)
        if max_entries <= 0 or max_bytes <= 0:
            raise InvalidArgument(f"max_entries and max_bytes must be positive, got {max_entries}, {max_bytes}")
        if self._closed:
            raise ServiceClosed(f"managed ledger {self.name} is closed")
        last = self._ledgers.last_confirmed()
        p = self._ledgers.normalize(start)
        out: list[Entry] = []
        size = 0
        while p <= last and len(out) < max_entries:
            info = self._ledgers.find(p.ledger_id)
            if info is None:
                break
            end = last.entry_id if p.ledger_id == last.ledger_id else info.entries - 1
            n = min(max_entries - len(out), end - p.entry_id + 1)
            if info.entries > 0 and info.size > 0:  # don't fetch far more than max_bytes
                average = info.size / info.entries
                n = min(n, max(1, int((max_bytes - size) / average) + 1))
            for position, payload in await self._reads.read(p.ledger_id, p.entry_id, p.entry_id + n - 1):
                if out and size + len(payload) > max_bytes:
                    return out
                out.append((position, payload))
                size += len(payload)
            p = self._ledgers.next_position(Position(p.ledger_id, p.entry_id + n - 1))
        return out

    # -- cursors -----------------------------------------------------------------
    @property
    def cursors(self) -> dict[str, ManagedCursor]:
        """The open durable cursors by name."""
        return dict(self._cursors.durable)

    @property
    def non_durable_cursors(self) -> dict[str, ManagedCursor]:
        """The open non-durable (readers') cursors by name."""
        return dict(self._cursors.non_durable)

    async def open_cursor(
        self,
        name: str,
        initial_position: str = "latest",
        start: Sequence[int] | None = None,
        inclusive: bool = False,
        durable: bool = True,
    ) -> ManagedCursor:
        """The cursor ``name``, created when new.

        An existing durable cursor resumes where it was stored (``start`` is ignored).
        A new one reads first from ``start`` when given (from the entry after it unless
        ``inclusive``; ``(-1, -1)``: from the first stored entry; beyond the last entry:
        only entries added from now on), else from ``"latest"`` (entries added from now
        on) or ``"earliest"`` (every stored entry). A non-durable cursor is never stored.

        Raises:
            InvalidArgument: a bad name, initial position or start.
            AlreadyExists: ``name`` is a cursor of the other kind (durable or not).
            MetadataVersionConflict: another broker created it at the same time.
        """
        self._check_open()
        return await self._cursors.open(name, initial_position, start, inclusive, durable)

    async def delete_cursor(self, name: str) -> None:
        """Forget a cursor and its stored position (nothing to delete is fine)."""
        await self._cursors.delete(name)

    def _check_open(self) -> None:
        if self._closing:
            raise ServiceClosed(f"managed ledger {self.name} is closed")

    # -- trimming ----------------------------------------------------------------
    async def trim(self, before: Position) -> list[int]:
        """Delete closed ledgers whose every entry is before ``before``; returns their ids.

        The list is updated (compare-and-set) before any ledger is deleted.
        """
        before = Position.of(before)
        self._check_open()
        async with self._meta_lock:
            victims = [
                i for i in self._ledgers.ledgers
                if i.ledger_id != self._ledgers.open_ledger_id and Position(i.ledger_id, i.entries - 1) < before
            ]  # fmt: skip
            if not victims:
                return []
            kept = list(self._ledgers.ledgers)
            ids = {i.ledger_id for i in victims}
            self._ledgers.remove(ids)
            doc = {"ledgers": self._ledgers.to_docs(), "properties": self._properties}
            try:
                self._version = await self._store.update(*self.name, doc, self._version)
            except MagnetarError:
                self._ledgers.ledgers = kept
                raise
        self._reads.forget(ids)
        await self._delete_ledgers(sorted(ids))
        log.info("managed ledger %s: trimmed ledgers %s", self.name, sorted(ids))
        return sorted(ids)

    async def trim_consumed(
        self, retention_time_s: float | None = 0.0, retention_size_bytes: int | None = 0
    ) -> list[int]:
        """Delete consumed ledgers retention lets go (see :mod:`.retention`; None means
        unlimited, 0/0 deletes consumed ledgers at once); returns their ids.

        Raises:
            InvalidArgument: a negative limit.
            MetadataError: the list could not be stored (nothing is deleted).
        """
        self._check_open()
        victims = retention.ledgers_to_delete(
            self._ledgers, self._cursors.slowest_mark_delete(), int(self._clock() * 1000),
            retention_time_s, retention_size_bytes,
        )  # fmt: skip
        if not victims:
            return []
        return await self.trim(Position(victims[-1].ledger_id, victims[-1].entries))

    async def _delete_ledgers(self, ledger_ids: list[int]) -> None:
        for ledger_id in ledger_ids:
            try:
                await self._client.delete_ledger(ledger_id)
            except NoSuchLedger:
                pass
            except MagnetarError as exc:
                log.warning("managed ledger %s: could not delete ledger %d: %s", self.name, ledger_id, exc.message)

    # -- closing -----------------------------------------------------------------
    async def close(self) -> None:
        """Persist the cursors, let pending adds finish, close the open ledger, stop."""
        await self._shutdown(flush_cursors=True)

    async def _shutdown(self, flush_cursors: bool) -> None:
        if self._closing:
            return
        self._closing = True
        if self._age_timer is not None:
            self._age_timer.cancel()
            self._age_timer = None
        if self._roll_task is not None:
            await asyncio.gather(self._roll_task, return_exceptions=True)
        self._submit_queued_anyway()
        deliveries_stored = await self._cursors.close_all(flush_cursors)
        handle, self._current, self._unclosed = self._current or self._unclosed, None, None
        if handle is not None and self._error is None and flush_cursors and not deliveries_stored:
            # A cursor's last write failed (ZooKeeper lost): its stored read mark is behind
            # what went out. Closing the ledger would tell the next owner this was a clean
            # hand-over, and it would take those entries for first deliveries; left open,
            # the ledger is recovered and everything stored comes flagged as redelivered.
            log.warning(
                "managed ledger %s: a cursor could not store what it delivered; leaving ledger %d "
                "open for the next owner to recover", self.name, handle.ledger_id,
            )  # fmt: skip
            await handle.abort(drain=True)
        elif handle is not None and self._error is None:
            try:
                closed = await handle.close()
            except MagnetarError as exc:
                log.warning("managed ledger %s: closing ledger %d: %s", self.name, handle.ledger_id, exc.message)
            else:
                info = self._ledgers.find(handle.ledger_id)
                if info is not None:
                    info.entries, info.size = closed.last_entry_id + 1, closed.length
                self._ledgers.open_ledger_id = None
                await self._save_list_quietly()
        elif handle is not None:
            await handle.abort()
        self._fail_remaining(ServiceClosed(f"managed ledger {self.name} is closed"))
        await self._tasks.close()
        self._reads.clear()
        self._closed = True
        self._notify()
        log.info("managed ledger %s closed", self.name)

    def _submit_queued_anyway(self) -> None:
        """On close, adds still waiting for a rollover go to the open ledger (if any)."""
        while self._queued and self._current is not None and self._error is None:
            self._submit(self._queued.popleft())  # type: ignore[union-attr]  # not empty: a deque

    def _fail_remaining(self, exc: MagnetarError) -> None:
        ops = list(self._inflight) + list(self._queued)
        self._inflight = self._queued = ()
        for op in ops:
            if not op.future.done():
                op.future.set_exception(same_error(exc))

    async def delete(self) -> None:
        """Close, then delete every ledger, the cursors and the stored list.

        Raises:
            LedgerFenced, MetadataVersionConflict: another broker owns the topic now;
                nothing is deleted.
        """
        await self._shutdown(flush_cursors=False)
        if self._error is not None:
            raise same_error(self._error)
        _, version = await self._store.get(*self.name)
        if version != self._version:
            raise MetadataVersionConflict(
                f"managed ledger {self.name} was changed by another broker; not deleting it"
            )
        await self._delete_ledgers([i.ledger_id for i in self._ledgers.ledgers])
        await self._store.delete(*self.name)
        self._cursors.durable.clear()
        self._cursors.non_durable.clear()
        log.info("managed ledger %s deleted", self.name)

    def __repr__(self) -> str:
        return f"ManagedLedger({self.name}, ledgers={len(self._ledgers.ledgers)}, last={self.last_confirmed_position})"
