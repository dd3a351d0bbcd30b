"""Messages inside an entry as integer masks: bit i is message i of the batch.

On the wire (``Delivery.ack_set``, ``BatchIndexAck.ack_set``) a mask is little-endian
bytes: bit i is byte ``i // 8``, bit ``i % 8``.
"""

from __future__ import annotations


def full_mask(n: int) -> int:
    """Every message of an entry holding ``n``."""
    return (1 << n) - 1


def count(mask: int) -> int:
    """Messages in ``mask``."""
    return mask.bit_count()


def to_bytes(mask: int, n: int) -> bytes:
    """The wire form for an entry of ``n`` messages (empty for mask 0)."""
    return mask.to_bytes((n + 7) // 8, "little") if mask else b""


def from_bytes(data: bytes) -> int:
    """The wire form as a mask (empty: 0)."""
    return int.from_bytes(data, "little")


def indexes(mask: int) -> list[int]:
    """The message indexes in ``mask``, ascending."""
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out
