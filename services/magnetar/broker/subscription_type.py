"""Subscription types and initial positions, with Pulsar's names and numbers.

The numbers are those of Pulsar's ``CommandSubscribe.SubType`` and ``InitialPosition``
(and of ``broker.proto``'s ``SubscriptionType`` and ``InitialPosition``), so every door
translates by value. A name is what Pulsar's admin API shows (``Key_Shared``) and what a
cursor keeps in its ``__subscription_type`` property.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from magnetar.common.errors import InvalidArgument


class SubscriptionType(IntEnum):
    """How a subscription hands its messages to its consumers (docs/subscriptions.md)."""

    Exclusive = 0
    Shared = 1
    Failover = 2
    Key_Shared = 3


class InitialPosition(IntEnum):
    """Where a new subscription starts: after the last message, or at the first."""

    Latest = 0
    Earliest = 1


class KeySharedMode(IntEnum):
    """How a Key_Shared subscription spreads keys (Pulsar's ``KeySharedMode``):
    AUTO_SPLIT by consistent hashing over the consumers, STICKY by the hash ranges each
    consumer declares."""

    AUTO_SPLIT = 0
    STICKY = 1


HASH_RANGE_SIZE = 65536
"""Key hashes fall in 0 .. 65,535 (Pulsar's Murmur3 hash of the key modulo this)."""


@dataclass(frozen=True)
class KeySharedPolicy:
    """A Key_Shared consumer's ``keySharedMeta``: the mode, in STICKY its hash ranges
    (inclusive ``(start, end)`` pairs, as Pulsar's), and ``allowOutOfOrderDelivery``
    (accepted; the dispatcher keeps each key's order anyway, which the flag allows but
    does not require).

    Raises:
        InvalidArgument: STICKY without ranges, ranges outside 0 .. 65,535 or with
            start > end, ranges that overlap each other, ranges in AUTO_SPLIT.
    """

    mode: KeySharedMode = KeySharedMode.AUTO_SPLIT
    ranges: tuple[tuple[int, int], ...] = ()
    allow_out_of_order_delivery: bool = False

    def __post_init__(self) -> None:
        if self.mode == KeySharedMode.AUTO_SPLIT:
            if self.ranges:
                raise InvalidArgument("Key_Shared AUTO_SPLIT takes no hash ranges (STICKY does)")
            return
        if not self.ranges:
            raise InvalidArgument("Key_Shared STICKY needs at least one hash range")
        for start, end in self.ranges:
            if not 0 <= start <= end < HASH_RANGE_SIZE:
                raise InvalidArgument(
                    f"hash range [{start}, {end}] is not within 0 .. {HASH_RANGE_SIZE - 1} with start <= end"
                )
        ordered = sorted(self.ranges)
        for (s1, e1), (s2, e2) in zip(ordered, ordered[1:], strict=False):
            if s2 <= e1:
                raise InvalidArgument(f"hash ranges [{s1}, {e1}] and [{s2}, {e2}] overlap")

    @classmethod
    def of(cls, mode: int, ranges: Iterable[tuple[int, int]], allow_out_of_order_delivery: bool) -> KeySharedPolicy:
        """A policy from a door's wire values (Pulsar's ``KeySharedMeta`` and broker.proto's
        number the modes alike).

        Raises:
            InvalidArgument: an unknown mode, or ranges the policy refuses.
        """
        try:
            key_shared_mode = KeySharedMode(mode)
        except ValueError:
            raise InvalidArgument(f"unknown Key_Shared mode {mode}") from None
        return cls(key_shared_mode, tuple(ranges), bool(allow_out_of_order_delivery))

    def overlap(self, other: KeySharedPolicy) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """A range of this policy and one of ``other`` that overlap, if any."""
        for a in self.ranges:
            for b in other.ranges:
                if a[0] <= b[1] and b[0] <= a[1]:
                    return a, b
        return None
