"""A cursor: how far a subscription has acknowledged a managed ledger.

Everything at or before the *mark-delete position* is acknowledged; acknowledged entries
after it are kept as ranges (:class:`RangeSet`). When the first range starts right after
the mark-delete position, the mark-delete position moves to its end (as Pulsar's).
Entries of which only some messages (batch indexes) are acknowledged keep a mask of
those; entries sent again keep a redelivery count (see :mod:`.cursor_state`).

A durable cursor is stored in ZooKeeper (the document is described in
:mod:`.cursor_state`), written with compare-and-set. Writes are debounced: the first
change after a write schedules the next one at most ``cursor_persist_interval_s`` after
it; :meth:`flush` and :meth:`close` write at once, and :meth:`persist_counts` writes at
once when redelivery counts changed (they must be stored before the redelivery). After a
restart, entries acknowledged but not yet written are delivered again. A non-durable
cursor (a reader's) is never stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from magnetar.common.errors import (
    InvalidArgument,
    MagnetarError,
    MetadataVersionConflict,
)
from magnetar.common.lightevent import LightEvent
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.cursor_state import (
    CursorDocument,
    PositionMap,
    check_batch,
    full_mask,
)
from magnetar.managedledger.layout import LedgerList, start_position
from magnetar.managedledger.position import ManagedLedgerName, Position
from magnetar.managedledger.rangeset import RangeSet
from magnetar.managedledger.reads import Entry
from magnetar.managedledger.store import ManagedLedgerStore

log = logging.getLogger(__name__)


class CursorLedger(Protocol):
    """What a cursor uses of its managed ledger (``ManagedLedger`` is one). Declared here
    so that the cursor does not name the ledger that holds it."""

    @property
    def name(self) -> ManagedLedgerName: ...

    @property
    def config(self) -> ManagedLedgerConfig: ...

    @property
    def recovered_before(self) -> Position | None:
        """Set when the previous owner crashed: entries before it may have been delivered."""

    @property
    def layout(self) -> LedgerList: ...

    @property
    def last_confirmed_position(self) -> Position: ...

    def next_position(self, p: Position) -> Position: ...

    def contains(self, p: Position) -> bool: ...

    def count_entries(self, first: Position, last: Position) -> int: ...

    async def read_entries(self, start: Position, max_entries: int, max_bytes: int) -> list[Entry]: ...


class ManagedCursor:
    """One subscription's position in a managed ledger."""

    # One per loaded topic (thousands per broker): attributes in slots; the __dict__ is made
    # only when something else is set on an instance (tests replace methods).
    __slots__ = (
        "name", "ledger", "durable", "_store", "mark_delete_position", "_acked", "_batch", "_counts",
        "_given_back", "properties", "_version", "read_position", "_delivered_before", "_read_high", "_stored_read",
        "_dirty", "_counts_dirty", "_error", "_closed", "_lock", "_wake", "_task", "_last_attempt",
        "__dict__",
    )

    def __init__(
        self,
        ledger: CursorLedger,
        store: ManagedLedgerStore,
        name: str,
        mark_delete: Position,
        acked: Iterable[tuple[Position, Position]] = (),
        properties: dict[str, Any] | None = None,
        version: int | None = None,
        *,
        batch_acks: Iterable[tuple[Position, int, int]] = (),
        redelivery_counts: Iterable[tuple[Position, int]] = (),
        durable: bool = True,
        delivered_before: Position | None = None,
    ) -> None:
        """A cursor of ``ledger``; ``version`` None means not stored yet.

        ``delivered_before``: a previous owner may have delivered every entry before it
        (see :meth:`delivery_count`).

        Use :meth:`ManagedLedger.open_cursor` rather than this.
        """
        self.name = name
        self.ledger = ledger
        self.durable = durable
        """False for a reader's cursor: never stored, holds no data back."""
        self._store = store
        self.mark_delete_position = mark_delete
        self._acked = RangeSet(ledger.next_position)
        for first, last in acked:
            self._acked.add_range(first, last)
        self._batch: PositionMap[tuple[int, int]] = PositionMap()  # entry -> (size, acked mask)
        self._counts: PositionMap[int] = PositionMap()  # entry -> redeliveries
        self._given_back: PositionMap[bool] = PositionMap()
        """Entries a consumer held and gave back without failing them (it left): sent again
        flagged, their count unchanged. In memory: a next owner flags them anyway."""
        self.properties: dict[str, Any] = dict(properties or {})
        self._version = version
        self.read_position: Position = ledger.next_position(mark_delete)
        """The next position to read (dispatchers move it; :meth:`rewind` resets it)."""
        self._delivered_before = delivered_before
        self._read_high = self.read_position if delivered_before is None else max(self.read_position, delivered_before)
        """The highest read position before the last rewind or seek, stored with the cursor;
        at least what a previous owner may have delivered, so the next owner flags that too
        (an owner that moves the topic on before reading as far must not shrink it)."""
        self._stored_read: Position | None = None
        """The read mark of the last document stored (None: none stored yet)."""
        self._advance_mark_delete()
        for p, size, mask in batch_acks:
            if not self.is_acked(p) and 0 < mask < full_mask(size):
                self._batch.set(p, (size, mask))
        for p, n in redelivery_counts:
            if not self.is_acked(p) and n > 0:
                self._counts.set(p, n)
        self._dirty = False
        self._counts_dirty = False
        self._error: MagnetarError | None = None
        self._closed = False
        self._lock = asyncio.Lock()
        self._wake = LightEvent()
        self._task: asyncio.Task[None] | None = None
        self._last_attempt = float("-inf")

    @classmethod
    def from_doc(
        cls, ledger: CursorLedger, store: ManagedLedgerStore, name: str, doc: dict[str, Any], version: int
    ) -> ManagedCursor:
        """The cursor as stored.

        Raises:
            MetadataError: the document is not a cursor.
        """
        d = CursorDocument.from_doc(doc, f"cursor {name} of {ledger.name}")
        delivered_before = d.read_position
        crashed = ledger.recovered_before
        if crashed is not None:  # the previous owner crashed: it may have sent anything stored
            delivered_before = crashed if delivered_before is None else max(crashed, delivered_before)
        return cls(
            ledger, store, name, d.mark_delete, d.ranges, d.properties, version,
            batch_acks=d.batch_acks, redelivery_counts=d.redelivery_counts, delivered_before=delivered_before,
        )  # fmt: skip

    def to_doc(self) -> dict[str, Any]:
        """The stored form, cut to fit a znode (see :mod:`.cursor_state`); batch acks
        and redelivery counts are left out when there are none."""
        doc = CursorDocument(
            self.mark_delete_position,
            # Only what can be stored: with many scattered acks (delayed messages acked as
            # they come due) the whole list is hundreds of thousands of ranges.
            self._acked.ranges(self.ledger.config.max_unacked_ranges_to_persist),
            [(p, size, mask) for p, (size, mask) in self._batch.items()],
            list(self._counts.items()),
            self.properties,
            self._read_mark(),
        ).to_doc(self.ledger.config)
        for key in ("batch_acks", "redelivery_counts"):
            if not doc[key]:
                del doc[key]
        return doc

    def set_property(self, key: str, value: Any) -> None:
        """Store ``key`` in the cursor's properties (written with the next persist)."""
        if self.properties.get(key) != value:
            self.properties[key] = value
            self._changed()

    # -- acknowledgements -----------------------------------------------------------
    @property
    def individually_acked(self) -> list[tuple[Position, Position]]:
        """Acknowledged ranges after the mark-delete position."""
        return self._acked.ranges()

    def is_acked(self, p: Sequence[int]) -> bool:
        """True when the entry at ``p`` is acknowledged."""
        position = Position.of(p)
        return position <= self.mark_delete_position or position in self._acked

    def _check(self, positions: Iterable[Sequence[int]]) -> list[Position]:
        out = []
        for p in positions:
            position = Position.of(p)
            if position > self.mark_delete_position and not self.ledger.contains(position):
                raise InvalidArgument(
                    f"cursor {self.name}: cannot acknowledge {position}: no such entry in {self.ledger.name} "
                    f"(last is {self.ledger.last_confirmed_position})"
                )
            out.append(position)
        return out

    def ack(self, positions: Iterable[Sequence[int]]) -> None:
        """Acknowledge entries one by one (in any order; repeats are fine).

        Raises:
            InvalidArgument: a position is not a stored entry (nothing is changed).
        """
        checked = self._check(positions)
        changed = False
        for position in checked:
            if position > self.mark_delete_position:
                changed |= self._acked.add(position)
                self._batch.discard(position)
                self._counts.discard(position)
                self._given_back.discard(position)
        if changed:
            self._advance_mark_delete()
            self._changed()

    def ack_cumulative(self, position: Sequence[int]) -> None:
        """Acknowledge every entry up to and including ``position``.

        Raises:
            InvalidArgument: ``position`` is not a stored entry (nothing is changed).
        """
        (p,) = self._check([position])
        if p <= self.mark_delete_position:
            return
        self.mark_delete_position = p
        self._acked.remove_through(p)
        self._advance_mark_delete()
        self._changed()

    def _advance_mark_delete(self) -> None:
        while True:
            first = self._acked.first()
            if first is None or first[0] != self.ledger.next_position(self.mark_delete_position):
                break
            self.mark_delete_position = first[1]
            self._acked.pop_first()
        self._batch.discard_through(self.mark_delete_position)
        self._counts.discard_through(self.mark_delete_position)
        self._given_back.discard_through(self.mark_delete_position)
        following = self.ledger.next_position(self.mark_delete_position)
        if self.read_position < following:
            self.read_position = following

    # -- batch indexes --------------------------------------------------------------
    def acked_mask(self, p: Sequence[int]) -> int:
        """Acknowledged messages (bit i = message i) of a partly acknowledged entry; 0
        when none are recorded (a wholly acknowledged entry: see :meth:`is_acked`)."""
        return self._batch.get(Position.of(p), (0, 0))[1]

    def ack_batch(self, p: Sequence[int], batch_size: int, mask: int) -> bool:
        """Acknowledge the messages of ``mask`` of the entry at ``p`` (a batch of
        ``batch_size``). Once all are acknowledged the entry is, as with :meth:`ack`.

        Returns:
            True when the entry became wholly acknowledged by this call.

        Raises:
            InvalidArgument: ``p`` is not a stored entry, ``batch_size`` < 1, a mask bit at
                or above ``batch_size``, or a size other than the one recorded for the
                entry (nothing is changed).
        """
        size, mask = check_batch(batch_size, mask)
        (position,) = self._check([p])
        if self.is_acked(position):
            return False
        recorded_size, old = self._batch.get(position, (size, 0))
        if recorded_size != size:
            raise InvalidArgument(
                f"cursor {self.name}: entry {position} is a batch of {recorded_size}, not {size}"
            )
        new = old | mask
        if new == full_mask(size):
            self.ack([position])
            return True
        if new != old:
            self._batch.set(position, (size, new))
            self._changed()
        return False

    # -- redelivery counts ----------------------------------------------------------
    def redelivery_count(self, p: Sequence[int]) -> int:
        """How often the entry at ``p`` was sent again (0 when never, or acknowledged)."""
        return self._counts.get(Position.of(p), 0)

    def _read_mark(self) -> Position:
        return max(self._read_high, self.read_position)

    def delivery_count(self, p: Position) -> int:
        """The redelivery count a delivery of the entry at ``p`` carries: its count, or 1
        when it was sent before (a consumer that held it left: :meth:`add_given_back`) or
        a previous owner of the topic may have sent it already.

        That owner crashed (everything it had stored is suspect) or handed the topic over
        with the entry before its read position: its consumers may have received the entry,
        and their acks may be lost with it. Such a delivery is flagged, as JMS's
        ``JMSRedelivered``, so a consumer can tell it from a first delivery; the count the
        dead letter policy uses (:meth:`redelivery_count`) is not raised, as nothing failed.
        """
        n = self._counts.get(p, 0)
        if n == 0 and (p in self._given_back or (self._delivered_before is not None and p < self._delivered_before)):
            return 1
        return n

    def add_given_back(self, positions: Iterable[Sequence[int]]) -> None:
        """Remember that each entry was sent and given back without being failed (its
        consumer left, or stopped being the active one): sent again it is flagged (count
        at least 1) while its redelivery count, what the dead letter policy compares, stays
        as it is. Pulsar likewise leaves the count alone when a consumer is removed; only
        a negative ack, an ack timeout or a redelivery request raise it. Acknowledged
        entries and positions that are not stored entries are left out."""
        for position in self._unacked_entries(positions):
            self._given_back.set(position, True)

    def _unacked_entries(self, positions: Iterable[Sequence[int]]) -> list[Position]:
        """The stored, unacknowledged entries among ``positions``.

        Raises:
            InvalidArgument: a malformed position (checked before any is returned).
        """
        return [p for p in [Position.of(p) for p in positions] if not self.is_acked(p) and self.ledger.contains(p)]

    def add_redeliveries(self, positions: Iterable[Sequence[int]]) -> None:
        """Count one more redelivery of each entry; acknowledged entries and positions
        that are not stored entries are left out. Store with :meth:`persist_counts`
        before sending them again.

        Raises:
            InvalidArgument: a malformed position (nothing is changed).
        """
        entries = self._unacked_entries(positions)
        for position in entries:
            self._counts.set(position, self._counts.get(position, 0) + 1)
        if entries:
            self._counts_dirty = self.durable
            self._changed()

    @property
    def counts_dirty(self) -> bool:
        """True when redelivery counts changed since they were last stored."""
        return self._counts_dirty

    # -- moving ---------------------------------------------------------------------
    def reset_to(self, position: Sequence[int]) -> None:
        """Make everything before ``position`` acknowledged and nothing at or after it;
        reading starts there. Beyond the last entry: everything is acknowledged; before
        the first stored entry (``(-1, -1)`` too): nothing is. Stored by the debounced
        writer (``await persist()`` to store it at once).

        Raises:
            InvalidArgument: a malformed position.
        """
        start = start_position(position)
        layout = self.ledger.layout
        if start > layout.last_confirmed():
            mark_delete = layout.last_confirmed()
        elif start < layout.first_position():
            mark_delete = layout.previous_position(layout.first_position())
        else:
            mark_delete = layout.previous_position(layout.normalize(start))
        self.mark_delete_position = mark_delete
        self._acked.clear()
        self._batch.clear()
        self._counts.clear()
        self._given_back.clear()
        self.read_position = self._read_high = self.ledger.next_position(mark_delete)
        self._delivered_before = None  # a replay asked for: first deliveries again, as Pulsar's
        self._changed()

    def skip_entries(self, n: int) -> int:
        """Acknowledge the next ``n`` unacknowledged entries after the mark-delete position.

        Returns:
            How many were acknowledged (fewer when the backlog is shorter).

        Raises:
            InvalidArgument: ``n`` is not an integer >= 0.
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InvalidArgument(f"entries to skip is an integer >= 0, not {n!r}")
        layout = self.ledger.layout
        last = layout.last_confirmed()
        p = layout.normalize(self.ledger.next_position(self.mark_delete_position))
        skipped = 0
        spans: list[tuple[Position, Position]] = []
        while skipped < n and p <= last:
            acked = self._acked.covering_or_after(p)
            if acked is not None and acked[0] <= p:
                p = self.ledger.next_position(acked[1])
                continue
            end = last if acked is None else layout.previous_position(acked[0])
            available = layout.count(p, end)
            if available <= 0:
                break
            k = min(n - skipped, available)
            last_skipped = layout.nth_entry(p, k)
            spans.append((p, last_skipped))
            skipped += k
            p = self.ledger.next_position(last_skipped)
        for first, last_skipped in spans:
            self._acked.add_range(first, last_skipped)
            self._batch.discard_range(first, last_skipped)
            self._counts.discard_range(first, last_skipped)
            self._given_back.discard_range(first, last_skipped)
        if spans:
            self._advance_mark_delete()
            self._changed()
        return skipped

    def ack_before(self, position: Sequence[int]) -> int:
        """Acknowledge every entry before ``position`` (message expiry); entries at or
        after it keep their state. Past the last entry: everything.

        Returns:
            How many entries were not acknowledged before.

        Raises:
            InvalidArgument: a malformed position.
        """
        layout = self.ledger.layout
        start = start_position(position)
        last = layout.last_confirmed()
        mark_delete = last if start > last else layout.previous_position(layout.normalize(start))
        if mark_delete <= self.mark_delete_position:
            return 0
        before = self.backlog()
        self.mark_delete_position = mark_delete
        self._acked.remove_through(mark_delete)
        self._advance_mark_delete()
        self._changed()
        return before - self.backlog()

    def clear_backlog(self) -> int:
        """Acknowledge every stored entry; returns how many were not acknowledged yet."""
        skipped = self.backlog()
        last = self.ledger.last_confirmed_position
        if last <= self.mark_delete_position:
            return 0
        self.mark_delete_position = last
        self._acked.remove_through(last)
        self._advance_mark_delete()
        self._changed()
        return skipped

    # -- reading --------------------------------------------------------------------
    def rewind(self) -> None:
        """Read again from the first entry after the mark-delete position."""
        self._read_high = max(self._read_high, self.read_position)
        self.read_position = self.ledger.next_position(self.mark_delete_position)

    def seek(self, position: Sequence[int]) -> None:
        """Read next from ``position`` (not before the first entry after mark-delete)."""
        self._read_high = max(self._read_high, self.read_position)
        self.read_position = max(Position.of(position), self.ledger.next_position(self.mark_delete_position))

    async def read_entries(self, max_entries: int, max_bytes: int) -> list[tuple[Position, bytes]]:
        """Read from :attr:`read_position` on, leaving out acknowledged entries, and move
        the read position past what was read. Empty when there is nothing new."""
        while True:
            entries = await self.ledger.read_entries(self.read_position, max_entries, max_bytes)
            if not entries:
                return []
            self.read_position = self.ledger.next_position(entries[-1][0])
            fresh = [(p, data) for p, data in entries if not self.is_acked(p)]
            if fresh:
                return fresh

    def has_more_entries(self) -> bool:
        """True when an entry at or after the read position is stored."""
        return self.read_position <= self.ledger.last_confirmed_position

    def backlog(self) -> int:
        """Entries after the mark-delete position not acknowledged yet."""
        last = self.ledger.last_confirmed_position
        if last <= self.mark_delete_position:
            return 0
        total = self.ledger.count_entries(self.ledger.next_position(self.mark_delete_position), last)
        return total - self._acked.count(self.ledger.count_entries)

    # -- persistence ----------------------------------------------------------------
    def _changed(self) -> None:
        if not self.durable:
            return
        self._dirty = True
        if self._task is None and not self._closed and self._error is None:
            self._task = asyncio.get_running_loop().create_task(self._persist_later())

    async def _persist_later(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.ledger.config.cursor_persist_interval_s
        try:
            while self._dirty and self._error is None:
                delay = self._last_attempt + interval - loop.time()
                if delay > 0 and not self._closed:
                    try:
                        await asyncio.wait_for(self._wake.wait(), delay)
                    except TimeoutError:
                        pass
                if not self._dirty:
                    break
                try:
                    await self.persist()
                except MagnetarError as exc:
                    log.warning("cursor %s of %s: could not persist: %s", self.name, self.ledger.name, exc.message)
                    if self._closed:
                        break
        finally:
            self._task = None

    async def persist(self) -> None:
        """Write the cursor to ZooKeeper now (compare-and-set); nothing for a non-durable one.

        Raises:
            MetadataVersionConflict: another broker changed it (took the topic over);
                this cursor stops persisting.
            MetadataError: ZooKeeper trouble (retried by the debounced writer).
        """
        async with self._lock:
            await self._write()

    async def persist_counts(self) -> None:
        """Write the cursor now if redelivery counts changed since the last write
        (without waiting for the debounce timer); return at once otherwise.

        Raises:
            MetadataVersionConflict, MetadataError: as :meth:`persist`.
        """
        if not self._counts_dirty:
            return
        async with self._lock:
            if self._counts_dirty:  # a write that held the lock may have stored them
                await self._write()

    async def _write(self) -> None:
        if not self.durable:
            self._dirty = self._counts_dirty = False
            return
        if self._error is not None:
            raise self._error
        self._last_attempt = asyncio.get_running_loop().time()
        read_mark = self._read_mark()
        doc = self.to_doc()
        counts_dirty, self._dirty, self._counts_dirty = self._counts_dirty, False, False
        try:
            self._version = await self._store.put_cursor(*self.ledger.name, self.name, doc, self._version)
            self._stored_read = read_mark
        except MetadataVersionConflict as exc:
            self._dirty = True
            self._counts_dirty |= counts_dirty
            self._error = MetadataVersionConflict(
                f"cursor {self.name} of {self.ledger.name} was changed by another broker; not overwriting it"
            )
            raise self._error from exc
        except BaseException:
            self._dirty = True
            self._counts_dirty |= counts_dirty
            raise

    async def flush(self) -> None:
        """Write pending changes now (nothing when there are none)."""
        if self._dirty:
            await self.persist()

    async def close(self, flush: bool = True) -> None:
        """Stop the debounced writer; write pending changes first when ``flush``."""
        if self._closed:
            return
        self._closed = True
        if not flush:
            self._dirty = False
        elif not self.deliveries_stored:
            # Deliveries since the last write: the next owner must flag them even when no
            # ack made the cursor dirty (the acks may be lost with the hand-over).
            self._dirty = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        if flush:
            try:
                await self.flush()
            except MagnetarError as exc:
                log.warning("cursor %s of %s: last write failed: %s", self.name, self.ledger.name, exc.message)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def deliveries_stored(self) -> bool:
        """True when the stored document's read mark covers every entry this cursor may
        have had delivered (always, for a non-durable cursor). When not (its last write
        failed), a next owner reading the document would take entries delivered since
        for first deliveries; :meth:`ManagedLedger.close` then leaves the open ledger to
        be recovered, which flags everything stored."""
        return not self.durable or (self._stored_read is not None and self._stored_read >= self._read_mark())

    def __repr__(self) -> str:
        return (
            f"ManagedCursor({self.name!r}, mark_delete={self.mark_delete_position}, "
            f"ranges={len(self._acked)}, batches={len(self._batch)}, counts={len(self._counts)}, "
            f"read={self.read_position}{'' if self.durable else ', non-durable'})"
        )
