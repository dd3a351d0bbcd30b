"""A durable cursor: how far a subscription has acknowledged a managed ledger.

Everything at or before the *mark-delete position* is acknowledged; acknowledged entries
after it are kept as ranges (:class:`RangeSet`). When the first range starts right after
the mark-delete position, the mark-delete position moves to its end (as Pulsar's).

Stored in ZooKeeper as ``{"mark_delete": [L, E], "individually_acked": [[[L1, E1],
[L2, E2]], ...], "properties": {...}}``, written with compare-and-set. Writes are
debounced: the first change after a write schedules the next one at most
``cursor_persist_interval_s`` after it; :meth:`flush` and :meth:`close` write at once.
After a restart, entries acknowledged but not yet written are delivered again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from magnetar.broker.managedledger.position import Position
from magnetar.broker.managedledger.rangeset import RangeSet
from magnetar.broker.managedledger.store import ManagedLedgerStore
from magnetar.common.errors import (
    InvalidArgument,
    MagnetarError,
    MetadataError,
    MetadataVersionConflict,
)

if TYPE_CHECKING:
    from magnetar.broker.managedledger.ledger import ManagedLedger

log = logging.getLogger(__name__)


class ManagedCursor:
    """One subscription's durable position in a managed ledger."""

    def __init__(
        self,
        ledger: ManagedLedger,
        store: ManagedLedgerStore,
        name: str,
        mark_delete: Position,
        acked: Iterable[tuple[Position, Position]] = (),
        properties: dict[str, Any] | None = None,
        version: int | None = None,
    ) -> None:
        """A cursor of ``ledger``; ``version`` None means not stored yet.

        Use :meth:`ManagedLedger.open_cursor` rather than this.
        """
        self.name = name
        self.ledger = ledger
        self._store = store
        self.mark_delete_position = mark_delete
        self._acked = RangeSet(ledger.next_position)
        for first, last in acked:
            self._acked.add_range(first, last)
        self.properties: dict[str, Any] = dict(properties or {})
        self._version = version
        self.read_position: Position = ledger.next_position(mark_delete)
        """The next position to read (dispatchers move it; :meth:`rewind` resets it)."""
        self._advance_mark_delete()
        self._dirty = False
        self._error: MagnetarError | None = None
        self._closed = False
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_attempt = float("-inf")

    @classmethod
    def from_doc(
        cls, ledger: ManagedLedger, store: ManagedLedgerStore, name: str, doc: dict[str, Any], version: int
    ) -> ManagedCursor:
        """The cursor as stored.

        Raises:
            MetadataError: the document is not a cursor.
        """
        try:
            mark_delete = Position.of(doc["mark_delete"])
            acked = [(Position.of(f), Position.of(last)) for f, last in doc.get("individually_acked", [])]
            properties = dict(doc.get("properties", {}))
        except (KeyError, TypeError, ValueError, InvalidArgument) as exc:
            raise MetadataError(f"cursor {name} of {ledger.name}: stored document is not a cursor: {doc!r}") from exc
        return cls(ledger, store, name, mark_delete, acked, properties, version)

    def to_doc(self) -> dict[str, Any]:
        """The stored form (at most ``max_unacked_ranges_to_persist`` ranges)."""
        limit = self.ledger.config.max_unacked_ranges_to_persist
        ranges = self._acked.ranges()[:limit]
        return {
            "mark_delete": self.mark_delete_position.to_json(),
            "individually_acked": [[f.to_json(), last.to_json()] for f, last in ranges],
            "properties": self.properties,
        }

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
        following = self.ledger.next_position(self.mark_delete_position)
        if self.read_position < following:
            self.read_position = following

    # -- reading --------------------------------------------------------------------
    def rewind(self) -> None:
        """Read again from the first entry after the mark-delete position."""
        self.read_position = self.ledger.next_position(self.mark_delete_position)

    def seek(self, position: Sequence[int]) -> None:
        """Read next from ``position`` (not before the first entry after mark-delete)."""
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
        """Write the cursor to ZooKeeper now (compare-and-set).

        Raises:
            MetadataVersionConflict: another broker changed it (took the topic over);
                this cursor stops persisting.
            MetadataError: ZooKeeper trouble (retried by the debounced writer).
        """
        async with self._lock:
            if self._error is not None:
                raise self._error
            self._last_attempt = asyncio.get_running_loop().time()
            doc = self.to_doc()
            self._dirty = False
            try:
                self._version = await self._store.put_cursor(*self.ledger.name, self.name, doc, self._version)
            except MetadataVersionConflict as exc:
                self._dirty = True
                self._error = MetadataVersionConflict(
                    f"cursor {self.name} of {self.ledger.name} was changed by another broker; not overwriting it"
                )
                raise self._error from exc
            except BaseException:
                self._dirty = True
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

    def __repr__(self) -> str:
        return (
            f"ManagedCursor({self.name!r}, mark_delete={self.mark_delete_position}, "
            f"ranges={len(self._acked)}, read={self.read_position})"
        )
