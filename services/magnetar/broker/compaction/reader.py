"""What a ``read_compacted`` subscription reads (Pulsar's CompactedTopicImpl): the
compacted view for positions up to its horizon, then the topic's own entries after it.

Entries come with the topic's positions, so acknowledgements, seeks and the backlog mean
the same as without compaction. The messages of a batch that the view left out are sent
as skipped (:meth:`CompactedEntries.compacted_out`), as acknowledged ones are. The
positions of a compacted ledger are indexed once (16 bytes an entry) and kept while that
ledger is the view.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field

from magnetar.broker.compaction import compacted_entry
from magnetar.broker.compaction.compactor import (
    COMPACTION_SUBSCRIPTION,
    CompactedView,
    compacted_view,
)
from magnetar.broker.compaction.keys import compacted_out_mask
from magnetar.broker.entry import view_entry
from magnetar.common.errors import MagnetarError
from magnetar.managedledger.ledger import ManagedLedger
from magnetar.managedledger.ledgers import Ledgers, ReadHandle
from magnetar.managedledger.position import Position

log = logging.getLogger(__name__)

_INDEX_READ = 500


@dataclass
class _Index:
    reader: ReadHandle
    positions: list[Position] = field(default_factory=list)


class CompactedEntries:
    """The entry source of a ``read_compacted`` subscription (see the module docstring);
    one per topic, shared by its subscriptions that read compacted."""

    def __init__(self, ml: ManagedLedger, ledgers: Ledgers) -> None:
        self.ml = ml
        self.ledgers = ledgers
        self._index: tuple[int, _Index] | None = None
        self._masks: dict[Position, int] = {}

    def view(self) -> CompactedView | None:
        """The topic's compacted view now (None: never compacted)."""
        return compacted_view(self.ml.cursors.get(COMPACTION_SUBSCRIPTION))

    async def _load(self, ledger_id: int) -> _Index:
        if self._index is not None and self._index[0] == ledger_id:
            return self._index[1]
        reader = await self.ledgers.open_ledger(ledger_id, recovery=False)
        index = _Index(reader)
        last, first = reader.metadata.last_entry_id, 0
        while first <= last:
            upto = min(last, first + _INDEX_READ - 1)
            for stored in await reader.read(first, upto):
                index.positions.append(compacted_entry.decode(stored.payload).position)
            first = upto + 1
        self._index, self._masks = (ledger_id, index), {}
        return index

    async def read_entries(self, position: Position, max_entries: int, max_bytes: int) -> list[tuple[Position, bytes]]:
        """Entries from ``position`` on: the view's while ``position`` is at most its
        horizon, else the topic's (see :meth:`ManagedLedger.read_entries`)."""
        view = self.view()
        if view is None or position > view.horizon:
            return await self.ml.read_entries(position, max_entries, max_bytes)
        index = await self._load(view.ledger_id)
        i = bisect.bisect_left(index.positions, position)
        if i == len(index.positions):
            return await self.ml.read_entries(
                max(self.ml.first_position, self.ml.next_position(view.horizon)), max_entries, max_bytes
            )
        last = min(len(index.positions), i + max_entries) - 1
        out: list[tuple[Position, bytes]] = []
        size = 0
        for stored in await index.reader.read(i, last):
            e = compacted_entry.decode(stored.payload)
            if out and size + len(e.data) > max_bytes:
                break
            size += len(e.data)
            mask = compacted_out_mask(e.batch_size, e.indexes) if len(e.indexes) < e.batch_size else 0
            if mask:
                self._masks[e.position] = mask
            out.append((e.position, e.data))
        return out

    async def last_message_id(self, last: Position) -> tuple[int, int, int] | None:
        """The last message a ``read_compacted`` reader can get when the topic's last
        entry ``last`` is within the view (Pulsar's answer to a compacted reader's
        GetLastMessageId): the view's last entry, in a batch the index of its last kept
        message; entry id -1 when the view is empty. None: entries after the horizon are
        read from the topic, whose last message is the answer."""
        view = self.view()
        if view is None or last > view.horizon:
            return None
        index = await self._load(view.ledger_id)
        if not index.positions:
            return last.ledger_id, -1, -1
        stored = await index.reader.read(len(index.positions) - 1, len(index.positions) - 1)
        e = compacted_entry.decode(stored[0].payload)
        batched = view_entry(e.data).batched
        return e.position.ledger_id, e.position.entry_id, e.indexes[-1] if batched and e.indexes else -1

    async def delete_ledger(self, ledger_id: int) -> None:
        """Delete the compacted ledger of a deleted topic (nothing else names it); one
        that cannot be deleted now is logged and left (its ``compactedTopic`` property
        names the topic)."""
        self._index = None
        try:
            await self.ledgers.delete_ledger(ledger_id)
        except MagnetarError as exc:
            log.warning("%s: could not delete compacted ledger %d: %s", self.ml.name, ledger_id, exc.message)

    def compacted_out(self, position: Position) -> int:
        """The messages of the entry at ``position`` the view left out (0: none)."""
        return self._masks.get(position, 0)

    def next_position(self, position: Position) -> Position:
        return self.ml.next_position(position)

    def contains(self, position: Position) -> bool:
        if self.ml.contains(position):
            return True
        view, index = self.view(), self._index
        if view is None or index is None or index[0] != view.ledger_id:
            return False
        i = bisect.bisect_left(index[1].positions, position)
        return i < len(index[1].positions) and index[1].positions[i] == position
