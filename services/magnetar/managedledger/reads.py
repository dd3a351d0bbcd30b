"""Reading a managed ledger's entries: recent ones from the cache, older ones from bookies.

Entries of closed ledgers are read through a :class:`LedgerReader` opened without
recovery (kept open for the ``max_open_readers`` most recently used ledgers). Entries of
the ledger still open for writes that have left the cache are read from its bookies too,
up to the writer's own LAC: the writer handle reads them with its current metadata (so it
follows ensemble changes) instead of asking the bookies for the LAC.
"""

from __future__ import annotations

from collections import OrderedDict

from magnetar.managedledger.cache import EntryCache
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.ledgers import Ledgers, ReadHandle, WriteHandle
from magnetar.managedledger.position import Position

Entry = tuple[Position, bytes]


class EntryReads:
    """The read side of one managed ledger: cache, open readers, the writer's ledger."""

    def __init__(self, client: Ledgers, config: ManagedLedgerConfig) -> None:
        """Args: client: the ledger client (``open_ledger`` is what is used)."""
        self._client = client
        self._config = config
        self.cache = EntryCache(config.cache_max_bytes)
        self._readers: OrderedDict[int, ReadHandle] = OrderedDict()
        self.writer: WriteHandle | None = None
        """The handle writing the open ledger, while there is one."""

    async def read(self, ledger_id: int, first: int, last: int) -> list[Entry]:
        """Entries ``first..last`` of one ledger (all of them must be confirmed), in order.

        Raises:
            NoSuchLedger, NoSuchEntry, MagnetarError: the bookies could not serve them.
        """
        out: list[Entry | None] = []
        for e in range(first, last + 1):
            p = Position(ledger_id, e)
            payload = self.cache.get(p)
            out.append((p, payload) if payload is not None else None)
        e = first
        while e <= last:
            if out[e - first] is not None:
                e += 1
                continue
            run_end = e
            while run_end < last and out[run_end + 1 - first] is None:
                run_end += 1
            run_end = min(run_end, e + self._config.read_batch_entries - 1)
            reader = await self._reader(ledger_id)
            for entry in await reader.read(e, run_end):
                out[entry.entry_id - first] = (Position(ledger_id, entry.entry_id), entry.payload)
            e = run_end + 1
        return [x for x in out if x is not None]

    async def _reader(self, ledger_id: int) -> ReadHandle:
        writer = self.writer
        if writer is not None and writer.ledger_id == ledger_id:
            return writer
        reader = self._readers.get(ledger_id)
        if reader is not None:
            self._readers.move_to_end(ledger_id)
            return reader
        reader = await self._client.open_ledger(ledger_id, recovery=False)
        self._readers[ledger_id] = reader
        while len(self._readers) > self._config.max_open_readers:
            self._readers.popitem(last=False)
        return reader

    def remember(self, ledger_id: int, reader: ReadHandle) -> None:
        """Keep a reader of a closed ledger (e.g. the one recovery returned)."""
        self._readers[ledger_id] = reader
        while len(self._readers) > self._config.max_open_readers:
            self._readers.popitem(last=False)

    def forget(self, ledger_ids: set[int]) -> None:
        """Drop cached entries and readers of deleted ledgers."""
        self.cache.drop_ledgers(ledger_ids)
        for ledger_id in ledger_ids:
            self._readers.pop(ledger_id, None)

    def clear(self) -> None:
        self.cache.clear()
        self._readers.clear()
        self.writer = None
