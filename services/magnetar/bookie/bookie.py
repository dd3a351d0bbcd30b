"""The bookie core: validates and journals adds, serves reads, fences, deletes.

Knows nothing of gRPC or ZooKeeper: the server adapts requests to these methods, and
the registration follows :attr:`Bookie.read_only` through ``on_read_only_change``.
Everything here runs on one event loop; blocking file work goes to worker threads.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from magnetar import __version__
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.cookie import RegisteredCookies, format_dirs, verify_registered
from magnetar.bookie.garbagecollector import (
    CollectResult,
    LedgerMetadataView,
    ScanAndCompareGarbageCollector,
)
from magnetar.bookie.journal import Journal, replay
from magnetar.bookie.ledgerstorage import LedgerState, LedgerStorage
from magnetar.bookie.record import (
    BODY_HEADER,
    BODY_HEADER_SIZE,
    HEADER_SIZE,
    KIND_ADD,
    PREFIX,
    encode_add,
    header_of,
)
from magnetar.common.errors import (
    BookieReadOnly,
    EntryTooLarge,
    InvalidArgument,
    LedgerFenced,
    MagnetarError,
    NoSuchEntry,
    NoSuchLedger,
    ServiceClosed,
)
from magnetar.common.tasks import BackgroundTasks

log = logging.getLogger(__name__)

DiskUsage = Callable[[str], Any]
_READ_WINDOW = 512
_pack_body_header = BODY_HEADER.pack
_pack_prefix = PREFIX.pack  # shutil.disk_usage's shape: .free, .total


class AddEntryLike(Protocol):
    """What an add needs; the gRPC ``AddEntry`` message has exactly these fields."""

    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    payload: bytes


class StoredEntry(NamedTuple):
    entry_id: int
    lac: int
    payload: bytes


class Bookie:
    def __init__(
        self, config: BookieConfig, bookie_id: str, disk_usage: DiskUsage = shutil.disk_usage,
        cookies: RegisteredCookies | None = None, ledger_metadata: LedgerMetadataView | None = None,
    ) -> None:
        """Args:
        cookies: where the bookie's cookie is registered (ZooKeeper), checked at start;
            None: the directories' cookies alone are checked.
        ledger_metadata: the ledger metadata, compared with the ledgers held here every
            ``gc_metadata_interval_s`` to collect orphans; None: not compared.
        """
        self.config = config
        self._cookies = cookies
        self.orphans = (
            None if ledger_metadata is None else ScanAndCompareGarbageCollector(
                bookie_id, ledger_metadata, lambda: list(self.storage.ledgers), self.delete_ledger,
                self.evict_ledger, config.gc_overreplicated_ledger_wait_s,
            )
        )
        self.bookie_id = bookie_id
        self.data_dir = Path(config.data_dir)
        journal_dir = Path(config.journal_dir) if config.journal_dir else self.data_dir / "journal"
        self.journal = Journal(journal_dir, config.journal_max_file_bytes, config.journal_max_group_bytes)
        self.storage = LedgerStorage(self.data_dir, config.entry_log_max_bytes, config.index_map_bytes)
        self._disk_usage = disk_usage
        self.read_only = False
        self.on_read_only_change: Callable[[bool], Any] | None = None
        self._max_entry = config.max_entry_bytes
        self._flush_lock = asyncio.Lock()
        self._flush_wanted = asyncio.Event()
        self._flushed = asyncio.Event()
        self._tasks = BackgroundTasks(f"bookie {bookie_id}")
        self._closed = False
        self.flushes = 0

    # -- lifecycle ---------------------------------------------------------
    async def start(self) -> None:
        """Open storage, replay the journal from the LastLogMark, start background tasks."""
        cookie, formatted = await asyncio.to_thread(format_dirs, self.config, self.bookie_id)
        if formatted:
            log.info("bookie %s: directories formatted (cookies written)", self.bookie_id)
        if self._cookies is not None:
            try:
                if await verify_registered(self._cookies, cookie, formatted):
                    log.info("bookie %s: cookie (instance %s) registered in ZooKeeper", self.bookie_id, cookie.instance_id)
            except BaseException:
                await asyncio.to_thread(self.storage.close)  # opened by LedgerStorage(); nothing read
                raise
        await asyncio.to_thread(self.storage.open)
        replayed = await asyncio.to_thread(self._replay)
        self.journal.start(asyncio.get_running_loop())
        self._check_disk()
        log.info(
            "bookie %s started: %d ledgers, %d journal records replayed from %s",
            self.bookie_id, len(self.storage.ledgers), replayed, tuple(self.storage.lastmark.position),
        )
        self._tasks.spawn(self._flush_loop(), name="bookie-flush")
        self._tasks.spawn(self._periodic(self.config.gc_interval_s, self.collect_garbage), name="bookie-gc")
        self._tasks.spawn(self._periodic(self.config.disk_check_interval_s, self._check_disk_async), name="bookie-disk-check")
        if self.orphans is not None and self.config.gc_metadata_interval_s > 0:
            self._tasks.spawn(self._periodic(self.config.gc_metadata_interval_s, self.collect_orphans), name="bookie-gc-orphans")

    def _replay(self) -> int:
        st = self.storage
        n = 0
        for _pos, rec in replay(self.journal.directory, st.lastmark.position):
            if rec.ledger_id in st.deleted:
                continue
            st.cache.put((rec.ledger_id, rec.entry_id), encode_add(rec.ledger_id, rec.entry_id, rec.lac, rec.payload))
            state = st.ledgers.get(rec.ledger_id)
            if state is None:
                state = st.ledgers[rec.ledger_id] = LedgerState()
            if rec.lac > state.lac:
                state.lac = rec.lac
            if rec.entry_id > state.last_entry:
                state.last_entry = rec.entry_id
            n += 1
        return n

    async def close(self) -> None:
        """Stop background tasks, flush what is cached, close the journal and storage."""
        if self._closed:
            return
        self._closed = True
        await self._tasks.close()
        await self.journal.close()
        try:
            await self.flush()
        finally:
            await asyncio.to_thread(self.storage.close)

    # -- writes ------------------------------------------------------------
    def add_entries(
        self, entries: Iterable[AddEntryLike], recovery: bool = False
    ) -> tuple[asyncio.Future[None] | None, list[tuple[int, int, MagnetarError]]]:
        """Accept a batch of adds (``recovery``: also on a fenced ledger). Returns a future that completes once every accepted
        entry is fsynced in the journal (None if none was accepted) and the rejected
        entries as (ledger id, entry id, error). Must run on the event loop.

        Raises:
            BookieReadOnly: the bookie takes no writes now.
        """
        if self.read_only:
            raise BookieReadOnly(f"bookie {self.bookie_id} is read-only (free disk below the threshold)")
        if self._closed:
            raise ServiceClosed("bookie is shutting down")
        st = self.storage
        ledgers, deleted, cache = st.ledgers, st.deleted, st.cache
        active = cache.active
        records: list[bytes] = []
        failed: list[tuple[int, int, MagnetarError]] = []
        max_entry = self._max_entry
        # The hot path: record.encode_add inlined (same bytes; tested against it).
        pack_body, pack_prefix, crc32, join = _pack_body_header, _pack_prefix, zlib.crc32, b"".join
        added_bytes = 0
        for e in entries:
            lid, eid, payload = e.ledger_id, e.entry_id, e.payload
            if lid < 0 or eid < 0:
                failed.append((lid, eid, InvalidArgument(f"negative ledger or entry id: ledger {lid} entry {eid}")))
                continue
            if len(payload) > max_entry:
                failed.append((lid, eid, EntryTooLarge(len(payload), max_entry)))
                continue
            state = ledgers.get(lid)
            if state is None:
                if lid in deleted:
                    failed.append((lid, eid, NoSuchLedger(lid, f"{self.bookie_id} (deleted)")))
                    continue
                state = ledgers[lid] = LedgerState()
            elif state.fenced and not recovery:
                failed.append((lid, eid, LedgerFenced(lid)))
                continue
            lac = e.last_add_confirmed
            body_header = pack_body(KIND_ADD, lid, eid, lac)
            rec = join((pack_prefix(BODY_HEADER_SIZE + len(payload), crc32(payload, crc32(body_header))), body_header, payload))
            active[(lid, eid)] = rec  # a rewritten entry is counted twice: it only flushes sooner
            added_bytes += len(rec)
            if lac > state.lac:
                state.lac = lac
            if eid > state.last_entry:
                state.last_entry = eid
            records.append(rec)
        cache.active_bytes += added_bytes
        if cache.active_bytes >= self.config.write_cache_max_bytes:
            self._flush_wanted.set()
        return (self.journal.append(records) if records else None), failed

    async def wait_for_cache_room(self) -> None:
        """Back-pressure: wait while the write cache holds twice its limit."""
        while self.storage.cache.active_bytes >= 2 * self.config.write_cache_max_bytes and not self._closed:
            self._flush_wanted.set()
            self._flushed.clear()
            await self._flushed.wait()

    async def fence(self, ledger_id: int) -> int:
        """Durably fence a ledger (created if unknown); returns its LAC."""
        self._check_id(ledger_id)
        st = self.storage
        if ledger_id in st.deleted:
            raise NoSuchLedger(ledger_id, f"{self.bookie_id} (deleted)")
        state = st.ledgers.get(ledger_id)
        if state is None:
            state = st.ledgers[ledger_id] = LedgerState()
        if not state.fenced:
            state.fenced = True
            await asyncio.to_thread(st.persist_ledger, ledger_id)
            log.info("ledger %d fenced", ledger_id)
        return state.lac

    async def delete_ledger(self, ledger_id: int) -> None:
        self._check_id(ledger_id)
        st = self.storage
        if ledger_id not in st.ledgers:
            raise NoSuchLedger(ledger_id, self.bookie_id)
        del st.ledgers[ledger_id]
        st.cache.drop_ledger(ledger_id)
        await asyncio.to_thread(st.delete_ledger, ledger_id)
        log.info("ledger %d deleted", ledger_id)

    async def evict_ledger(self, ledger_id: int) -> bool:
        """Drop this bookie's copy of a ledger held elsewhere, without a tombstone (it may
        be copied here again). Returns False, dropping nothing, when the ledger was
        written while the LastLogMark was moved past its journal records.

        Only for a ledger nobody writes here: the garbage collector calls it for a closed
        ledger whose fragments do not name this bookie, under its replication lock.
        """
        self._check_id(ledger_id)
        st = self.storage
        state = st.ledgers.get(ledger_id)
        if state is None:
            return False
        before = (state.last_entry, state.lac, state.fenced)
        # Every record of it was acknowledged, so fsynced, before this flush reads the
        # journal's synced position: the flush moves the mark past all of them, and a
        # replay after a crash cannot bring the ledger back.
        await self.flush()
        state = st.ledgers.get(ledger_id)
        if state is None or (state.last_entry, state.lac, state.fenced) != before or st.cache.next_entry(ledger_id, 0) is not None:
            log.warning("ledger %d was written while being dropped; kept", ledger_id)
            return False
        await asyncio.to_thread(st.evict_ledger, ledger_id)
        log.info("ledger %d dropped (held elsewhere)", ledger_id)
        return True

    # -- reads -------------------------------------------------------------
    def _state(self, ledger_id: int) -> LedgerState:
        self._check_id(ledger_id)
        state = self.storage.ledgers.get(ledger_id)
        if state is None:
            raise NoSuchLedger(ledger_id, self.bookie_id)
        return state

    def read_lac(self, ledger_id: int) -> int:
        return self._state(ledger_id).lac

    def last_entry(self, ledger_id: int) -> int:
        """The highest entry id stored for the ledger (-1: none)."""
        return self._state(ledger_id).last_entry

    async def read_entry(self, ledger_id: int, entry_id: int, fence: bool = False) -> StoredEntry:
        if fence:
            await self.fence(ledger_id)
        self._check_id(entry_id, "entry")
        found = await self.read_entries(ledger_id, entry_id, entry_id)
        if not found:
            raise NoSuchEntry(ledger_id, entry_id, self.bookie_id)
        return found[0]

    async def read_entries(self, ledger_id: int, first: int, last: int, fence: bool = False, max_bytes: int = 0) -> list[StoredEntry]:
        """Stored entries first..last (last -1: up to the last stored), in order,
        stopping once ``max_bytes`` of payload is gathered (0: no limit)."""
        if fence:
            await self.fence(ledger_id)
        state = self._state(ledger_id)
        self._check_id(first, "first entry")
        # Nothing lies past the last stored entry: a huge ``last`` must not walk windows
        # of nothing up to it (a read of 0..INT64_MAX never ended).
        last = state.last_entry if last < 0 else min(last, state.last_entry)
        if last < first:
            return []
        out: list[StoredEntry] = []
        size = 0
        # Windows keep each step's work bounded: a chunked read of a long ledger stops
        # after max_bytes instead of looking up every remaining entry first.
        start: int | None = first
        while start is not None and start <= last:
            wanted = range(start, min(last, start + _READ_WINDOW - 1) + 1)
            records = await self._fetch(ledger_id, wanted)
            size = _collect(wanted, records, out, size, max_bytes)
            if max_bytes and size >= max_bytes:
                break
            start = wanted.stop
            if not records:
                # A gap (a writer may add sparse ids: 0, then 2**62): jump to the next
                # stored id instead of walking windows of nothing up to it.
                start = await self._next_stored(ledger_id, start)
        return out

    async def _next_stored(self, ledger_id: int, entry_id: int) -> int | None:
        """The first entry id at or after ``entry_id`` in the write cache or the index."""
        cached = self.storage.cache.next_entry(ledger_id, entry_id)
        indexed = await asyncio.to_thread(self.storage.index.next_entry, ledger_id, entry_id)
        return min((e for e in (cached, indexed) if e is not None), default=None)

    async def _fetch(self, ledger_id: int, entry_ids: Iterable[int]) -> dict[int, bytes]:
        """Records by entry id, from the write cache, else (in a thread) the entry logs."""
        cache = self.storage.cache
        records: dict[int, bytes] = {}
        missing: list[int] = []
        for eid in entry_ids:
            rec = cache.get((ledger_id, eid))
            if rec is None:
                missing.append(eid)
            else:
                records[eid] = rec
        if missing:
            records.update(await asyncio.to_thread(self.storage.read_stored, ledger_id, missing))
        return records

    async def read_entry_list(self, ledger_id: int, entry_ids: list[int], max_bytes: int = 0) -> list[StoredEntry]:
        """The stored entries among ``entry_ids``, in that order (missing ones skipped)."""
        self._state(ledger_id)
        for eid in entry_ids:
            self._check_id(eid, "entry")
        out: list[StoredEntry] = []
        _collect(entry_ids, await self._fetch(ledger_id, entry_ids), out, 0, max_bytes)
        return out

    def list_ledgers(self) -> list[int]:
        return sorted(self.storage.ledgers)

    def info(self) -> dict[str, Any]:
        usage = self._disk_usage(str(self.data_dir))
        return {
            "bookie_id": self.bookie_id,
            "version": __version__,
            "read_only": self.read_only,
            "disk_free_bytes": usage.free,
            "disk_total_bytes": usage.total,
            "ledger_count": len(self.storage.ledgers),
            "journal_records": self.journal.records,
            "journal_fsyncs": self.journal.fsyncs,
            "journal_bytes": self.journal.bytes_written,
        }

    @staticmethod
    def _check_id(value: int, what: str = "ledger") -> None:
        if value < 0:
            raise InvalidArgument(f"{what} id must not be negative, got {value}")

    # -- background work ---------------------------------------------------
    async def flush(self) -> None:
        """Checkpoint: write the cache to the entry log and index, advance the LastLogMark,
        and drop journal files the mark has passed."""
        async with self._flush_lock:
            st = self.storage
            mark = self.journal.synced_position  # read before the swap: see ledgerstorage
            batch = st.cache.swap()
            try:
                moved = await asyncio.to_thread(st.flush, batch, mark)
            except BaseException:
                # Keep the records readable and flushable: put back what is not newer.
                for key, rec in batch.items():
                    st.cache.active.setdefault(key, rec)
                st.cache.active_bytes = sum(len(r) for r in st.cache.active.values())
                raise
            finally:
                st.cache.drop_flushing()
                self._flushed.set()
            self.flushes += 1
            if moved:
                await asyncio.to_thread(self.journal.remove_before, mark)

    async def _flush_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._flush_wanted.wait(), self.config.flush_interval_s)
            except TimeoutError:
                pass
            self._flush_wanted.clear()
            try:
                await self.flush()
            except Exception:
                log.exception("flush failed; will retry")
                await asyncio.sleep(self.config.flush_interval_s)

    async def collect_garbage(self) -> list[int]:
        removed = await asyncio.to_thread(self.storage.collect_garbage)
        if removed:
            log.info("garbage collection removed entry logs %s", [f"{i:08x}" for i in removed])
        return removed

    async def collect_orphans(self) -> CollectResult:
        """Compare the ledgers held here with the ledger metadata and remove orphans
        (``bookie/garbagecollector.py``); their entry logs go at the next :meth:`collect_garbage`."""
        if self.orphans is None:
            return CollectResult([], [])
        result = await self.orphans.collect()
        if result.deleted or result.evicted:
            log.info("orphans collected: ledgers %s deleted, %s dropped", result.deleted, result.evicted)
        return result

    async def _periodic(self, interval: float, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()
            except Exception:
                log.exception("%s failed; will retry", getattr(fn, "__name__", fn))

    def _check_disk(self) -> None:
        free = self._disk_usage(str(self.data_dir)).free
        read_only = free < self.config.min_free_disk_bytes
        if read_only != self.read_only:
            self.read_only = read_only
            log.warning(
                "bookie is now %s: %d bytes free, threshold %d",
                "READ-ONLY" if read_only else "writable", free, self.config.min_free_disk_bytes,
            )
            if self.on_read_only_change is not None:
                self.on_read_only_change(read_only)

    async def _check_disk_async(self) -> None:
        self._check_disk()


def _collect(entry_ids: Iterable[int], records: dict[int, bytes], out: list[StoredEntry], size: int, max_bytes: int) -> int:
    """Append the found records in ``entry_ids`` order until ``max_bytes`` (0: no limit)
    of payload is gathered; returns the payload size gathered so far."""
    for eid in entry_ids:
        rec = records.get(eid)
        if rec is None:
            continue
        out.append(StoredEntry(eid, header_of(rec)[2], rec[HEADER_SIZE:]))
        size += len(rec) - HEADER_SIZE
        if max_bytes and size >= max_bytes:
            break
    return size
