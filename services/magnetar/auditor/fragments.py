"""Which entries of a fragment each bookie holds, and what a lost bookie takes with it. Pure.

Striping puts entry ``e`` of a fragment with ensemble ``B`` (size E) on
``B[(e + k) % E]`` for ``k < Qw``; so the bookie at index ``i`` holds exactly the
entries with ``(i - e) mod E < Qw``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from magnetar.ledger.metadata import LedgerMetadata


@dataclass(frozen=True, slots=True)
class FragmentRepair:
    """One lost copy: bookie ``missing`` of the fragment starting at ``first_entry``."""

    index: int
    first_entry: int
    last_entry: int
    """Last entry of the fragment; below ``first_entry`` when it holds none."""
    bookies: tuple[str, ...]
    missing: str


def holds(bookies: tuple[str, ...], write_quorum: int, bookie: str, entry_id: int) -> bool:
    """True when ``bookie`` is in the write set of ``entry_id`` for this ensemble."""
    return (bookies.index(bookie) - entry_id) % len(bookies) < write_quorum


def entries_on(
    bookies: tuple[str, ...], write_quorum: int, bookie: str, first: int, last: int
) -> list[int]:
    """The entries among ``first..last`` that ``bookie`` stores."""
    i, e = bookies.index(bookie), len(bookies)
    return [x for x in range(first, last + 1) if (i - x) % e < write_quorum]


def first_and_last_on(
    bookies: tuple[str, ...], write_quorum: int, bookie: str, first: int, last: int
) -> list[int]:
    """The first and the last entry among ``first..last`` that ``bookie`` stores (one id
    when they coincide, none when it stores none of them)."""
    e = len(bookies)
    head = next(
        (
            x
            for x in range(first, min(last, first + e - 1) + 1)
            if holds(bookies, write_quorum, bookie, x)
        ),
        None,
    )
    if head is None:
        return []
    tail = next(
        x
        for x in range(last, max(first, last - e + 1) - 1, -1)
        if holds(bookies, write_quorum, bookie, x)
    )
    return [head] if tail == head else [head, tail]


def repairs(
    metadata: LedgerMetadata, missing: Collection[str], *, with_open_last: bool = False
) -> list[FragmentRepair]:
    """Every (fragment, lost bookie) pair to re-replicate. The last fragment of an open
    ledger is left out unless ``with_open_last`` (its end is not known yet)."""
    out = []
    last_index = len(metadata.fragments) - 1
    for i, f in enumerate(metadata.fragments):
        if i == last_index and not metadata.is_closed and not with_open_last:
            continue
        last = metadata.fragment_last_entry(i)
        out += [
            FragmentRepair(i, f.first_entry, last, f.bookies, b) for b in f.bookies if b in missing
        ]
    return out


def open_last_fragment_affected(metadata: LedgerMetadata, missing: Collection[str]) -> bool:
    """True when the ledger is not closed and its current fragment has a lost bookie."""
    return not metadata.is_closed and any(b in missing for b in metadata.current_ensemble)
