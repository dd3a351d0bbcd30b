"""The journal: every add is appended here and fsynced before it is acknowledged.

One writer thread does group commit: it takes every batch that arrived while the
previous fsync ran, writes them with one ``writev`` and covers them with one
``fdatasync``; then it completes all their futures with a single hop into the event
loop. Files are named ``<file id as 16 hex digits>.jnl`` and roll by size; a new
file is started on every open, so a torn tail is never appended to.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from magnetar.bookie.lastmark import JournalPosition, fsync_dir
from magnetar.bookie.record import CorruptRecord, Record, decode
from magnetar.common.errors import MagnetarError, ServiceClosed

log = logging.getLogger(__name__)

_SUFFIX = ".jnl"
_IOV_MAX = 1024
_SCAN_CHUNK = 8 * 1024 * 1024


class JournalError(MagnetarError):
    code = "JOURNAL_ERROR"
    grpc_status = "INTERNAL"


def journal_files(directory: Path) -> list[tuple[int, Path]]:
    """(file id, path) of every journal file, oldest first."""
    out = []
    for p in directory.glob(f"*{_SUFFIX}"):
        try:
            out.append((int(p.stem, 16), p))
        except ValueError:
            continue
    return sorted(out)


def _file_name(directory: Path, file_id: int) -> Path:
    return directory / f"{file_id:016x}{_SUFFIX}"


def replay(directory: Path, start: JournalPosition) -> Iterator[tuple[JournalPosition, Record]]:
    """Yield every intact record at or after ``start``, oldest first.

    A record that is cut short or fails its CRC ends its file: the file is truncated
    there (the tail after it cannot be trusted), and replay continues with the next file.
    """
    for file_id, path in journal_files(directory):
        if file_id < start.file_id:
            continue
        offset = start.offset if file_id == start.file_id else 0
        data = path.read_bytes()
        while offset < len(data):
            try:
                record, end = decode(data, offset)
            except CorruptRecord as exc:
                log.warning(
                    "journal %s: %s; truncating %d bytes of torn or corrupt tail",
                    path.name, exc, len(data) - offset,
                )
                with open(path, "r+b") as fh:
                    fh.truncate(offset)
                    os.fsync(fh.fileno())
                break
            yield JournalPosition(file_id, end), record
            offset = end


class Journal:
    """Appends encoded records and completes futures once they are on disk."""

    def __init__(self, directory: Path, max_file_bytes: int, max_group_bytes: int) -> None:
        self.directory = directory
        self.max_file_bytes = max_file_bytes
        self.max_group_bytes = max_group_bytes
        self._queue: deque[tuple[list[bytes], int, asyncio.Future[None]]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._file_id = 0
        self._offset = 0
        # Everything before this position is fsynced; read from the loop thread.
        self.synced_position = JournalPosition(0, 0)
        self.records = 0
        self.fsyncs = 0
        self.bytes_written = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Open a new journal file after the existing ones and start the writer thread."""
        self.directory.mkdir(parents=True, exist_ok=True)
        files = journal_files(self.directory)
        self._loop = loop
        self._open_file((files[-1][0] + 1) if files else 1)
        self.synced_position = JournalPosition(self._file_id, 0)
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._thread.start()

    def _open_file(self, file_id: int) -> None:
        path = _file_name(self.directory, file_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(self.directory)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._file_id, self._offset = fd, file_id, 0

    def append(self, records: list[bytes]) -> asyncio.Future[None]:
        """Queue encoded records; the future completes after their fsync.

        Must be called on the event loop thread.
        """
        assert self._loop is not None, "journal not started"
        fut = self._loop.create_future()
        if self._closed or self._error is not None:
            fut.set_exception(self._failure())
            return fut
        size = 0
        for r in records:
            size += len(r)
        with self._cond:
            self._queue.append((records, size, fut))
            self._cond.notify()
        return fut

    def _failure(self) -> MagnetarError:
        if self._error is not None:
            return JournalError(f"journal write failed: {self._error}")
        return ServiceClosed("journal is closed")

    def _run(self) -> None:
        assert self._loop is not None
        loop = self._loop
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue and self._closed:
                    return
                group = [self._queue.popleft()]
                size = group[0][1]
                while self._queue and size < self.max_group_bytes:
                    item = self._queue.popleft()
                    group.append(item)
                    size += item[1]
            try:
                self._write_group(group, size)
            except BaseException as exc:  # noqa: BLE001 - fail waiters, never hang them
                log.exception("journal write failed; the bookie can no longer accept adds")
                self._error = exc
                loop.call_soon_threadsafe(_fail_all, [g[2] for g in group], self._failure())
                with self._cond:
                    rest = [g[2] for g in self._queue]
                    self._queue.clear()
                loop.call_soon_threadsafe(_fail_all, rest, self._failure())
                return

    def _write_group(self, group: list[tuple[list[bytes], int, asyncio.Future[None]]], size: int) -> None:
        bufs: list[bytes] = []
        for records, _, _ in group:
            bufs.extend(records)
        for i in range(0, len(bufs), _IOV_MAX):
            chunk = bufs[i : i + _IOV_MAX]
            want = size if len(bufs) <= _IOV_MAX else sum(len(b) for b in chunk)
            written = os.writev(self._fd, chunk)
            if written != want:  # short write: finish it byte-wise
                rest = b"".join(chunk)[written:]
                while rest:
                    n = os.write(self._fd, rest)
                    rest = rest[n:]
        os.fdatasync(self._fd)
        self._offset += size
        self.records += len(bufs)
        self.fsyncs += 1
        self.bytes_written += size
        position = JournalPosition(self._file_id, self._offset)
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._complete, [g[2] for g in group], position)
        if self._offset >= self.max_file_bytes:
            self._open_file(self._file_id + 1)

    def _complete(self, futures: list[asyncio.Future[None]], position: JournalPosition) -> None:
        self.synced_position = position
        for fut in futures:
            if not fut.done():
                fut.set_result(None)

    def remove_before(self, position: JournalPosition) -> int:
        """Delete journal files wholly before ``position`` (the LastLogMark). Blocking."""
        removed = 0
        for file_id, path in journal_files(self.directory):
            if file_id < position.file_id and file_id != self._file_id:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    async def close(self) -> None:
        """Write what is queued, stop the writer thread and close the file."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _fail_all(futures: list[asyncio.Future[None]], exc: BaseException) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_exception(exc)
