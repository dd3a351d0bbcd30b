"""Namespace bundles: hash ranges of a namespace's topics, as Apache Pulsar splits them.

A topic's bundle is the range holding the CRC-32 (``zlib.crc32``) of its UTF-8 full
name, as Pulsar's ``NamespaceBundleFactory`` does with Guava's ``Hashing.crc32()``, so a
topic falls in the same bundle range as in Pulsar. A namespace's bundles are a sorted
list of boundaries from 0x00000000 to 0xffffffff (Pulsar's ``BundlesData``): created as
equal ranges like Pulsar's ``getBundles(n)``, and split later (:meth:`NamespaceBundles.split`
with the algorithms of :func:`split_positions`). Stable across processes and machines
(never ``hash()``).
"""

from __future__ import annotations

import bisect
import enum
import itertools
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from magnetar.common.errors import InvalidArgument, PreconditionFailed
from magnetar.common.names import DEFAULT_BUNDLES, MAX_BUNDLES, TopicName, int_in

_HASH_SPACE: Final = 1 << 32
_LAST_BOUNDARY: Final = _HASH_SPACE - 1
LAST_BOUNDARY: Final = _LAST_BOUNDARY
"""The upper boundary of a namespace's last bundle (which includes it)."""


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


def bundle_name(lower: int, upper: int) -> str:
    """A bundle's name, e.g. ``0x00000000_0x40000000`` (Pulsar's bundle range)."""
    return f"0x{lower:08x}_0x{upper:08x}"


_BUNDLE_NAME_RE: Final = re.compile(r"0x[0-9a-f]{8}_0x[0-9a-f]{8}\Z")


def is_bundle_name(name: str) -> bool:
    """Whether ``name`` is spelled as a bundle is (``0x00000000_0x40000000``), whatever
    the namespace's boundaries."""
    return bool(_BUNDLE_NAME_RE.match(name))


def bundle_ranges(bundles: int = DEFAULT_BUNDLES) -> list[str]:
    """Names of ``bundles`` equal bundles, e.g. ``["0x00000000_0x40000000", …, "0xc0000000_0xffffffff"]``.

    Each range includes its lower bound and excludes its upper one, except the last,
    which includes 0xffffffff.

    Raises:
        InvalidArgument: ``bundles`` is not in [1, MAX_BUNDLES].
    """
    return NamespaceBundles.equal(bundles).ranges


def topic_hash(topic: TopicName | str) -> int:
    """The unsigned 32-bit bundle hash of a topic: CRC-32 of its UTF-8 full name."""
    return zlib.crc32(str(TopicName.parse(topic)).encode("utf-8"))


def parse_boundary(value: object) -> int:
    """A boundary given as an int or a hex string (``"0x40000000"``, Pulsar's BundlesData).

    Raises:
        InvalidArgument: not an integer in [0, 0xffffffff].
    """
    if isinstance(value, str):
        try:
            value = int(value, 16) if value.lower().startswith("0x") else int(value)
        except ValueError:
            raise InvalidArgument(f"bundle boundary {value!r} is not a number (e.g. 0x40000000)") from None
    if not int_in(value, 0, _LAST_BOUNDARY):
        raise InvalidArgument(f"bundle boundary {value!r} is not an integer from 0x00000000 to 0xffffffff")
    return value  # type: ignore[return-value]


