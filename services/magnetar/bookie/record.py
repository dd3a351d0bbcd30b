"""The entry record: one format for the journal and the entry logs.

Layout (little endian)::

    u32 body_len   bytes after this 8-byte prefix (25 + payload length)
    u32 crc32      of the body
    u8  kind       1 = ADD
    u64 ledger_id
    i64 entry_id
    i64 lac        the writer's last add confirmed (-1: none)
    ... payload

A record is decoded only when its length is plausible and its CRC matches, so a torn
or corrupted tail is detected and never misread.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

PREFIX = struct.Struct("<II")
BODY_HEADER = struct.Struct("<BQqq")
HEADER = struct.Struct("<IIBQqq")
HEADER_SIZE = HEADER.size  # 33
BODY_HEADER_SIZE = BODY_HEADER.size  # 25
KIND_ADD = 1
MAX_RECORD_BODY = 64 * 1024 * 1024

_crc32 = zlib.crc32
_pack_body_header = BODY_HEADER.pack
_pack_prefix = PREFIX.pack


class CorruptRecord(Exception):
    """The bytes at this position are not a whole, intact record."""


class Record(NamedTuple):
    ledger_id: int
    entry_id: int
    lac: int
    payload: bytes


def encode_add(ledger_id: int, entry_id: int, lac: int, payload: bytes) -> bytes:
    """Encode one ADD record (header and payload in one bytes object)."""
    body_header = _pack_body_header(KIND_ADD, ledger_id, entry_id, lac)
    crc = _crc32(payload, _crc32(body_header))
    return b"".join((_pack_prefix(BODY_HEADER_SIZE + len(payload), crc), body_header, payload))


def decode(buf: bytes | memoryview, offset: int = 0) -> tuple[Record, int]:
    """Decode the record at ``offset``; returns it and the offset just past it.

    Raises:
        CorruptRecord: short, implausible length, unknown kind or CRC mismatch.
    """
    end_prefix = offset + PREFIX.size
    if len(buf) < end_prefix:
        raise CorruptRecord(f"short record prefix at {offset}")
    body_len, crc = PREFIX.unpack_from(buf, offset)
    if body_len < BODY_HEADER_SIZE or body_len > MAX_RECORD_BODY:
        raise CorruptRecord(f"implausible record length {body_len} at {offset}")
    end = end_prefix + body_len
    if len(buf) < end:
        raise CorruptRecord(f"record at {offset} is cut short")
    body = memoryview(buf)[end_prefix:end]
    if _crc32(body) != crc:
        raise CorruptRecord(f"CRC mismatch at {offset}")
    kind, ledger_id, entry_id, lac = BODY_HEADER.unpack_from(body)
    if kind != KIND_ADD:
        raise CorruptRecord(f"unknown record kind {kind} at {offset}")
    return Record(ledger_id, entry_id, lac, bytes(body[BODY_HEADER_SIZE:])), end


def header_of(record: bytes) -> tuple[int, int, int]:
    """(ledger_id, entry_id, lac) of an encoded record known to be intact."""
    _, _, _, ledger_id, entry_id, lac = HEADER.unpack_from(record)
    return ledger_id, entry_id, lac
