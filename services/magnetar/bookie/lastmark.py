"""The LastLogMark: the journal position up to which every add is in entry log + index.

Stored in one small file, replaced atomically (write temp, fsync, rename, fsync dir) and
never moved backwards. On start the journal is replayed from this position.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

from magnetar.common.errors import PreconditionFailed

_FORMAT = struct.Struct("<4sQQI")
_MAGIC = b"MGLM"


class JournalPosition(NamedTuple):
    """A point in the journal: file id and byte offset in it. Ordered as a tuple."""

    file_id: int
    offset: int


START = JournalPosition(0, 0)


class LastLogMark:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.position = self._read()

    def _read(self) -> JournalPosition:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return START
        if len(data) != _FORMAT.size + 4:
            raise _damaged(self.path, f"size {len(data)}")
        magic, file_id, offset, _ = _FORMAT.unpack_from(data)
        (crc,) = struct.unpack_from("<I", data, _FORMAT.size)
        if magic != _MAGIC or zlib.crc32(data[: _FORMAT.size]) != crc:
            raise _damaged(self.path, "bad checksum")
        return JournalPosition(file_id, offset)

    def advance(self, position: JournalPosition) -> bool:
        """Persist ``position`` if it is past the current mark; returns whether it moved.

        Blocking (fsync): call from a worker thread.
        """
        if position <= self.position:
            return False
        body = _FORMAT.pack(_MAGIC, position.file_id, position.offset, 0)
        data = body + struct.pack("<I", zlib.crc32(body))
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self.position = position
        return True


def _damaged(path: Path, why: str) -> PreconditionFailed:
    return PreconditionFailed(
        f"the LastLogMark file {path} is damaged ({why}): restore it, delete it (the journal "
        "is then replayed from its oldest file), or reformat the bookie"
    )


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
