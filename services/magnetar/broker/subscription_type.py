"""Subscription types and initial positions, with Pulsar's names and numbers.

The numbers are those of Pulsar's ``CommandSubscribe.SubType`` and ``InitialPosition``
(and of ``broker.proto``'s ``SubscriptionType`` and ``InitialPosition``), so every door
translates by value. A name is what Pulsar's admin API shows (``Key_Shared``) and what a
cursor keeps in its ``__subscription_type`` property.
"""

from __future__ import annotations

from enum import IntEnum


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
