"""The managed ledger's settings: ledger quorums, rollover limits, cache, cursors."""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.common.errors import InvalidArgument
from magnetar.ledger.metadata import check_quorums


@dataclass(frozen=True)
class ManagedLedgerConfig:
    """Settings of every managed ledger a broker opens.

    Raises:
        InvalidArgument: (on construction) a value out of range.
    """

    ensemble_size: int = 2
    """Bookies per ledger (E)."""
    write_quorum: int = 2
    """Copies of each entry (Qw)."""
    ack_quorum: int = 2
    """Copies confirmed before an add completes (Qa)."""
    max_entries_per_ledger: int = 50_000
    """The open ledger rolls over once it holds this many entries ..."""
    max_size_per_ledger: int = 512 * 1024 * 1024
    """... or this many payload bytes ..."""
    max_ledger_age_s: float = 4 * 3600
    """... or is this old and not empty (checked on each add and by a timer)."""
    cache_max_bytes: int = 64 * 1024 * 1024
    """Recently added entries kept in memory for tailing reads (0: no cache)."""
    max_open_readers: int = 32
    """Readers of closed ledgers kept open (least recently used are dropped)."""
    read_batch_entries: int = 1000
    """Most entries asked of the bookies in one read."""
    cursor_persist_interval_s: float = 1.0
    """A cursor's position is written to ZooKeeper at most this often (and on close)."""
    max_unacked_ranges_to_persist: int = 10_000
    """Individually acknowledged ranges stored per cursor; later ones are redelivered
    after a restart (as Pulsar's ``managedLedgerMaxUnackedRangesToPersist``)."""
    max_batch_acks_to_persist: int = 500
    """Partly acknowledged batch entries stored per cursor (lowest positions first);
    acknowledged messages of later ones are redelivered after a restart."""
    max_redelivery_counts_to_persist: int = 5_000
    """Redelivery counts stored per cursor (lowest positions first); later ones restart
    from 0 after a restart. With the defaults a cursor document stays under ~0.85 MB
    even with 10-digit ledger and entry ids and 1000-message batches (ZooKeeper's znode
    limit is 1 MB); see ``cursor_state``."""

    def __post_init__(self) -> None:
        check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)
        positive = {
            "max_entries_per_ledger": self.max_entries_per_ledger,
            "max_size_per_ledger": self.max_size_per_ledger,
            "max_ledger_age_s": self.max_ledger_age_s,
            "max_open_readers": self.max_open_readers,
            "read_batch_entries": self.read_batch_entries,
            "max_unacked_ranges_to_persist": self.max_unacked_ranges_to_persist,
        }
        not_negative = {
            "cache_max_bytes": self.cache_max_bytes,
            "max_batch_acks_to_persist": self.max_batch_acks_to_persist,
            "max_redelivery_counts_to_persist": self.max_redelivery_counts_to_persist,
        }
        for key, value in positive.items():
            if value <= 0:
                raise InvalidArgument(f"{key} must be positive, got {value}")
        for key, value in not_negative.items():
            if value < 0:
                raise InvalidArgument(f"{key} must not be negative, got {value}")
        if self.cursor_persist_interval_s < 0:
            raise InvalidArgument(
                f"cursor_persist_interval_s must not be negative, got {self.cursor_persist_interval_s}"
            )
