"""A namespace's topic list as GET_TOPICS_OF_NAMESPACE_RESPONSE carries it (Pulsar's
``TopicList``): the broker-side pattern filter and the list's hash."""

from __future__ import annotations

import re

from magnetar.protocol.checksum import crc32c

_SCHEME = "://"
_PARTITION = "-partition-"


def _without_scheme(name: str) -> str:
    return name.split(_SCHEME, 1)[1] if _SCHEME in name else name


def _base_name(topic: str) -> str:
    """The partitioned topic's name of a partition (``t-partition-3`` → ``t``), else the name."""
    base, sep, index = topic.rpartition(_PARTITION)
    return base if sep and index.isdigit() else topic


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A topics pattern (``persistent://tenant/ns/prefix-.*``) as a regular expression over
    names without their scheme, as Pulsar's brokers and clients match it.

    Raises:
        re.error: not a regular expression.
    """
    return re.compile(_without_scheme(pattern))


def filter_topics(topics: list[str], pattern: re.Pattern[str]) -> list[str]:
    """The topics whose name (a partition's: its partitioned topic's), without the scheme,
    matches ``pattern`` whole."""
    return [t for t in topics if pattern.fullmatch(_without_scheme(_base_name(t)))]


def topics_hash(topics: list[str]) -> str:
    """Pulsar's ``TopicList.calculateHash``: CRC32C of the sorted names joined by ``,``, as
    Guava prints a 32-bit hash (its 4 bytes little-endian, in hex). A client that sends the
    hash of the list it has gets ``changed = false`` and no names when nothing changed."""
    value = crc32c(",".join(sorted(topics)).encode())
    return value.to_bytes(4, "little").hex()
