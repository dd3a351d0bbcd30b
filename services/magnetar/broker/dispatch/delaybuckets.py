"""Delayed entries spilled to local disk, one file per time bucket.

A bucket holds every spilled entry due in ``[k * bucket_ms, (k + 1) * bucket_ms)``. Its
records are appended to a small in-memory buffer first and written out (appended to the
bucket's file) when the buffer grows past ``flush_bytes``, or when all buffers together
pass ``max_buffered_bytes``: few, small, buffered writes. A bucket is read back whole
(:meth:`DelayBuckets.take`, in a thread) when its time comes near, and its file deleted.

Record format (little endian), a pure function pair below::

    due_ms: int64, ledger_id: int64, entry_id: int64, length: uint32, data[length]

``length`` 0: the entry's data was not kept (too large); the dispatcher reads it again
from the managed ledger when it is due.

Where the files go (:class:`SpillArea`): each broker process makes one directory
``<root>/magnetar-delayed-<random>/`` with a lock file it holds (``flock``) as long as it
lives, and each index a directory inside it. The kernel releases the lock when the
process dies, kill -9 included, so a broker that starts (:func:`collect_orphaned_spill_areas`)
deletes the areas whose lock it can take: those of crashed processes, never a live
broker's sharing the same root (several brokers on one machine share the temp directory).
"""

from __future__ import annotations

import fcntl
import heapq
import logging
import os
import shutil
import struct
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from magnetar.managedledger.position import Position

_HEADER = struct.Struct("<qqqI")
AREA_PREFIX = "magnetar-delayed-"
LOCK_FILE = "owner.lock"
_NEW_AREA_PREFIX = ".magnetar-delayed-new-"

log = logging.getLogger(__name__)

Record = tuple[int, Position, bytes | None]
"""(due_ms, position, data or None)."""


def encode(due_ms: int, position: Position, data: bytes | None) -> bytes:
    """One record."""
    payload = data or b""
    return _HEADER.pack(due_ms, position[0], position[1], len(payload)) + payload


def decode(buf: bytes | bytearray | memoryview) -> Iterator[Record]:
    """Every whole record of ``buf``, in order; a torn record at the end is ignored
    (cannot happen with files this process wrote and read back, but costs nothing)."""
    view = memoryview(buf)
    size, end, offset = _HEADER.size, len(view), 0
    unpack = _HEADER.unpack_from
    while offset + size <= end:
        due, ledger_id, entry_id, length = unpack(view, offset)
        offset += size
        if offset + length > end:
            return
        data = bytes(view[offset : offset + length]) if length else None
        offset += length
        yield due, Position(ledger_id, entry_id), data


@dataclass
class _Bucket:
    bucket_id: int
    min_due_ms: int
    count: int = 0
    buffer: bytearray = field(default_factory=bytearray)
    path: Path | None = None  # set once something was written out


class DelayBuckets:
    """Spilled entries by time bucket, in files under a directory of their own (created
    on the first write, removed by :meth:`clear`)."""

    def __init__(self, bucket_ms: int, root: str | None = None, flush_bytes: int = 64 * 1024,
                 max_buffered_bytes: int = 4 * 1024 * 1024) -> None:  # fmt: skip
        """Args:
        bucket_ms: the width of a bucket.
        root: where to make the directory (None: the system's temp directory).
        flush_bytes: a bucket's buffer is written out at this size.
        max_buffered_bytes: every buffer is written out when all together hold this much.
        """
        self.bucket_ms = max(1, int(bucket_ms))
        self._root = root
        self._flush_bytes = flush_bytes
        self._max_buffered = max_buffered_bytes
        self._buckets: dict[int, _Bucket] = {}
        self._order: list[int] = []  # heap of the buckets' ids
        self._buffered = 0
        self._dir: Path | None = None
        self.count = 0
        """Records held (in buffers and files)."""

    def __len__(self) -> int:
        return len(self._buckets)

    @property
    def directory(self) -> Path | None:
        """The bucket files' directory (None until something was written out)."""
        return self._dir

    def bucket_of(self, due_ms: int) -> int:
        return due_ms // self.bucket_ms

    def first_bucket(self) -> int | None:
        """The earliest bucket held (None when empty)."""
        return self._order[0] if self._order else None

    def min_due_ms(self) -> int | None:
        """The earliest due time held (None when empty)."""
        first = self.first_bucket()
        return None if first is None else self._buckets[first].min_due_ms

    def add(self, due_ms: int, position: Position, data: bytes | None) -> None:
        k = due_ms // self.bucket_ms
        bucket = self._buckets.get(k)
        if bucket is None:
            bucket = self._buckets[k] = _Bucket(k, due_ms)
            heapq.heappush(self._order, k)
        elif due_ms < bucket.min_due_ms:
            bucket.min_due_ms = due_ms
        record = encode(due_ms, position, data)
        bucket.buffer += record
        bucket.count += 1
        self.count += 1
        self._buffered += len(record)
        if len(bucket.buffer) >= self._flush_bytes:
            self._write_out(bucket)
        if self._buffered >= self._max_buffered:
            for b in self._buckets.values():
                self._write_out(b)

    def _write_out(self, bucket: _Bucket) -> None:
        """Append the bucket's buffer to its file (a small buffered write; the page cache
        takes it, no fsync: this is a cache, see :mod:`.delayed`)."""
        if not bucket.buffer:
            return
        if bucket.path is None:
            if self._dir is None:
                self._dir = SpillArea.of(self._root).new_index_dir()
            bucket.path = self._dir / f"{bucket.bucket_id}.bin"
        with open(bucket.path, "ab") as f:
            f.write(bucket.buffer)
        self._buffered -= len(bucket.buffer)
        bucket.buffer = bytearray()

    def detach_before(self, bucket_id: int) -> list[tuple[Path | None, bytes]]:
        """Remove every bucket before ``bucket_id``; return what to read back: each one's
        file (or None) and its unwritten buffer. Read them with :func:`read_detached`."""
        out = []
        while self._order and self._order[0] < bucket_id:
            bucket = self._buckets.pop(heapq.heappop(self._order))
            self.count -= bucket.count
            self._buffered -= len(bucket.buffer)
            out.append((bucket.path, bytes(bucket.buffer)))
        return out

    def clear(self) -> None:
        """Forget every bucket and delete the directory (a few unlinks; clearing is rare:
        a cursor reset or the dispatcher closing)."""
        self._buckets.clear()
        self._order.clear()
        self._buffered = 0
        self.count = 0
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


