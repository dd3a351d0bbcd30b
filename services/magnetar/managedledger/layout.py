"""The ledgers of a managed ledger, in order, and the position arithmetic over them.

Entry ids are contiguous inside a ledger; the position after the last entry of a ledger
is entry 0 of the next ledger that holds (or, when open, may get) entries. Empty closed
ledgers are skipped. The open ledger's ``entries`` here is its count of *confirmed*
entries; in the stored document it is -1 (unknown until closed or recovered).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from magnetar.common.errors import MetadataError
from magnetar.managedledger.position import Position

EARLIEST = Position(-1, -1)
"""Before every entry (a start or reset position meaning "from the first stored entry")."""


def start_position(value: Any) -> Position:
    """A position to start (or reset) at: any ``(ledger, entry)`` pair, or ``(-1, -1)``.

    Raises:
        InvalidArgument: anything else.
    """
    if isinstance(value, tuple | list) and len(value) == 2 and tuple(value) == EARLIEST:
        return EARLIEST
    return Position.of(value)


@dataclass
class LedgerInfo:
    """One ledger of the list."""

    ledger_id: int
    entries: int
    """Entries stored; -1 in a stored document for a ledger that was open."""
    size: int
    """Payload bytes stored."""
    created_ms: int
    max_deliver_at_ms: int = 0
    """The latest delivery time (ms, clamped) of the delayed messages stored in it; 0:
    none. Stored only when set: documents without it (written before delayed delivery,
    or for ledgers without delayed messages) read as 0. Retention counts a ledger's age
    from this time when it is later than the ledger's end (see :mod:`.retention`)."""

    def to_dict(self, is_open: bool = False) -> dict[str, int]:
        """The stored form; an open ledger's entry count is written as -1."""
        doc = {
            "ledger_id": self.ledger_id,
            "entries": -1 if is_open else self.entries,
            "size": self.size,
            "created_ms": self.created_ms,
        }
        if self.max_deliver_at_ms:
            doc["max_deliver_at_ms"] = self.max_deliver_at_ms
        return doc

    @classmethod
    def from_dict(cls, doc: Any) -> LedgerInfo:
        """Parse the stored form.

        Raises:
            MetadataError: a field is missing or not an integer.
        """
        try:
            values = [doc[k] for k in ("ledger_id", "entries", "size", "created_ms")]
        except (KeyError, TypeError) as exc:
            raise MetadataError(f"bad ledger entry in a managed ledger document: {doc!r}") from exc
        values.append(doc.get("max_deliver_at_ms", 0))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values) or values[0] < 0:
            raise MetadataError(f"bad ledger entry in a managed ledger document: {doc!r}")
        return cls(*values)


