"""The cache of recently added entries that serves tailing reads without a bookie trip.

Entries go in in position order as their adds complete; when the cache holds more than
its byte budget, the oldest entries leave first. So it always holds a suffix of the log
(the newest entries), which is what tailing readers ask for.
"""

from __future__ import annotations

from collections import OrderedDict

from magnetar.managedledger.position import Position


class EntryCache:
    """Position -> payload for the newest entries, bounded by a byte budget."""

    def __init__(self, max_bytes: int) -> None:
        """Args: max_bytes: budget for payload bytes (0 disables the cache)."""
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: OrderedDict[Position, bytes] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, position: Position, payload: bytes) -> None:
        """Insert a newly added entry (positions arrive in increasing order)."""
        if self.max_bytes <= 0 or len(payload) > self.max_bytes:
            return
        self._entries[position] = payload
        self.size += len(payload)
        while self.size > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.size -= len(old)

    def get(self, position: Position) -> bytes | None:
        """The payload if cached."""
        payload = self._entries.get(position)
        if payload is None:
            self.misses += 1
        else:
            self.hits += 1
        return payload

    def drop_ledgers(self, ledger_ids: set[int]) -> None:
        """Forget entries of deleted ledgers."""
        for p in [p for p in self._entries if p.ledger_id in ledger_ids]:
            self.size -= len(self._entries.pop(p))

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0
