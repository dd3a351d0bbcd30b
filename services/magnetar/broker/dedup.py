"""Message deduplication state of one topic, and its snapshot.

Each producer name has a highest sequence id *pushed* (sent to the managed ledger) and
*persisted* (stored). Retry/DLQ copies use a producer name per moved message
(``__move:…``, :mod:`magnetar.broker.deadletter.copies`); only the latest
``MAX_MOVE_NAMES`` of those are remembered.

A broker that takes a topic over rebuilds the state from the entries (each ``EntryBatch``
names its producer and sequence ids). A *snapshot* bounds that scan, as Pulsar's
``pulsar.dedup`` cursor does (``brokerDeduplicationEntriesInterval``): every
``deduplication_entries_interval`` stored entries the owner writes, in the ledger list's
properties, the ordinary producers' persisted sequence ids and the position to scan from.
That position is just after the last entry the state covers, or the first remembered
move if that is earlier: move names are not in the snapshot (there may be 100,000), the
scan finds them again. A snapshot may hold ids newer than its position (entries stored
while it was written): taking the highest of the snapshot and the scan is still exact,
as persisted ids only grow.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field

from magnetar.broker.deadletter import MOVE_PRODUCER_PREFIX
from magnetar.common.message_id import INT64_MAX
from magnetar.managedledger.position import Position

MAX_MOVE_NAMES = 100_000
"""Retry/DLQ moves each use a producer name of their own; a topic remembers the latest
this many of them."""

SNAPSHOT_PROPERTY = "deduplication-snapshot"
"""The ledger list property holding the snapshot (JSON)."""

MAX_SNAPSHOT_PRODUCERS = 10_000
"""More ordinary producer names than this (Pulsar's brokerDeduplicationMaxNumberOfProducers):
no new snapshot is written (the last one stays valid; the scan is longer)."""


@dataclass
class Snapshot:
    scan_from: Position
    producers: dict[str, int]

    def encode(self) -> str:
        return json.dumps({"scan_from": list(self.scan_from), "producers": self.producers}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Snapshot | None:
        """The snapshot stored as ``text``; None when it is not one (a scan from the
        first entry then rebuilds everything)."""
        try:
            doc = json.loads(text)
            ledger_id, entry_id = doc["scan_from"]
            producers = doc["producers"]
            valid = (
                all(type(x) is int for x in (ledger_id, entry_id))
                and isinstance(producers, dict)
                and all(isinstance(k, str) and type(v) is int and v <= INT64_MAX for k, v in producers.items())
            )
        except (ValueError, TypeError, KeyError, RecursionError):
            return None
        return cls(Position(ledger_id, entry_id), dict(producers)) if valid else None


@dataclass
class DedupState:
    pushed: dict[str, int] = field(default_factory=dict)
    persisted: dict[str, int] = field(default_factory=dict)
    moves: deque[str] | tuple[()] = ()
    """Remembered move names, oldest first (a deque from the first: most topics have none)."""
    move_positions: dict[str, Position] = field(default_factory=dict)
    """Where each remembered move name was first stored (when known)."""

    def stored(self, producer_name: str, highest_seq: int, position: Position | None = None) -> None:
        """``producer_name``'s entries up to ``highest_seq`` are stored (the last at ``position``).

        An id over 2^63-1 is ignored: sends refuse them (Pulsar's ids are Java longs, a
        producer is told its last one as an int64), but an entry's messages carry ids of
        their own, which a scan reads."""
        if highest_seq <= self.persisted.get(producer_name, -1) or highest_seq > INT64_MAX:
            return
        if producer_name.startswith(MOVE_PRODUCER_PREFIX) and producer_name not in self.persisted:
            moves = self.moves or deque()
            moves.append(producer_name)
            self.moves = moves
            if position is not None:
                self.move_positions[producer_name] = position
            if len(self.moves) > MAX_MOVE_NAMES:
                old = moves.popleft()
                self.move_positions.pop(old, None)
                if self.pushed.get(old, -1) <= self.persisted.get(old, -1):  # none in flight
                    self.pushed.pop(old, None)
                    self.persisted.pop(old, None)
        self.persisted[producer_name] = highest_seq

    def snapshot(self, scan_from: Position) -> Snapshot | None:
        """The snapshot of a state that covers every entry before ``scan_from``; None
        when it cannot be made (a remembered move at an unknown position, too many
        producers)."""
        if self.moves:
            oldest = self.move_positions.get(self.moves[0])
            if oldest is None:
                return None
            scan_from = min(scan_from, oldest)
        producers = {n: s for n, s in self.persisted.items() if not n.startswith(MOVE_PRODUCER_PREFIX)}
        if len(producers) > MAX_SNAPSHOT_PRODUCERS:
            return None
        return Snapshot(scan_from, producers)
