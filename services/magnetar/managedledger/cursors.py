"""The cursors of one managed ledger: durable ones (stored, taken over on open) and
non-durable ones (readers': kept apart, never stored, holding no data back)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from magnetar.common.errors import AlreadyExists, InvalidArgument, MetadataVersionConflict
from magnetar.common.retry import RetryPolicy
from magnetar.managedledger.cursor import CursorLedger, ManagedCursor
from magnetar.managedledger.layout import EARLIEST, start_position
from magnetar.managedledger.position import Position
from magnetar.managedledger.store import ManagedLedgerStore


class CursorRegistry:
    """Open cursors by name, durable and non-durable apart (a name is one or the other)."""

    def __init__(self, ledger: CursorLedger, store: ManagedLedgerStore) -> None:
        self._ledger = ledger
        self._store = store
        self.durable: dict[str, ManagedCursor] = {}
        self.non_durable: dict[str, ManagedCursor] = {}
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Take every stored cursor over (see :meth:`_take_over`)."""
        for cursor_name in await self._store.list_cursors(*self._ledger.name):
            cursor = await self._take_over(cursor_name)
            if cursor is not None:
                self.durable[cursor_name] = cursor

    async def _take_over(self, name: str, attempts: int = 10) -> ManagedCursor | None:
        """Load a stored cursor and write it back unchanged: that bumps its version, so a
        previous owner still flushing its copy fails instead of overwriting ours.

        Raises:
            MetadataVersionConflict: it kept changing under ``attempts`` attempts.
        """
        async for _ in RetryPolicy(max_tries=attempts, delay_s=0.0).attempts():
            doc, version = await self._store.get_cursor(*self._ledger.name, name)
            if doc is None:
                return None
            cursor = ManagedCursor.from_doc(self._ledger, self._store, name, doc, version)
            try:
                await cursor.persist()
            except MetadataVersionConflict:
                continue  # the previous owner wrote meanwhile: take its newer state
            return cursor
        raise MetadataVersionConflict(f"cursor {name} of {self._ledger.name} kept changing; could not take it over")

    async def open(
        self,
        name: str,
        initial_position: str = "latest",
        start: Sequence[int] | None = None,
        inclusive: bool = False,
        durable: bool = True,
    ) -> ManagedCursor:
        """See :meth:`ManagedLedger.open_cursor`."""
        if initial_position not in ("latest", "earliest"):
            raise InvalidArgument(f"initial position is 'latest' or 'earliest', not {initial_position!r}")
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"a cursor name is a non-empty string, not {name!r}")
        first = None if start is None else start_position(start)
        if not isinstance(inclusive, bool) or not isinstance(durable, bool):
            raise InvalidArgument("inclusive and durable are booleans")
        own, other = (self.durable, self.non_durable) if durable else (self.non_durable, self.durable)
        async with self._lock:
            if name in other:
                kind = "non-durable" if durable else "durable"
                raise AlreadyExists(f"{self._ledger.name} has a {kind} cursor named {name!r}")
            cursor = own.get(name)
            if cursor is not None:
                return cursor
            cursor = await self._take_over(name) if durable else None
            if cursor is None:
                mark_delete = self._new_mark_delete(initial_position, first, inclusive)
                cursor = ManagedCursor(self._ledger, self._store, name, mark_delete, durable=durable)
                await cursor.persist()
            own[name] = cursor
            return cursor

    def _new_mark_delete(self, initial_position: str, start: Position | None, inclusive: bool) -> Position:
        layout = self._ledger.layout
        if start is None:
            if initial_position == "latest":
                return layout.last_confirmed()
            start, inclusive = EARLIEST, True
        return layout.start_mark_delete(start, inclusive)

    async def delete(self, name: str) -> None:
        """Forget a cursor; a durable one's stored state too (nothing to delete is fine)."""
        async with self._lock:
            reader = self.non_durable.pop(name, None)
            if reader is not None:
                await reader.close(flush=False)
                return
            cursor = self.durable.pop(name, None)
            if cursor is not None:
                await cursor.close(flush=False)
            await self._store.delete_cursor(*self._ledger.name, name)

    async def close_all(self, flush: bool) -> bool:
        """Close every cursor, writing pending changes of durable ones when ``flush``;
        True when every durable cursor's stored read mark covers its deliveries (see
        :attr:`ManagedCursor.deliveries_stored`)."""
        cursors = [*self.durable.values(), *self.non_durable.values()]
        for cursor in cursors:
            await cursor.close(flush=flush)
        return all(cursor.deliveries_stored for cursor in cursors)

    def slowest_mark_delete(self) -> Position | None:
        """The lowest mark-delete position of the durable cursors (None without any)."""
        return min((c.mark_delete_position for c in self.durable.values()), default=None)