@dataclass(frozen=True)
class NamespaceBundles:
    """A namespace's bundles: sorted boundaries, the first 0x00000000 and the last
    0xffffffff (Pulsar's ``BundlesData.boundaries``). Build with :meth:`of`, :meth:`equal`
    or :meth:`from_document`; the constructor does not check."""

    boundaries: tuple[int, ...]

    @classmethod
    def equal(cls, count: int = DEFAULT_BUNDLES) -> NamespaceBundles:
        """``count`` equal ranges. Raises: InvalidArgument: ``count`` not in [1, MAX_BUNDLES]."""
        return cls(tuple(bundle_boundaries(count)))

    @classmethod
    def of(cls, boundaries: Iterable[object]) -> NamespaceBundles:
        """Checked boundaries (ints or hex strings).

        Raises:
            InvalidArgument: fewer than two, not strictly increasing, not from 0x00000000
                to 0xffffffff, or more than MAX_BUNDLES bundles.
        """
        values = tuple(parse_boundary(b) for b in boundaries)
        if len(values) < 2 or values[0] != 0 or values[-1] != _LAST_BOUNDARY:
            raise InvalidArgument(
                "bundle boundaries must start at 0x00000000 and end at 0xffffffff, "
                f"got {[f'0x{b:08x}' for b in values][:6]}")
        if any(a >= b for a, b in itertools.pairwise(values)):
            raise InvalidArgument("bundle boundaries must be strictly increasing")
        _check_bundles(len(values) - 1)
        return cls(values)

    @classmethod
    def from_document(cls, doc: object, default_count: int) -> NamespaceBundles:
        """From a namespace's stored ``{"boundaries": [...], "numBundles": N}``; None (a
        namespace created before boundaries were stored): ``default_count`` equal ranges.

        Raises:
            InvalidArgument: the document is not valid bundles data.
        """
        if doc is None:
            return cls.equal(default_count)
        if not isinstance(doc, dict) or not isinstance(doc.get("boundaries"), list):
            raise InvalidArgument(f"bundles data must be {{'boundaries': [...], 'numBundles': N}}, got {doc!r}")
        return cls.of(doc["boundaries"])

    def to_document(self) -> dict[str, Any]:
        """Pulsar's BundlesData: hex strings and the count."""
        return {"boundaries": [f"0x{b:08x}" for b in self.boundaries], "numBundles": self.count}

    @property
    def count(self) -> int:
        return len(self.boundaries) - 1

    @property
    def ranges(self) -> list[str]:
        """The bundles' names, in hash order."""
        b = self.boundaries
        return [bundle_name(b[i], b[i + 1]) for i in range(len(b) - 1)]

    def bundle_of(self, topic: TopicName | str) -> str:
        """The bundle whose range holds ``topic``'s hash (the last includes 0xffffffff)."""
        return self._bundle_of_hash(topic_hash(topic))

    def _bundle_of_hash(self, h: int) -> str:
        b = self.boundaries
        index = min(bisect.bisect_right(b, h) - 1, len(b) - 2)
        return bundle_name(b[index], b[index + 1])

    def range_of(self, bundle: str) -> tuple[int, int]:
        """``(lower, upper)`` of one of these bundles.

        Raises:
            PreconditionFailed: ``bundle`` is not one of them (a bad name, or split since).
        """
        try:
            lower, upper = (int(part, 16) for part in bundle.split("_"))
            index = self.boundaries.index(lower)
        except ValueError:
            index = -1
        if index < 0 or index + 1 >= len(self.boundaries) or self.boundaries[index + 1] != upper:
            raise PreconditionFailed(
                f"Invalid bundle range: {bundle!r} is not a bundle of the namespace; its bundles are "
                f"{_shown(self.ranges)}")
        return lower, upper

    def split(self, bundle: str, positions: Sequence[int]) -> NamespaceBundles:
        """These bundles with ``bundle`` split at ``positions``.

        Raises:
            PreconditionFailed: no such bundle.
            InvalidArgument: no position, or one not strictly inside the bundle's range.
        """
        lower, upper = self.range_of(bundle)
        if not positions:
            raise InvalidArgument(f"no position to split bundle {bundle} at")
        for p in positions:
            if not int_in(p, lower + 1, upper - 1):
                raise InvalidArgument(
                    f"split position {p!r} is not strictly inside bundle {bundle} "
                    f"(0x{lower + 1:08x} to 0x{upper - 1:08x})")
        return NamespaceBundles(tuple(sorted({*self.boundaries, *positions})))


