"""Ledger storage: write cache → entry log + index, and the LastLogMark checkpoint.

Like BookKeeper's DbLedgerStorage. Adds go to the write cache (a dict of encoded
records) and become readable at once. A flush swaps the cache, writes its records
sorted by (ledger, entry) to the entry log, fsyncs it, commits the locations to the
index in one transaction, and only then moves the LastLogMark to the journal position
captured *before* the swap — every add journaled before that position was put in the
cache before the swap, so it is in this flush or an earlier one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from magnetar.bookie.entrylog import EntryLogger
from magnetar.bookie.index import LedgerIndex, LedgerRecord, Location, entry_key, pack_location
from magnetar.bookie.lastmark import JournalPosition, LastLogMark
from magnetar.bookie.record import CorruptRecord, decode

log = logging.getLogger(__name__)

Key = tuple[int, int]


@dataclass(slots=True)
class LedgerState:
    """What the bookie knows of one ledger it stores."""

    fenced: bool = False
    lac: int = -1
    last_entry: int = -1

    def record(self) -> LedgerRecord:
        return LedgerRecord(self.fenced, self.lac, self.last_entry)


class WriteCache:
    """The memtable: records not yet in an entry log, by (ledger, entry)."""

    def __init__(self) -> None:
        self.active: dict[Key, bytes] = {}
        self.active_bytes = 0
        self.flushing: dict[Key, bytes] = {}

    def put(self, key: Key, record: bytes) -> None:
        old = self.active.get(key)
        if old is not None:
            self.active_bytes -= len(old)
        self.active[key] = record
        self.active_bytes += len(record)

    def get(self, key: Key) -> bytes | None:
        rec = self.active.get(key)
        if rec is None:
            rec = self.flushing.get(key)
        return rec

    def next_entry(self, ledger_id: int, entry_id: int) -> int | None:
        """The first cached entry id at or after ``entry_id`` of the ledger (None: none).
        A scan of the cache (bounded by its size); call it from the thread that writes it."""
        found = [e for cache in (self.active, self.flushing) for lid, e in cache if lid == ledger_id and e >= entry_id]
        return min(found, default=None)

    def swap(self) -> dict[Key, bytes]:
        self.flushing, self.active, self.active_bytes = self.active, {}, 0
        return self.flushing

    def drop_flushing(self) -> None:
        self.flushing = {}

    def drop_ledger(self, ledger_id: int) -> None:
        for cache in (self.active, self.flushing):
            for key in [k for k in cache if k[0] == ledger_id]:
                rec = cache.pop(key)
                if cache is self.active:
                    self.active_bytes -= len(rec)


class LedgerStorage:
    """Entry logs + index + LastLogMark under one data directory. Blocking methods
    are marked; the bookie runs them in worker threads."""

    def __init__(self, data_dir: Path, entry_log_max_bytes: int, index_map_bytes: int) -> None:
        self.index = LedgerIndex(data_dir / "index", index_map_bytes)
        self.entry_logs = EntryLogger(data_dir / "ledgers", entry_log_max_bytes)
        self.lastmark = LastLogMark(data_dir / "lastmark")
        self.cache = WriteCache()
        self.ledgers: dict[int, LedgerState] = {}
        self.deleted: set[int] = set()
        self.log_ledgers: dict[int, set[int]] = {}

    def open(self) -> None:
        """Load ledger state and open a fresh entry log. Blocking."""
        self.ledgers = {lid: LedgerState(*rec) for lid, rec in self.index.load_ledgers().items()}
        self.deleted = self.index.load_deleted()
        self.log_ledgers = self.index.load_logs()
        self.entry_logs.open()

    def flush(self, batch: dict[Key, bytes], mark: JournalPosition) -> bool:
        """Persist a swapped-out cache and advance the LastLogMark. Blocking.

        Returns whether the mark moved.
        """
        if batch:
            keys = sorted(batch)
            with self.index.write_lock:
                keys = [k for k in keys if k[0] not in self.deleted]
                records = [batch[k] for k in keys]
                locations = self.entry_logs.append_many(records)
                self.entry_logs.sync()
                index_rows = []
                touched_logs: dict[int, set[int]] = {}
                for (lid, eid), rec, (log_id, offset) in zip(keys, records, locations, strict=True):
                    index_rows.append((entry_key(lid, eid), pack_location(log_id, offset, len(rec))))
                    ids = self.log_ledgers.setdefault(log_id, set())
                    if lid not in ids:
                        ids.add(lid)
                        touched_logs[log_id] = ids
                ledger_rows = {
                    lid: self.ledgers[lid].record()
                    for lid in {k[0] for k in keys}
                    if lid in self.ledgers
                }
                self.index.commit_flush(index_rows, ledger_rows, touched_logs)
        return self.lastmark.advance(mark)

    def read_stored(self, ledger_id: int, entry_ids: list[int]) -> dict[int, bytes]:
        """Records of the given entries from entry logs (not the cache). Blocking."""
        found = self.index.get_many(ledger_id, entry_ids)
        out: dict[int, bytes] = {}
        for eid, loc in found.items():
            out[eid] = self._read_record(ledger_id, eid, loc)
        return out

    def _read_record(self, ledger_id: int, entry_id: int, loc: Location) -> bytes:
        data = self.entry_logs.read(loc.log_id, loc.offset, loc.length)
        try:
            rec, _ = decode(data)
        except CorruptRecord as exc:
            raise OSError(
                f"entry log {loc.log_id:08x} is damaged at offset {loc.offset} "
                f"(ledger {ledger_id} entry {entry_id}): {exc}"
            ) from exc
        if (rec.ledger_id, rec.entry_id) != (ledger_id, entry_id):
            raise OSError(f"index points ledger {ledger_id} entry {entry_id} at another record")
        return data

    def persist_ledger(self, ledger_id: int) -> None:
        """Durably store one ledger's state now (fencing). Blocking."""
        with self.index.write_lock:
            state = self.ledgers.get(ledger_id)
            if state is not None and ledger_id not in self.deleted:
                self.index.put_ledger(ledger_id, state.record())

    def delete_ledger(self, ledger_id: int) -> None:
        """Durably drop a ledger (tombstoned). Blocking."""
        with self.index.write_lock:
            self.deleted.add(ledger_id)
            self.index.delete_ledger(ledger_id)

    def evict_ledger(self, ledger_id: int) -> None:
        """Durably drop a ledger's entries and state, without a tombstone: the ledger
        exists elsewhere and may be copied here again. Blocking. The caller made sure
        that no journal record of it lies past the LastLogMark (replay would bring
        it back)."""
        with self.index.write_lock:
            self.ledgers.pop(ledger_id, None)
            self.index.delete_ledger(ledger_id, tombstone=False)

    def collect_garbage(self) -> list[int]:
        """Remove entry logs whose every ledger is deleted or dropped. Blocking. Returns their ids."""
        removed = []
        with self.index.write_lock:  # a flush may be filling a log that looks empty
            current = self.entry_logs.current_log_id
            for log_id in self.entry_logs.log_ids():
                if log_id == current:
                    continue
                if all(lid in self.deleted or lid not in self.ledgers for lid in self.log_ledgers.get(log_id, ())):
                    self.entry_logs.delete(log_id)
                    self.index.remove_log(log_id)
                    self.log_ledgers.pop(log_id, None)
                    removed.append(log_id)
        return removed

    def close(self) -> None:
        self.entry_logs.close()
        self.index.close()
