"""Positions in a topic partition and how a read is split into input partitions (pure).

A position is ``(ledger, entry, batch_index)``; ``batch_index`` -1 is the entry itself
(an unbatched message, or the start of a batch), so positions order as message ids do.
A slice reads one ledger of one topic partition from ``start`` (inclusive) to ``end``
(exclusive). Slices are named by what they read, never by their index in a list, so the
same inputs give the same slices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Pos = tuple[int, int, int]

EARLIEST: Pos = (-1, -1, -1)
_BEYOND = 1 << 62
"""An entry id past any real one (the open ledger's end while it still grows)."""


@dataclass(frozen=True)
class PartitionLayout:
    """What the gateway says about one topic partition when a read is planned."""

    topic: str
    """The topic as the user named it (a partitioned topic's own name)."""
    partition_topic: str
    """The partition's name (the topic itself when it is not partitioned)."""
    partition: int
    """-1 when the topic is not partitioned."""
    ledgers: tuple[tuple[int, int], ...]
    """(ledger id, entries) oldest first; the last one is the open ledger."""
    last: tuple[int, int] | None
    """The last message's (ledger, entry) at planning time; None: nothing stored."""
    mark_delete: tuple[int, int] | None = None
    """The chosen subscription's mark-delete position, when one was asked for."""


@dataclass(frozen=True, order=True)
class SliceSpec:
    topic: str
    partition_topic: str
    partition: int
    ledger: int
    start: Pos
    end: Pos


def parse_pos(text: str) -> Pos:
    """A message id string (``ledger:entry[:partition[:batch]]``) as a position."""
    from magnetar.common.message_id import MessageId

    mid = MessageId.parse(text)
    return (mid.ledger_id(), mid.entry_id(), mid.batch_index())


def snapshot_end(layout: PartitionLayout) -> Pos:
    """Just after the last message stored when the read was planned."""
    if layout.last is None or layout.last[1] < 0:
        if layout.last is None:
            return EARLIEST
        return (layout.last[0], 0, -1)
    return (layout.last[0], layout.last[1] + 1, -1)


def start_of(layout: PartitionLayout, spec: str) -> Pos:
    """Where a read starts (inclusive) given "earliest", "latest" or an id string; after
    the subscription's mark-delete position when later."""
    if spec in ("", "earliest"):
        start = EARLIEST
    elif spec == "latest":
        start = snapshot_end(layout)
    else:
        start = parse_pos(spec)
    if layout.mark_delete is not None:
        start = max(start, (layout.mark_delete[0], layout.mark_delete[1] + 1, -1))
    return start


def end_of(layout: PartitionLayout, spec: str) -> Pos:
    """Where a read ends (exclusive): "latest" is the snapshot's end."""
    if spec in ("", "latest"):
        return snapshot_end(layout)
    if spec == "earliest":
        return EARLIEST
    return min(parse_pos(spec), snapshot_end(layout))


def split(layout: PartitionLayout, start: Pos, end: Pos) -> list[SliceSpec]:
    """One slice per ledger holding messages in ``[start, end)``."""
    out = []
    for i, (ledger, entries) in enumerate(layout.ledgers):
        is_open = i == len(layout.ledgers) - 1
        lo = max(start, (ledger, 0, -1))
        hi = min(end, (ledger, _BEYOND if is_open else entries, -1))
        if lo < hi and (is_open or entries > 0):
            out.append(SliceSpec(layout.topic, layout.partition_topic, layout.partition, ledger, lo, hi))
    return out


def plan(layouts: Sequence[PartitionLayout], starting: str, ending: str) -> list[SliceSpec]:
    """Every slice of a batch read, in (topic, partition, ledger) order."""
    from .options import offset_for

    slices: list[SliceSpec] = []
    for layout in layouts:
        start = start_of(layout, offset_for(starting, layout.topic, layout.partition))
        end = end_of(layout, offset_for(ending, layout.topic, layout.partition))
        slices.extend(split(layout, start, end))
    return sorted(slices)


def in_range(pos: Pos, start: Pos, end: Pos) -> bool:
    return start <= pos < end


def done_after_entry(ledger: int, entry: int, end: Pos) -> bool:
    """True when nothing after entry ``(ledger, entry)`` is before ``end``."""
    return (ledger, entry + 1, -1) >= end
