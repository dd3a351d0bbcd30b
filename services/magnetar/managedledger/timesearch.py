"""Finding the first entry published at or after a time (seek by timestamp).

A binary search over every stored entry, across ledgers, reading one entry per step
(``log2(entries)`` reads), assuming publish times do not decrease along the log.
The ledger list is taken as it is when the search starts; entries added meanwhile
count as later than every entry searched.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from itertools import accumulate
from typing import Protocol

from magnetar.common.errors import InvalidArgument
from magnetar.managedledger.layout import LedgerList
from magnetar.managedledger.position import Position
from magnetar.managedledger.reads import Entry


class SearchedLedger(Protocol):
    """What the search uses of the managed ledger (``ManagedLedger`` is one)."""

    @property
    def layout(self) -> LedgerList: ...

    def next_position(self, p: Position) -> Position: ...

    async def read_entries(self, start: Position, max_entries: int, max_bytes: int) -> list[Entry]: ...


async def find_position_by_time(
    ml: SearchedLedger, timestamp_ms: int, publish_time: Callable[[bytes], int]
) -> Position:
    """See :meth:`ManagedLedger.find_position_by_time`."""
    if not isinstance(timestamp_ms, int) or isinstance(timestamp_ms, bool):
        raise InvalidArgument(f"a timestamp is an integer of milliseconds, not {timestamp_ms!r}")
    layout = ml.layout
    last = layout.last_confirmed()
    spans = [(i.ledger_id, i.entries) for i in layout.ledgers if i.entries > 0 and Position(i.ledger_id, 0) <= last]
    starts = [0, *accumulate(n for _, n in spans)]
    total = starts[-1]

    def nth(index: int) -> Position:
        k = bisect.bisect_right(starts, index) - 1
        return Position(spans[k][0], index - starts[k])

    lo, hi = 0, total
    while lo < hi:
        mid = (lo + hi) // 2
        got = await ml.read_entries(nth(mid), 1, 1)
        if not got or publish_time(got[0][1]) >= timestamp_ms:  # nothing there: trimmed meanwhile
            hi = mid
        else:
            lo = mid + 1
    return nth(lo) if lo < total else ml.next_position(last)
