"""CRC32C (Castagnoli), the checksum of a payload command's metadata and payload."""

from __future__ import annotations

import crc32c as _crc32c


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC32C of ``data``, continuing from ``value`` (the CRC of the bytes before it)."""
    return _crc32c.crc32c(data, value)