class LedgerList:
    """Ledgers sorted by id (ids only grow), the last one possibly open for writes."""

    def __init__(self, ledgers: list[LedgerInfo], open_ledger_id: int | None = None) -> None:
        self.ledgers = sorted(ledgers, key=lambda i: i.ledger_id)
        self.open_ledger_id = open_ledger_id

    # -- the list ---------------------------------------------------------------
    def _index(self, ledger_id: int) -> int:
        """Index of the first ledger with id >= ``ledger_id``."""
        return bisect.bisect_left(self.ledgers, ledger_id, key=lambda i: i.ledger_id)

    def find(self, ledger_id: int) -> LedgerInfo | None:
        """The ledger with this id, None when it is not (or no longer) in the list."""
        ledgers = self.ledgers
        if ledgers and ledgers[-1].ledger_id == ledger_id:  # the open ledger: every add asks
            return ledgers[-1]
        i = self._index(ledger_id)
        if i < len(self.ledgers) and self.ledgers[i].ledger_id == ledger_id:
            return self.ledgers[i]
        return None

    def append(self, info: LedgerInfo, *, is_open: bool = False) -> None:
        """Add a ledger after the others (a new one has the highest id)."""
        if self.ledgers and info.ledger_id <= self.ledgers[-1].ledger_id:
            raise MetadataError(f"ledger {info.ledger_id} is not after {self.ledgers[-1].ledger_id}")
        self.ledgers.append(info)
        if is_open:
            self.open_ledger_id = info.ledger_id

    def remove(self, ledger_ids: set[int]) -> None:
        """Drop ledgers from the list."""
        self.ledgers = [i for i in self.ledgers if i.ledger_id not in ledger_ids]
        if self.open_ledger_id in ledger_ids:
            self.open_ledger_id = None

    def to_docs(self) -> list[dict[str, int]]:
        """The list as stored (see :meth:`LedgerInfo.to_dict`)."""
        return [i.to_dict(i.ledger_id == self.open_ledger_id) for i in self.ledgers]

    @property
    def number_of_entries(self) -> int:
        return sum(max(i.entries, 0) for i in self.ledgers)

    @property
    def total_size(self) -> int:
        return sum(i.size for i in self.ledgers)

    # -- positions --------------------------------------------------------------
    def _may_hold(self, info: LedgerInfo) -> bool:
        return info.entries > 0 or info.ledger_id == self.open_ledger_id

    def next_position(self, p: Position) -> Position:
        """The position after ``p``: the next entry of its ledger, else entry 0 of the next
        ledger that holds (or may get) entries; past the end, ``(L, e + 1)``."""
        if p.ledger_id == self.open_ledger_id:  # the tail: every dispatch asks
            return Position(p.ledger_id, p.entry_id + 1)
        i = self._index(p.ledger_id)
        if i < len(self.ledgers) and self.ledgers[i].ledger_id == p.ledger_id:
            info = self.ledgers[i]
            if info.ledger_id == self.open_ledger_id or p.entry_id + 1 < info.entries:
                return Position(p.ledger_id, p.entry_id + 1)
            i += 1
        for info in self.ledgers[i:]:
            if self._may_hold(info):
                return Position(info.ledger_id, 0)
        return Position(p.ledger_id, p.entry_id + 1)

    def normalize(self, p: Position) -> Position:
        """The first position at or after ``p`` that is (or may become) an entry."""
        return self.next_position(Position(p.ledger_id, max(p.entry_id, 0) - 1))

    def contains(self, p: Position) -> bool:
        """True when ``p`` is a stored (confirmed) entry."""
        info = self.find(p.ledger_id)
        return info is not None and 0 <= p.entry_id < info.entries

    def first_position(self) -> Position:
        """Where the first entry is, or will be written."""
        if not self.ledgers:
            return Position(0, 0)
        return self.normalize(Position(self.ledgers[0].ledger_id, 0))

    def last_confirmed(self) -> Position:
        """The last stored entry; ``(last ledger, -1)`` when there is none."""
        for info in reversed(self.ledgers):
            if info.entries > 0:
                return Position(info.ledger_id, info.entries - 1)
        if not self.ledgers:
            return Position(0, -1)
        return Position(self.ledgers[-1].ledger_id, -1)

    def count(self, first: Position, last: Position) -> int:
        """How many stored entries lie in ``[first, last]`` (0 when last < first)."""
        if last < first:
            return 0
        total = 0
        for info in self.ledgers[self._index(first.ledger_id):]:
            if info.ledger_id > last.ledger_id:
                break
            lo = first.entry_id if info.ledger_id == first.ledger_id else 0
            hi = last.entry_id if info.ledger_id == last.ledger_id else info.entries - 1
            hi = min(hi, info.entries - 1)
            total += max(0, hi - max(lo, 0) + 1)
        return total

    def previous_position(self, p: Position) -> Position:
        """The position just before ``p`` as a mark-delete position: ``(L, E - 1)``, so
        ``(L, 0)`` gives ``(L, -1)`` ("before the first entry of L", which also means
        "after every entry of the ledgers before L"). ``(L, -1)`` stays ``(L, -1)``."""
        return Position(p.ledger_id, max(p.entry_id, 0) - 1)

    def nth_entry(self, first: Position, k: int) -> Position:
        """The ``k``-th stored entry counting ``first`` (a stored entry) as the 1st; the
        last confirmed entry when fewer than ``k`` are stored from ``first`` on."""
        last = self.last_confirmed()
        p = first
        while k > 1 and p < last:
            info = self.find(p.ledger_id)
            if info is None:
                break
            end = last.entry_id if p.ledger_id == last.ledger_id else info.entries - 1
            step = min(k - 1, end - p.entry_id)
            p = Position(p.ledger_id, p.entry_id + step)
            k -= step
            if k > 1 and p < last:
                p = self.next_position(p)
                k -= 1
        return p

    def start_mark_delete(self, start: Position, inclusive: bool) -> Position:
        """The mark-delete position of a new cursor reading first from ``start``
        (``inclusive``) or from the entry after it.

        ``(-1, -1)`` (earliest) or anything before the first stored entry: from the first
        entry. Anything after the last confirmed entry (e.g. ``(2**63-1, 2**63-1)``,
        latest): only entries added from now on. A ``start`` that is not a stored entry
        (in a deleted ledger, past a closed ledger's end) reads from the next one.
        """
        last = self.last_confirmed()
        first = self.first_position()
        if start > last:
            return last
        if start < first:
            return self.previous_position(first)
        if inclusive or not self.contains(start):
            return self.previous_position(self.normalize(start))
        return start
