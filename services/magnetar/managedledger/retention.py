"""Which consumed ledgers retention lets go (Pulsar's rule).

A closed ledger is *consumed* when every durable cursor's mark-delete position is at or
past its last entry; without durable cursors every closed ledger is. Consumed ledgers
are deleted oldest first while the oldest is older than the retention time or the
consumed ledgers still kept are larger than the retention size: consumed data stays
only while both limits allow it. A ledger's age counts from when it stopped receiving
writes: the creation of the ledger after it. The open ledger, and the last ledger of
the list (the open one is missing from the list only between rollovers), are never
deleted.

Delayed messages: retention of a delayed message counts from its delivery time. A
ledger holding delayed messages (``LedgerInfo.max_deliver_at_ms``, the latest clamped
delivery time among them) counts its age from that time when it is later than the
ledger's end, and is not deleted at all (by age or by size) before that time: a message
not delivered yet has not started its retention. (That matters without durable cursors,
when every closed ledger counts as consumed; with cursors a consumed ledger's delayed
messages were delivered already.) A ledger recovered after its broker crashed has no
record of its delayed messages (the record is written when the ledger closes normally)
and ages as before.
"""

from __future__ import annotations

from magnetar.common.errors import InvalidArgument
from magnetar.managedledger.layout import LedgerInfo, LedgerList
from magnetar.managedledger.position import Position


def check_retention(retention_time_s: float | None, retention_size_bytes: int | None) -> None:
    """Raises InvalidArgument: a negative (or non-numeric) limit; None means unlimited."""
    if retention_time_s is not None and (
        not isinstance(retention_time_s, int | float) or isinstance(retention_time_s, bool) or not retention_time_s >= 0
    ):
        raise InvalidArgument(f"retention time is None or seconds >= 0, not {retention_time_s!r}")
    if retention_size_bytes is not None and (
        not isinstance(retention_size_bytes, int) or isinstance(retention_size_bytes, bool) or retention_size_bytes < 0
    ):
        raise InvalidArgument(f"retention size is None or bytes >= 0, not {retention_size_bytes!r}")


def consumed_ledgers(ledgers: LedgerList, slowest: Position | None) -> list[LedgerInfo]:
    """The consumed ledgers, oldest first (``slowest``: the lowest durable mark-delete
    position, None without durable cursors)."""
    out = []
    for info in ledgers.ledgers[:-1]:
        if info.ledger_id == ledgers.open_ledger_id:
            break
        if slowest is not None and info.entries > 0 and Position(info.ledger_id, info.entries - 1) > slowest:
            break  # (an empty ledger after consumed ones is consumed too)
        out.append(info)
    return out


def ledgers_to_delete(
    ledgers: LedgerList,
    slowest: Position | None,
    now_ms: int,
    retention_time_s: float | None,
    retention_size_bytes: int | None,
) -> list[LedgerInfo]:
    """The consumed ledgers retention lets go, oldest first (a prefix of the list).

    Raises:
        InvalidArgument: a negative limit.
    """
    check_retention(retention_time_s, retention_size_bytes)
    consumed = consumed_ledgers(ledgers, slowest)
    kept_size = sum(i.size for i in consumed)
    victims = []
    for index, info in enumerate(consumed):
        following = ledgers.ledgers[index + 1] if index + 1 < len(ledgers.ledgers) else None
        if info.max_deliver_at_ms > now_ms:
            break  # a delayed message is not due yet: its retention has not started
        ended_ms = following.created_ms if following is not None else now_ms
        ended_ms = max(ended_ms, info.max_deliver_at_ms)
        age_s = max(0, now_ms - ended_ms) / 1000
        too_old = retention_time_s is not None and age_s >= retention_time_s
        too_big = retention_size_bytes is not None and kept_size > retention_size_bytes
        if not (too_old or too_big):
            break
        victims.append(info)
        kept_size -= info.size
    return victims