def bundle_of(topic: TopicName | str, bundles: int | NamespaceBundles = DEFAULT_BUNDLES) -> str:
    """The bundle whose hash range holds ``topic``: of ``bundles`` (a namespace's
    boundaries), or of that many equal ranges.

    Each partition of a partitioned topic is hashed by its own full name, so partitions
    spread over bundles (and brokers).

    Raises:
        InvalidTopicName: ``topic`` is a malformed string.
        InvalidArgument: ``bundles`` is a count not in [1, MAX_BUNDLES].
    """
    if isinstance(bundles, NamespaceBundles):
        return bundles.bundle_of(topic)
    step = _HASH_SPACE // _check_bundles(bundles)
    index = min(topic_hash(topic) // step, bundles - 1)
    upper = _LAST_BOUNDARY if index == bundles - 1 else (index + 1) * step
    return bundle_name(index * step, upper)


def bundles_of_names(names: Iterable[str]) -> NamespaceBundles:
    """The bundles whose names (``0x00000000_0x40000000``, …) are ``names`` (any order).

    Raises:
        InvalidArgument: they do not cover 0x00000000 to 0xffffffff edge to edge.
    """
    edges: set[str] = set()
    for name in names:
        edges.update(name.split("_"))
    return NamespaceBundles.of(sorted(edges, key=lambda e: parse_boundary(e)))


class SplitAlgorithm(enum.StrEnum):
    """How a bundle is split (Pulsar's ``splitAlgorithmName``s)."""

    RANGE_EQUALLY_DIVIDE = "range_equally_divide"
    """At the middle of its hash range."""
    TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
    """Between the hashes of its middle topics: half of its topics in each half."""
    SPECIFIED_POSITIONS_DIVIDE = "specified_positions_divide"
    """At the positions given."""

    @classmethod
    def parse(cls, name: str) -> SplitAlgorithm:
        """Raises: InvalidArgument: an unknown name (the message lists the known ones)."""
        try:
            return cls(name or cls.RANGE_EQUALLY_DIVIDE)
        except ValueError:
            raise InvalidArgument(
                f"Unsupported split algorithm {name!r}; the algorithms are {', '.join(a.value for a in cls)}"
            ) from None


def split_positions(
    bundles: NamespaceBundles, bundle: str, algorithm: SplitAlgorithm,
    topics: Iterable[TopicName | str] = (), positions: Sequence[object] = (),
) -> list[int]:
    """Where ``algorithm`` splits ``bundle``, as Pulsar's split algorithms choose:
    the middle of its range; the middle of its ``topics``' sorted hashes; or
    ``positions`` (each strictly inside the range).

    Raises:
        PreconditionFailed: no such bundle; a range of one hash, or fewer than two
            topics with distinct hashes (nothing to split).
        InvalidArgument: a bad position, or positions given to another algorithm.
    """
    lower, upper = bundles.range_of(bundle)
    if positions and algorithm is not SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE:
        raise InvalidArgument(f"split boundaries are only taken by {SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE}")
    if algorithm is SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE:
        if not positions:
            raise InvalidArgument(f"{algorithm} needs the split boundaries")
        chosen = sorted({parse_boundary(p) for p in positions})
        bundles.split(bundle, chosen)  # checks each is inside
        return chosen
    if algorithm is SplitAlgorithm.RANGE_EQUALLY_DIVIDE:
        middle = lower + (upper - lower) // 2
        if middle <= lower:
            raise PreconditionFailed(f"bundle {bundle} holds one hash: it cannot be split")
        return [middle]
    hashes = sorted({h for h in (topic_hash(t) for t in topics) if lower <= h < upper or h == upper == _LAST_BOUNDARY})
    if len(hashes) < 2:
        raise PreconditionFailed(
            f"bundle {bundle} has {len(hashes)} topic hash(es): {algorithm} needs two or more to split it")
    middle = len(hashes) // 2
    # The first hash of the upper half opens it: half of the topics on each side.
    return [hashes[middle]]


def _shown(ranges: list[str]) -> str:
    return ", ".join(ranges[:8]) + (f", … ({len(ranges)} in all)" if len(ranges) > 8 else "")
