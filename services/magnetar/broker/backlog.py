"""A topic's backlog in bytes, and how far expiry and backlog eviction move
subscriptions: pure functions of the ledger list (Pulsar's estimated backlog size).

Sizes are estimated as Pulsar estimates them: a whole ledger by its stored size, part
of a ledger by its average entry size. The backlog is what follows the slowest durable
subscription's mark-delete position; readers hold nothing back.
"""

from __future__ import annotations

from collections.abc import Iterable

from magnetar.managedledger.layout import LedgerList
from magnetar.managedledger.position import Position


def slowest(mark_deletes: Iterable[Position]) -> Position | None:
    """The lowest mark-delete position (None: no durable subscription, no backlog)."""
    return min(mark_deletes, default=None)


def backlog_bytes(ledgers: LedgerList, mark_delete: Position | None) -> int:
    """Bytes stored after ``mark_delete`` (0 when None)."""
    if mark_delete is None:
        return 0
    total = 0
    for info in ledgers.ledgers:
        if info.entries <= 0 or info.ledger_id < mark_delete.ledger_id:
            continue
        if info.ledger_id == mark_delete.ledger_id:
            after = info.entries - (mark_delete.entry_id + 1)
            if after > 0:
                total += info.size * after // info.entries
        else:
            total += info.size
    return total


def last_entry_before(ledgers: LedgerList, position: Position) -> Position | None:
    """The last stored entry before ``position`` (None: there is none)."""
    for info in reversed(ledgers.ledgers):
        if info.entries <= 0 or info.ledger_id > position.ledger_id:
            continue
        if info.ledger_id < position.ledger_id:
            return Position(info.ledger_id, info.entries - 1)
        if position.entry_id > 0:
            return Position(info.ledger_id, min(position.entry_id, info.entries) - 1)
    return None


def eviction_point(ledgers: LedgerList, limit_bytes: int) -> Position | None:
    """The last entry to acknowledge so that at most ``limit_bytes`` (estimated) are
    stored after it: every subscription behind it moves there (None: everything fits)."""
    kept = 0
    for info in reversed(ledgers.ledgers):
        if info.entries <= 0:
            continue
        if kept + info.size <= limit_bytes:
            kept += info.size
            continue
        # The newest entries of this ledger that still fit (by its average entry size);
        # fewer than all of them, since the whole ledger does not.
        fit = (limit_bytes - kept) * info.entries // info.size
        return Position(info.ledger_id, info.entries - fit - 1)
    return None
