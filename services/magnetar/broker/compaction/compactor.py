"""The two-phase compactor (Pulsar's TwoPhaseCompactor, in our terms).

The view read is the previous compacted ledger (when there is one) followed by the
topic's entries after its horizon, up to the topic's last entry when the compaction
starts. Phase one reads the view and keeps the latest message of each key; phase two
reads it again and writes what is kept to a new ledger (the topic's quorums). The switch
is one compare-and-set write of the ``__compaction`` cursor: its ``CompactedTopicLedger``
property becomes the new ledger and ``CompactionHorizon`` (and its mark-delete position)
the new horizon. Only
then is the previous compacted ledger deleted. A compaction that stops before the
switch (a crash, a lost topic) leaves the previous view in place; the ledger it was
writing is never referenced (it carries the ``compactedTopic`` property that names it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from magnetar.broker.compaction import compacted_entry
from magnetar.broker.compaction.keys import MessageKey, ViewEntry, kept, latest_per_key
from magnetar.common.errors import MagnetarError
from magnetar.managedledger.cursor import ManagedCursor
from magnetar.managedledger.ledger import ManagedLedger
from magnetar.managedledger.ledgers import Ledgers, WriteHandle
from magnetar.managedledger.position import Position

log = logging.getLogger(__name__)

COMPACTION_SUBSCRIPTION = "__compaction"
"""The cursor that holds the compacted view (Pulsar's name)."""
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"
"""The cursor property naming the compacted ledger (Pulsar's name)."""
HORIZON_PROPERTY = "CompactionHorizon"
"""The cursor property holding the horizon (``ledger:entry``), written with the ledger's.
Pulsar takes the cursor's mark-delete position; here the cursor is a subscription to the
namespace's message TTL and backlog eviction too, which may move it past the horizon."""

_READ_ENTRIES = 500
_READ_BYTES = 8 * 1024 * 1024
_ADD_WINDOW = 256


@dataclass(frozen=True, slots=True)
class CompactedView:
    """Where a topic's compacted view is: ``ledger_id`` holds the latest message of each
    key of the topic's entries up to and including ``horizon``."""

    ledger_id: int
    horizon: Position


def compacted_view(cursor: ManagedCursor | None) -> CompactedView | None:
    """The view the ``__compaction`` cursor records (None: the topic was never compacted)."""
    if cursor is None:
        return None
    ledger_id = cursor.properties.get(COMPACTED_LEDGER_PROPERTY)
    if ledger_id is None:
        return None
    horizon = cursor.properties.get(HORIZON_PROPERTY)
    if horizon is None:
        return CompactedView(int(ledger_id), cursor.mark_delete_position)
    ledger, entry = str(horizon).split(":")
    return CompactedView(int(ledger_id), Position(int(ledger), int(entry)))


async def read_compacted(ledgers: Ledgers, ledger_id: int) -> AsyncIterator[ViewEntry]:
    """The entries of the compacted ledger ``ledger_id``, as the view reads them.

    Raises:
        NoSuchLedger, InvalidArgument (a corrupt entry), MagnetarError: bookie trouble.
    """
    reader = await ledgers.open_ledger(ledger_id, recovery=False)
    last = reader.metadata.last_entry_id
    first = 0
    while first <= last:
        upto = min(last, first + _READ_ENTRIES - 1)
        for stored in await reader.read(first, upto):
            e = compacted_entry.decode(stored.payload)
            yield ViewEntry(e.position, e.data, e.batch_size, e.indexes)
        first = upto + 1


class TwoPhaseCompactor:
    """Compacts one managed ledger (see the module docstring)."""

    def __init__(self, ml: ManagedLedger, ledgers: Ledgers) -> None:
        self.ml = ml
        self.ledgers = ledgers

    async def _view(self, previous: CompactedView | None, end: Position) -> AsyncIterator[ViewEntry]:
        p = self.ml.first_position
        if previous is not None:
            async for item in read_compacted(self.ledgers, previous.ledger_id):
                yield item
            p = max(p, self.ml.next_position(previous.horizon))
        while True:
            batch = await self.ml.read_entries(p, _READ_ENTRIES, _READ_BYTES)
            for position, data in batch:
                if position > end:
                    return
                yield ViewEntry(position, data)
            if not batch or batch[-1][0] >= end:
                return
            p = self.ml.next_position(batch[-1][0])

    async def compact(self) -> CompactedView | None:
        """Compact the topic up to its last entry now; the new view (None: the topic
        holds nothing to compact and was never compacted).

        Raises:
            MagnetarError: reading, writing or the switch failed (the previous view stays).
        """
        cursor = await self.ml.open_cursor(COMPACTION_SUBSCRIPTION, "earliest")
        previous = compacted_view(cursor)
        end = self.ml.last_confirmed_position
        if end.entry_id < 0 or (previous is not None and end <= previous.horizon):
            return previous
        latest: dict[str, MessageKey] = {}
        async for item in self._view(previous, end):
            latest_per_key([item], latest)
            await _yield_now()
        handle = await self.ledgers.create_ledger(
            self.ml.config.ensemble_size, self.ml.config.write_quorum, self.ml.config.ack_quorum,
            {"compactedTopic": "/".join(self.ml.name), "compactedTo": str(end)},
        )
        try:
            await self._write(handle, previous, end, latest)
            await handle.close()
            cursor.set_property(COMPACTED_LEDGER_PROPERTY, str(handle.ledger_id))
            cursor.set_property(HORIZON_PROPERTY, str(end))
            cursor.ack_cumulative(end)
            await cursor.persist()
        except BaseException:
            await self._drop(handle)
            raise
        view = CompactedView(handle.ledger_id, end)
        log.info("%s compacted up to %s into ledger %d (%d keys)", self.ml.name, end, handle.ledger_id, len(latest))
        if previous is not None and previous.ledger_id != handle.ledger_id:
            try:
                await self.ledgers.delete_ledger(previous.ledger_id)
            except MagnetarError as exc:
                log.warning("%s: could not delete the previous compacted ledger %d: %s",
                            self.ml.name, previous.ledger_id, exc.message)
        return view

    async def _write(
        self, handle: WriteHandle, previous: CompactedView | None, end: Position, latest: dict[str, MessageKey]
    ) -> None:
        pending: list[asyncio.Future[int]] = []
        async for item in self._view(previous, end):
            out = kept(item, latest)
            await _yield_now()
            if out is None:
                continue
            pending.append(handle.add_entry(compacted_entry.encode(out)))
            if len(pending) >= _ADD_WINDOW:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)

    async def _drop(self, handle: WriteHandle) -> None:
        try:
            await handle.abort()
            await self.ledgers.delete_ledger(handle.ledger_id)
        except MagnetarError as exc:
            log.warning("%s: could not delete an unfinished compacted ledger: %s", self.ml.name, exc)


async def _yield_now() -> None:
    """Let the event loop run between entries: decoding a topic's entries (batches of
    up to thousands of messages) must not hold up its producers and consumers."""
    await asyncio.sleep(0)