class SpillArea:
    """One process's spill directory under a root: created on the first spill, its lock
    held until the process exits (or :meth:`close`)."""

    _by_root: dict[Path, SpillArea] = {}
    _guard = threading.Lock()

    def __init__(self, root: Path) -> None:
        self.root = root
        self.directory: Path | None = None
        self._lock_fd = -1

    @classmethod
    def of(cls, root: str | None) -> SpillArea:
        """This process's area under ``root`` (None: the system's temp directory)."""
        path = Path(root or tempfile.gettempdir()).resolve()
        with cls._guard:
            area = cls._by_root.get(path)
            if area is None:
                area = cls._by_root[path] = cls(path)
            return area

    def new_index_dir(self) -> Path:
        """A fresh directory for one index's bucket files."""
        with self._guard:
            if self.directory is None or not self.directory.is_dir():
                self._create()
            assert self.directory is not None
            return Path(tempfile.mkdtemp(prefix="index-", dir=self.directory))

    def _create(self) -> None:
        # Locked before it gets its name, so a sweeping broker never sees it unlocked.
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_NEW_AREA_PREFIX, dir=self.root))
        fd = os.open(staging / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        final = self.root / (AREA_PREFIX + staging.name[len(_NEW_AREA_PREFIX):])
        staging.rename(final)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
        self._lock_fd, self.directory = fd, final

    def close(self) -> None:
        """Delete the area and release its lock (tests; a process just exits)."""
        with self._guard:
            directory, self.directory = self.directory, None
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1


def collect_orphaned_spill_areas(root: str | None) -> list[Path]:
    """Delete the spill areas under ``root`` (None: the temp directory) whose owner
    process is gone (their lock is free); returns them. Live areas, this process's and
    other brokers', are left alone. Blocking: run it in a thread."""
    base = Path(root or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        candidates = sorted(p for p in base.iterdir() if p.name.startswith(AREA_PREFIX))
    except FileNotFoundError:
        return removed
    for area in candidates:
        try:
            fd = os.open(area / LOCK_FILE, os.O_RDWR)
        except (FileNotFoundError, NotADirectoryError):
            continue  # not an area of this layout: left alone
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # its process lives
        try:
            shutil.rmtree(area, ignore_errors=True)
            removed.append(area)
        finally:
            os.close(fd)
    if removed:
        log.info("deleted %d delayed-delivery spill directories of crashed brokers under %s", len(removed), base)
    return removed


def read_detached(parts: list[tuple[Path | None, bytes]]) -> list[Record]:
    """The records of detached buckets (file first, then the buffer written after it);
    deletes the files. Blocking: run it in a thread."""
    out: list[Record] = []
    for path, tail in parts:
        if path is not None:
            try:
                out.extend(decode(path.read_bytes()))
                os.unlink(path)
            except FileNotFoundError:  # cleared meanwhile
                pass
        out.extend(decode(tail))
    return out
