"""A set of positions stored as sorted, disjoint, closed ranges ``[first, last]``.

Two ranges merge when they touch: when the position after one's end (as the managed
ledger's layout says, see :meth:`LedgerList.next_position`) is the other's start. The
layout can change after a range was added (a ledger closes, so its last entry becomes
adjacent to the next ledger's entry 0); ranges that became adjacent that way stay
separate until the next change touches them, which is harmless: membership and counts
do not depend on it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from magnetar.managedledger.position import Position

Range = tuple[Position, Position]


class RangeSet:
    """Sorted disjoint closed ranges of positions (individually acknowledged entries)."""

    def __init__(self, next_position: Callable[[Position], Position]) -> None:
        """Args: next_position: the position after a given one (the ledger layout)."""
        self._next = next_position
        self._firsts: list[Position] = []
        self._lasts: list[Position] = []

    def __len__(self) -> int:
        """The number of ranges (not of positions)."""
        return len(self._firsts)

    def __iter__(self) -> Iterator[Range]:
        return iter(list(zip(self._firsts, self._lasts, strict=True)))

    def __contains__(self, p: object) -> bool:
        if not isinstance(p, tuple):
            return False
        i = bisect.bisect_right(self._firsts, p) - 1
        return i >= 0 and p <= self._lasts[i]

    def ranges(self, limit: int | None = None) -> list[Range]:
        """The ranges, in order (the first ``limit`` of them when given)."""
        if limit is None:
            return list(self)
        return list(zip(self._firsts[:limit], self._lasts[:limit], strict=True))

    def first(self) -> Range | None:
        """The lowest range, None when empty."""
        return (self._firsts[0], self._lasts[0]) if self._firsts else None

    def covering_or_after(self, p: Position) -> Range | None:
        """The first range that holds ``p`` or starts after it; None when there is none."""
        i = bisect.bisect_left(self._lasts, p)
        return (self._firsts[i], self._lasts[i]) if i < len(self._firsts) else None

    def clear(self) -> None:
        self._firsts.clear()
        self._lasts.clear()

    def add(self, p: Position) -> bool:
        """Add one position; True when it was not in the set yet."""
        return self.add_range(p, p)

    def add_range(self, first: Position, last: Position) -> bool:
        """Add every position of ``[first, last]``; True when something was new.

        Ranges it overlaps or touches are merged with it.
        """
        if last < first:
            return False
        i = bisect.bisect_right(self._firsts, first) - 1
        if i >= 0 and first <= self._lasts[i] and last <= self._lasts[i]:
            return False  # wholly inside an existing range
        # Absorb the left neighbour when it overlaps or touches.
        if i >= 0 and (first <= self._lasts[i] or self._next(self._lasts[i]) == first):
            first = self._firsts[i]
            start = i
        else:
            start = i + 1
        # Absorb every range that starts inside [first, last] or right after it.
        end = start
        after = self._next(last)
        while end < len(self._firsts) and (self._firsts[end] <= last or self._firsts[end] == after):
            last = max(last, self._lasts[end])
            after = self._next(last)
            end += 1
        self._firsts[start:end] = [first]
        self._lasts[start:end] = [last]
        return True

    def remove_through(self, p: Position) -> None:
        """Drop every position ``<= p`` (the mark-delete position moved to ``p``)."""
        i = bisect.bisect_right(self._lasts, p)
        del self._firsts[:i]
        del self._lasts[:i]
        if self._firsts and self._firsts[0] <= p:
            self._firsts[0] = self._next(p)

    def pop_first(self) -> Range | None:
        """Remove and return the lowest range."""
        if not self._firsts:
            return None
        return self._firsts.pop(0), self._lasts.pop(0)

    def count(self, count_range: Callable[[Position, Position], int]) -> int:
        """The number of positions, counting each range with ``count_range(first, last)``."""
        return sum(count_range(f, last) for f, last in zip(self._firsts, self._lasts, strict=True))
