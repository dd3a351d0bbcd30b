"""Delayed and scheduled delivery: which entries wait, and until when.

A delayed message is stored like any other (its ``SingleMessage.deliver_at_ms`` set, and
never batched: the producer sends it alone). The dispatcher of a Shared or Key_Shared
subscription, reading new entries, puts an entry that is not due yet in this index
instead of delivering it, and hands it back once due. Exclusive and Failover deliver
delayed messages at once (as Pulsar does).

The index is rebuilt from the topic itself: a dispatcher that starts (a broker restart,
a failover, the first consumer) reads again from the first unacknowledged entry, so
every waiting message is found again and nothing is delivered early or lost.

Bounded memory: only the near future is held in memory. Time is cut into buckets of
``bucket_ms``; a heap holds the entries due before the end of the bucket after the
current one (the *horizon*), with their data when small (``inline_max_bytes``), so a
due entry goes out without a read from the bookies. Later entries are spilled to
per-bucket files on local disk (:mod:`.delaybuckets`: small buffered appends), and a
bucket is read back into the heap (in a thread, :meth:`DelayedIndex.refill`) one bucket
ahead of its time. Which positions wait is a bitmap per ledger (one bit per entry), so
duplicates are refused and ``in`` answers without a set of every position.

The spill files are a cache, not a log: nothing is fsync'd and nothing is read after a
restart. A broker that restarts (or takes the topic over) rebuilds the index from the
topic, as above; the files of a dispatcher are deleted when it clears (a cursor reset)
or closes. Files left behind by a killed broker are deleted by the next broker that
starts on the same spill root (:func:`.delaybuckets.collect_orphaned_spill_areas`).

Clamping: a delivery time more than 10 days (864,000 s) after the message was published
is moved to publish time + 10 days; a time in the past means at once.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable
from pathlib import Path

from magnetar.broker.dispatch.delaybuckets import DelayBuckets, Record, read_detached
from magnetar.managedledger.position import Position

MAX_DELAY_MS = 864_000 * 1000
DEFAULT_BUCKET_MS = 5_000
DEFAULT_INLINE_MAX_BYTES = 1024


def effective_deliver_at(deliver_at_ms: int, publish_time_ms: int) -> int:
    """When a message may go out (0: at once): ``deliver_at_ms`` clamped to 10 days after
    publishing."""
    if deliver_at_ms <= 0:
        return 0
    return min(deliver_at_ms, publish_time_ms + MAX_DELAY_MS)


class PositionBits:
    """A set of positions as bitmaps of 64 Ki entries per (ledger, chunk): one bit per
    waiting entry (delayed entries are most of a run of entry ids, or spread over it)."""

    _CHUNK_BITS = 16

    def __init__(self) -> None:
        self._chunks: dict[tuple[int, int], list] = {}  # key -> [bytearray, count]
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __contains__(self, p: object) -> bool:
        if not isinstance(p, tuple) or len(p) != 2:
            return False
        ledger_id, entry_id = p
        chunk = self._chunks.get((ledger_id, entry_id >> self._CHUNK_BITS))
        if chunk is None:
            return False
        i = entry_id & 0xFFFF
        return bool(chunk[0][i >> 3] & (1 << (i & 7)))

    def add(self, p: Position) -> bool:
        """True when ``p`` was not in the set."""
        key = (p[0], p[1] >> self._CHUNK_BITS)
        chunk = self._chunks.get(key)
        if chunk is None:
            chunk = self._chunks[key] = [bytearray(1 << (self._CHUNK_BITS - 3)), 0]
        i = p[1] & 0xFFFF
        bit = 1 << (i & 7)
        if chunk[0][i >> 3] & bit:
            return False
        chunk[0][i >> 3] |= bit
        chunk[1] += 1
        self._len += 1
        return True

    def discard(self, p: Position) -> None:
        key = (p[0], p[1] >> self._CHUNK_BITS)
        chunk = self._chunks.get(key)
        if chunk is None:
            return
        i = p[1] & 0xFFFF
        bit = 1 << (i & 7)
        if chunk[0][i >> 3] & bit:
            chunk[0][i >> 3] &= ~bit & 0xFF
            self._len -= 1
            chunk[1] -= 1
            if chunk[1] == 0:
                del self._chunks[key]

    def clear(self) -> None:
        self._chunks.clear()
        self._len = 0


class DelayedIndex:
    """Entries waiting for their time, earliest first (see the module docstring).

    The owner calls :meth:`refill` before :meth:`pop_due` / :meth:`pop_due_entries`
    (it brings spilled buckets whose time is near back into memory), wakes up at
    :meth:`next_wakeup_ms`, and calls :meth:`close` at the end (deletes the files).
    """

    def __init__(
        self,
        clock_ms: Callable[[], float] = lambda: time.time() * 1000,
        bucket_ms: int = DEFAULT_BUCKET_MS,
        spill_dir: str | None = None,
        inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
        spill_flush_bytes: int = 64 * 1024,
    ) -> None:
        """Args:
        clock_ms: wall-clock milliseconds (injectable; may be replaced later).
        bucket_ms: the width of a time bucket.
        spill_dir: where spill files go (None: the system's temp directory).
        inline_max_bytes: an entry's data is kept (in memory and spill files) up to
            this size; larger ones are read again from the ledger when due.
        spill_flush_bytes: a bucket's write buffer is appended to its file at this size.
        """
        self.clock_ms = clock_ms
        self.inline_max_bytes = inline_max_bytes
        self._heap: list[tuple[int, Position, bytes | None]] = []
        self._waiting = PositionBits()
        self._spilled = DelayBuckets(bucket_ms, spill_dir, flush_bytes=spill_flush_bytes)
        self._horizon: int | None = None  # entries due before it go to the heap
        self._generation = 0  # bumped by clear(): a refill in flight is dropped

    @property
    def bucket_ms(self) -> int:
        return self._spilled.bucket_ms

    @property
    def spilled(self) -> int:
        """Entries held on disk (or in write buffers) now."""
        return self._spilled.count

    @property
    def spill_directory(self) -> object:
        """The spill files' directory (None while nothing was written out)."""
        return self._spilled.directory

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, position: object) -> bool:
        return position in self._waiting

    def _horizon_for(self, now_ms: float) -> int:
        """The end of the bucket after the one ``now_ms`` is in."""
        b = self._spilled.bucket_ms
        return (int(now_ms) // b + 2) * b

    def add(self, position: Position, due_ms: int, data: bytes | None = None) -> None:
        """Hold ``position`` until ``due_ms`` (a position already held is ignored);
        ``data``: the entry, kept when small."""
        if not self._waiting.add(position):
            return
        if data is not None and len(data) > self.inline_max_bytes:
            data = None
        if self._horizon is None:
            self._horizon = self._horizon_for(self.clock_ms())
        if due_ms < self._horizon:
            heapq.heappush(self._heap, (due_ms, position, data))
        else:
            self._spilled.add(due_ms, position, data)

    def next_due_ms(self) -> int | None:
        """The earliest due time held (None when empty)."""
        spilled = self._spilled.min_due_ms()
        if not self._heap:
            return spilled
        return self._heap[0][0] if spilled is None else min(self._heap[0][0], spilled)

    def next_wakeup_ms(self) -> int | None:
        """When the owner should next call :meth:`refill` and :meth:`pop_due_entries`:
        the earliest due time in memory, or when the first spilled bucket must be read."""
        first = self._spilled.first_bucket()
        load_at = None if first is None else (first - 1) * self._spilled.bucket_ms
        if not self._heap:
            return load_at
        return self._heap[0][0] if load_at is None else min(self._heap[0][0], load_at)

    async def refill(self) -> None:
        """Bring the spilled buckets that start before the new horizon into memory (the
        files are read in a thread); nothing to do returns at once."""
        parts = self._detach_near()
        if not parts:
            return
        generation = self._generation
        if any(path is not None for path, _ in parts):
            records = await asyncio.to_thread(read_detached, parts)
        else:
            records = read_detached(parts)
        if generation == self._generation:  # else cleared meanwhile
            self._push_all(records)

    def _detach_near(self) -> list[tuple[Path | None, bytes]]:
        """Move the horizon on with the clock; detach the buckets it passed."""
        first = self._spilled.first_bucket()
        if first is None:
            return []
        b = self._spilled.bucket_ms
        self._horizon = max(self._horizon or 0, self._horizon_for(self.clock_ms()))
        if first * b >= self._horizon:
            return []
        return self._spilled.detach_before(self._horizon // b)

    def _push_all(self, records: list[Record]) -> None:
        if len(records) > len(self._heap):
            self._heap.extend(records)
            heapq.heapify(self._heap)
        else:
            for record in records:
                heapq.heappush(self._heap, record)

    def pop_due_entries(self) -> list[tuple[Position, bytes | None]]:
        """Entries whose time has come (removed from the index), in time order, with
        their data when it was kept."""
        now = self.clock_ms()
        spilled_due = self._spilled.min_due_ms()
        if spilled_due is not None and spilled_due <= now:
            # The owner did not refill in time: read the late buckets now (blocking, but
            # only when behind; never hand out entries out of order or late).
            self._push_all(read_detached(self._detach_near()))
        heap = self._heap
        out = []
        while heap and heap[0][0] <= now:
            _, position, data = heapq.heappop(heap)
            self._waiting.discard(position)
            out.append((position, data))
        if self._horizon is not None and not heap and not self._spilled.count:
            self._horizon = None  # empty: the next add starts from the clock again
        return out

    def pop_due(self) -> list[Position]:
        """Positions whose time has come (removed from the index), in time order."""
        return [p for p, _ in self.pop_due_entries()]

    def clear(self) -> None:
        """Forget everything (and delete the spill files)."""
        self._generation += 1
        self._heap.clear()
        self._waiting.clear()
        self._spilled.clear()
        self._horizon = None

    def close(self) -> None:
        self.clear()
