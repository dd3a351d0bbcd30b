"""Terminating a topic (Pulsar's ``terminate``): the topic takes no more messages, and
its consumers learn they reached its end once they have read everything before it.

The terminated position (the last entry stored before the topic was terminated) is kept
in the managed ledger's properties under :data:`TERMINATED_PROPERTY`, written with the
ledger list before anyone is told, so a broker that loads the topic after a restart or a
hand-over refuses producers too (Pulsar keeps it in ``ManagedLedgerInfo.terminatedPosition``).
"""

from __future__ import annotations

import logging

from magnetar.common.errors import InvalidArgument, TopicTerminated
from magnetar.managedledger.position import Position

log = logging.getLogger(__name__)

TERMINATED_PROPERTY = "terminatedPosition"
"""The ledger list property holding the terminated position, ``ledger:entry``."""


def encode_position(position: Position) -> str:
    return f"{position.ledger_id}:{position.entry_id}"


def parse_terminated(value: str | None, topic: str = "") -> Position | None:
    """The stored terminated position (None: not terminated; an unreadable value is
    taken as terminated at ``(-1, -1)``: a terminated topic must never take messages again)."""
    if value is None:
        return None
    try:
        ledger, entry = value.split(":")
        return Position.of((int(ledger), int(entry)))
    except (ValueError, InvalidArgument):
        log.warning("topic %s: unreadable terminated position %r; it stays terminated", topic, value)
        return Position(-1, -1)


def terminated_error(topic: str) -> TopicTerminated:
    """What a producer (a new one, or a send) of a terminated topic gets."""
    return TopicTerminated(f"topic {topic} was terminated: it takes no more messages")
