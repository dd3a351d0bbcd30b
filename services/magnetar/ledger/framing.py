"""What a ledger entry looks like on a bookie: ``u64 ledger length up to and including
this entry`` + payload. The length lets recovery close a ledger with its exact size
from the last entry alone (BookKeeper keeps it in each entry's header too)."""

from __future__ import annotations

import struct

from magnetar.common.errors import MagnetarError

_LENGTH = struct.Struct("<Q")
HEADER_SIZE = _LENGTH.size


def frame(length: int, payload: bytes) -> bytes:
    return _LENGTH.pack(length) + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    """(ledger length through this entry, payload)."""
    if len(data) < HEADER_SIZE:
        raise MagnetarError(f"ledger entry of {len(data)} bytes has no header: not written by the ledger client")
    return _LENGTH.unpack_from(data)[0], data[HEADER_SIZE:]
