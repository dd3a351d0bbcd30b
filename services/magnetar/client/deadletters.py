"""Replaying dead letters exactly once: the pieces every replay shares (the gateway's
``POST .../replay`` and the Spark job ``spark-jobs/dlq_replay.py``).

A replay publishes each DLQ message under a producer name of its own choosing with a
sequence id packed from the DLQ message id (:func:`sequence_id`), so the target topic's
deduplication recognises a message republished before an interruption; the copy's
properties are the original's with ``RECONSUMETIMES`` cleared, ``REPLAYED_AT`` set and
``REPLAY_COUNT`` incremented (:func:`replayed_properties`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from magnetar.common.errors import InvalidArgument
from magnetar.common.letters import ORIGIN_MESSAGE_ID, RECONSUMETIMES, REPLAY_COUNT, REPLAYED_AT
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName

if TYPE_CHECKING:
    from .message import Message

LEDGER_BITS, ENTRY_BITS, BATCH_BITS = 27, 24, 12
"""Widths of the parts of a packed sequence id (:func:`sequence_id`)."""


def sequence_id(mid: MessageId) -> int:
    """A DLQ message id packed into a sequence id that grows with the id (within one
    partition): ledger (27 bits), entry (24), batch index + 1 (12).

    Raises:
        InvalidArgument: an id beyond those widths (a replay refuses it rather than let
            two messages share a sequence id).
    """
    ledger, entry, batch = mid.ledger_id(), mid.entry_id(), mid.batch_index() + 1
    if not (0 <= ledger < 1 << LEDGER_BITS and 0 <= entry < 1 << ENTRY_BITS and 0 <= batch < 1 << BATCH_BITS):
        raise InvalidArgument(f"message id {mid} is too large to replay with deduplication")
    return (ledger << (ENTRY_BITS + BATCH_BITS)) | (entry << BATCH_BITS) | batch


def replayed_properties(properties: Mapping[str, str], message_id: str, now_ms: int) -> dict[str, str]:
    """The properties of the replayed copy of a DLQ message with ``properties`` and id
    ``message_id``: ``RECONSUMETIMES`` cleared, ``ORIGIN_MESSAGE_ID`` kept (the DLQ
    message's id when it had none), ``REPLAY_COUNT`` + 1, ``REPLAYED_AT`` = ``now_ms``."""
    props = dict(properties)
    props.pop(RECONSUMETIMES, None)
    props.setdefault(ORIGIN_MESSAGE_ID, message_id)
    try:
        count = int(props.get(REPLAY_COUNT, "0"))
    except ValueError:
        count = 0
    props[REPLAY_COUNT] = str(count + 1)
    props[REPLAYED_AT] = str(now_ms)
    return props


def replay_properties(message: Message, now_ms: int) -> dict[str, str]:
    """:func:`replayed_properties` of a received message."""
    return replayed_properties(message.properties(), str(message.message_id()), now_ms)


def is_dlq_topic(name: str) -> bool:
    """A topic named as Pulsar names DLQs (``<topic>-<subscription>-DLQ``, any partition)."""
    return TopicName.parse(name).partitioned_topic_name.local_name.endswith("-DLQ")
