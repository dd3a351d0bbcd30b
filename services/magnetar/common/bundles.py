"""Namespace bundles: hash ranges of a namespace's topics, as Apache Pulsar splits them.

A topic's bundle is the range holding the CRC-32 (``zlib.crc32``) of its UTF-8 full
name, as Pulsar's ``NamespaceBundleFactory`` does with Guava's ``Hashing.crc32()``, so a
topic falls in the same bundle range as in Pulsar. Ranges split ``[0, 0xffffffff]`` like
Pulsar's ``getBundles(n)``. Stable across processes and machines (never ``hash()``).
"""

from __future__ import annotations

import zlib
from typing import Final

from magnetar.common.errors import InvalidArgument
from magnetar.common.names import DEFAULT_BUNDLES, MAX_BUNDLES, TopicName, int_in

_HASH_SPACE: Final = 1 << 32
_LAST_BOUNDARY: Final = _HASH_SPACE - 1


def _check_bundles(bundles: int) -> int:
    if not int_in(bundles, 1, MAX_BUNDLES):
        raise InvalidArgument(
            f"number of bundles must be an int from 1 to {MAX_BUNDLES}, got {bundles!r}"
        )
    return bundles


def bundle_boundaries(bundles: int = DEFAULT_BUNDLES) -> list[int]:
    """The ``bundles + 1`` boundaries splitting ``[0, 0xffffffff]`` into equal hash ranges.

    Raises:
        InvalidArgument: ``bundles`` is not in [1, MAX_BUNDLES].
    """
    step = _HASH_SPACE // _check_bundles(bundles)
    return [i * step for i in range(bundles)] + [_LAST_BOUNDARY]


def bundle_ranges(bundles: int = DEFAULT_BUNDLES) -> list[str]:
    """Names of a namespace's bundles, e.g. ``["0x00000000_0x40000000", …, "0xc0000000_0xffffffff"]``.

    Each range includes its lower bound and excludes its upper one, except the last,
    which includes 0xffffffff.

    Raises:
        InvalidArgument: ``bundles`` is not in [1, MAX_BUNDLES].
    """
    b = bundle_boundaries(bundles)
    return [f"0x{b[i]:08x}_0x{b[i + 1]:08x}" for i in range(bundles)]


def topic_hash(topic: TopicName | str) -> int:
    """The unsigned 32-bit bundle hash of a topic: CRC-32 of its UTF-8 full name."""
    return zlib.crc32(str(TopicName.parse(topic)).encode("utf-8"))


def bundle_of(topic: TopicName | str, bundles: int = DEFAULT_BUNDLES) -> str:
    """The bundle (one of :func:`bundle_ranges`) whose hash range holds ``topic``.

    Each partition of a partitioned topic is hashed by its own full name, so partitions
    spread over bundles (and brokers).

    Raises:
        InvalidTopicName: ``topic`` is a malformed string.
        InvalidArgument: ``bundles`` is not in [1, MAX_BUNDLES].
    """
    step = _HASH_SPACE // _check_bundles(bundles)
    index = min(topic_hash(topic) // step, bundles - 1)
    upper = _LAST_BOUNDARY if index == bundles - 1 else (index + 1) * step
    return f"0x{index * step:08x}_0x{upper:08x}"


