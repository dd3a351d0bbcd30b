"""Key hashing, as Apache Pulsar's clients and Key_Shared do it: MurmurHash3 x86
32-bit, seed 0, over the UTF-8 key, with the sign bit cleared (``Murmur3_32Hash``);
modulo the partition count it picks a key's partition. Stable across processes and
machines (never ``hash()``).
"""

from __future__ import annotations

from typing import Final

from magnetar.common.errors import InvalidArgument
from magnetar.common.names import int_in

_MASK32: Final = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _fmix32(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data`` as an unsigned int (Austin Appleby's reference)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK32
    n = len(data)
    full = n - n % 4
    for i in range(0, full, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (_rotl32((k * c1) & _MASK32, 15) * c2) & _MASK32
        h = (_rotl32(h ^ k, 13) * 5 + 0xE6546B64) & _MASK32
    if n % 4:
        k = int.from_bytes(data[full:], "little")
        h ^= (_rotl32((k * c1) & _MASK32, 15) * c2) & _MASK32
    return _fmix32(h ^ n)


def key_hash(key: str | bytes) -> int:
    """Pulsar's ``Murmur3_32Hash`` of a message key: murmur3 of UTF-8, sign bit cleared."""
    if isinstance(key, str):
        data = key.encode("utf-8")
    elif isinstance(key, (bytes, bytearray, memoryview)):
        data = bytes(key)
    else:
        raise InvalidArgument(f"a message key must be str or bytes, not {type(key).__name__}")
    return murmur3_32(data) & 0x7FFFFFFF


def partition_for_key(key: str | bytes, partitions: int) -> int:
    """The partition, in ``[0, partitions)``, that messages with ``key`` go to.

    Stable across processes and machines, and the same as Pulsar clients configured with
    ``HashingScheme.Murmur3_32Hash``.

    Raises:
        InvalidArgument: ``partitions`` < 1 or ``key`` is neither str nor bytes.
    """
    if not int_in(partitions, 1):
        raise InvalidArgument(f"number of partitions must be an int >= 1, got {partitions!r}")
    return key_hash(key) % partitions
