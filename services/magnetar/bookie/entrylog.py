"""Entry logs: one sequential file for all ledgers, written by the write-cache flush.

Files are ``<log id as 8 hex digits>.log`` under ``<data_dir>/ledgers``. Records use
the journal's format (magnetar.bookie.record), so a flushed cache record is written
as is, and a read verifies its CRC. A new log is started on every open and when the
current one passes its size limit; whole logs are removed by garbage collection.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from magnetar.bookie.lastmark import fsync_dir

_SUFFIX = ".log"
_IOV_MAX = 1024


class EntryLogger:
    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._fd = -1
        self.current_log_id = 0
        self._size = 0
        self._unsynced: list[int] = []  # fds of rolled logs awaiting their last fsync
        self._read_fds: dict[int, int] = {}
        self._lock = threading.Lock()

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        ids = self.log_ids()
        self._start_log((ids[-1] + 1) if ids else 1)

    def log_ids(self) -> list[int]:
        out = []
        for p in self.directory.glob(f"*{_SUFFIX}"):
            try:
                out.append(int(p.stem, 16))
            except ValueError:
                continue
        return sorted(out)

    def _path(self, log_id: int) -> Path:
        return self.directory / f"{log_id:08x}{_SUFFIX}"

    def _start_log(self, log_id: int) -> None:
        if self._fd >= 0:
            self._unsynced.append(self._fd)
        self._fd = os.open(self._path(log_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(self.directory)
        self.current_log_id, self._size = log_id, 0

    def append_many(self, records: list[bytes]) -> list[tuple[int, int]]:
        """Append records in order; returns (log id, offset) of each. Blocking, not durable
        until :meth:`sync`. One caller at a time (the flush)."""
        locations: list[tuple[int, int]] = []
        pending: list[bytes] = []
        pending_size = 0
        for rec in records:
            if self._size + pending_size >= self.max_bytes and self._size + pending_size > 0:
                self._write(pending)
                pending, pending_size = [], 0
                self._start_log(self.current_log_id + 1)
            locations.append((self.current_log_id, self._size + pending_size))
            pending.append(rec)
            pending_size += len(rec)
            if len(pending) >= _IOV_MAX:
                self._write(pending)
                pending, pending_size = [], 0
        if pending:
            self._write(pending)
        return locations

    def _write(self, bufs: list[bytes]) -> None:
        want = sum(len(b) for b in bufs)
        written = os.writev(self._fd, bufs)
        if written != want:
            rest = b"".join(bufs)[written:]
            while rest:
                rest = rest[os.write(self._fd, rest) :]
        self._size += want

    def sync(self) -> None:
        """fsync everything appended so far."""
        for fd in self._unsynced:
            os.fsync(fd)
            os.close(fd)
        self._unsynced.clear()
        os.fdatasync(self._fd)

    def read(self, log_id: int, offset: int, length: int) -> bytes:
        """Read ``length`` bytes at ``offset`` of a log. Thread-safe, blocking."""
        fd = self._read_fds.get(log_id)
        if fd is None:
            with self._lock:
                fd = self._read_fds.get(log_id)
                if fd is None:
                    fd = os.open(self._path(log_id), os.O_RDONLY)
                    self._read_fds[log_id] = fd
        return os.pread(fd, length, offset)

    def delete(self, log_id: int) -> None:
        """Remove a whole log (never the current one)."""
        if log_id == self.current_log_id:
            raise ValueError("the current entry log cannot be deleted")
        with self._lock:
            fd = self._read_fds.pop(log_id, None)
            if fd is not None:
                os.close(fd)
        self._path(log_id).unlink(missing_ok=True)

    def close(self) -> None:
        with self._lock:
            for fd in self._read_fds.values():
                os.close(fd)
            self._read_fds.clear()
        for fd in self._unsynced:
            os.close(fd)
        self._unsynced.clear()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
