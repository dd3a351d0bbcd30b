"""A managed ledger's internal figures, as Pulsar's ``internalStats`` reports them
(``ManagedLedgerInternalStats``): the ledgers, the cursors, the counters.

Pulsar writes a cursor's individually deleted messages as Guava ranges open below and
closed above (``(3:4..3:7]`` is entries 3:5 to 3:7); :func:`deleted_ranges` does the
same. Cursors live in ZooKeeper documents here, not in cursor ledgers, so a cursor's
``cursorLedger`` is always -1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from magnetar.managedledger.position import Position

if TYPE_CHECKING:
    from magnetar.managedledger.cursor import ManagedCursor
    from magnetar.managedledger.layout import LedgerList
    from magnetar.managedledger.ledger import ManagedLedger


@dataclass
class LedgerFigures:
    ledger_id: int
    entries: int
    size: int
    created_ms: int


@dataclass
class CursorFigures:
    name: str
    mark_delete_position: Position
    read_position: Position
    individually_deleted_messages: str
    deleted_ranges: int
    messages_consumed: int
    """Pulsar's messagesConsumedCounter: entries added since the managed ledger was
    opened less the cursor's backlog (negative when the backlog predates the opening)."""
    entries_since_first_not_acked: int
    durable: bool
    closed: bool
    properties: dict[str, Any] = field(default_factory=dict)
    active: bool = False
    """Consumers are attached (the managed ledger does not know: its owner fills it in)."""


@dataclass
class ManagedLedgerFigures:
    entries_added: int
    number_of_entries: int
    total_size: int
    current_ledger_entries: int
    current_ledger_size: int
    last_ledger_created_ms: int
    pending_adds: int
    last_confirmed_entry: Position
    state: str
    ledgers: list[LedgerFigures]
    cursors: list[CursorFigures]


def deleted_ranges(ranges: list[tuple[Position, Position]], layout: LedgerList) -> str:
    """``[(a..b], (c..d]]``: each acknowledged range ``[first, last]`` as Pulsar prints
    it, open at the position before ``first``."""
    return "[" + ", ".join(f"({layout.previous_position(first)}..{last}]" for first, last in ranges) + "]"


def cursor_figures(ml: ManagedLedger, cursor: ManagedCursor) -> CursorFigures:
    layout = ml.layout
    acked = cursor.individually_acked
    md, read = cursor.mark_delete_position, cursor.read_position
    return CursorFigures(
        name=cursor.name,
        mark_delete_position=md,
        read_position=read,
        individually_deleted_messages=deleted_ranges(acked, layout),
        deleted_ranges=len(acked),
        messages_consumed=ml.entries_added - cursor.backlog(),
        entries_since_first_not_acked=ml.count_entries(ml.next_position(md), layout.previous_position(read)),
        durable=cursor.durable,
        closed=cursor.closed,
        properties=dict(cursor.properties),
    )


def figures(ml: ManagedLedger) -> ManagedLedgerFigures:
    """The managed ledger's figures now (the open ledger counts its confirmed entries)."""
    ledgers = ml.ledgers
    current = next((i for i in ledgers if i.ledger_id == ml.current_ledger_id), None)
    cursors = [*ml.cursors.values(), *ml.non_durable_cursors.values()]
    return ManagedLedgerFigures(
        entries_added=ml.entries_added,
        number_of_entries=ml.number_of_entries,
        total_size=ml.total_size,
        current_ledger_entries=current.entries if current else 0,
        current_ledger_size=current.size if current else 0,
        last_ledger_created_ms=ledgers[-1].created_ms if ledgers else 0,
        pending_adds=ml.pending_adds,
        last_confirmed_entry=ml.last_confirmed_position,
        state=ml.state,
        ledgers=[LedgerFigures(i.ledger_id, max(i.entries, 0), i.size, i.created_ms) for i in ledgers],
        cursors=[cursor_figures(ml, c) for c in sorted(cursors, key=lambda c: c.name)],
    )


def estimated_size(layout: LedgerList, first: Position, last: Position) -> int:
    """Bytes of the entries in ``[first, last]``, estimated from each ledger's average
    entry size (as Pulsar estimates a backlog's size)."""
    if last < first:
        return 0
    total = 0.0
    for info in layout.ledgers:
        if info.ledger_id < first.ledger_id or info.entries <= 0:
            continue
        if info.ledger_id > last.ledger_id:
            break
        lo = max(first.entry_id, 0) if info.ledger_id == first.ledger_id else 0
        hi = min(last.entry_id if info.ledger_id == last.ledger_id else info.entries - 1, info.entries - 1)
        if hi >= lo:
            total += (hi - lo + 1) * info.size / info.entries
    return round(total)
