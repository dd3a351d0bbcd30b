"""The copies a move publishes (pure: what goes where, and under which key).

- :func:`plan_reconsume` (``reconsume_later``): a copy, delayed, to the retry topic, with
  ``REAL_TOPIC``, ``ORIGIN_MESSAGE_ID`` (both kept from the first copy on), ``RETRY_TOPIC``,
  ``RECONSUMETIMES`` (1 on the first retry) and ``DELAY_TIME`` (ms), plus the original's
  properties, key, ordering key and event time. When ``RECONSUMETIMES`` would exceed
  ``max_redeliver_count`` the copy goes to the DLQ instead, with a ``DEAD_LETTER_REASON``.
- :func:`plan_dead_letter` (negative acks): the DLQ copy of an entry whose redelivery
  count reached ``max_redeliver_count``.

Every copy goes under the producer name ``__move:<subscription>:<ORIGIN_MESSAGE_ID>``
with sequence id ``RECONSUMETIMES`` of the copy (the original's + 1): the target topic's
deduplication then stores a repeated move only once.

A chunked message moves as a chunked message (:func:`plan_dead_letter` with ``chunk``):
one copy per chunk, each with the dead-letter properties and chunk fields of its own in
the target (uuid ``<move producer name>-<sequence id>``, the original's chunk id, number
of chunks, whole size and codec), all under the move's producer name and sequence id, so
the target deduplicates the move by its last chunk. Its ``ORIGIN_MESSAGE_ID`` is the
chunked message's id as the consumer saw it (``<first chunk>;<last chunk>``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from magnetar.broker.deadletter.policy import DeadLetterPolicy
from magnetar.broker.dispatch.delayed import MAX_DELAY_MS
from magnetar.broker.entry import Entry, Message, MessageView
from magnetar.common.errors import InvalidArgument
from magnetar.common.letters import (
    DEAD_LETTER_REASON,
    DELAY_TIME,
    ORIGIN_MESSAGE_ID,
    REAL_TOPIC,
    RECONSUMETIMES,
    RETRY_TOPIC,
)

MOVE_PRODUCER_PREFIX = "__move:"


@dataclass(frozen=True)
class ChunkFields:
    """The chunk fields of a chunk's copy (a ``ChunkOf`` for ``encode_entry``)."""

    uuid: str
    chunk_id: int
    num_chunks_from_msg: int
    total_chunk_msg_size: int
    compression: int = 0
    """The whole message's codec: its chunks hold parts of the compressed payload."""
    uncompressed_size: int = 0


def chunk_fields(entry: Entry, uuid: str) -> ChunkFields:
    """The chunk fields of ``entry`` (a chunk, in either stored format) under ``uuid``."""
    codec = getattr(entry, "compression", 0)
    meta = getattr(entry, "metadata", entry)  # a Pulsar entry's MessageMetadata, or an EntryBatch
    return ChunkFields(
        uuid, entry.chunk_id, entry.num_chunks_from_msg, entry.total_chunk_msg_size, codec,
        getattr(meta, "uncompressed_size", 0) if codec else 0,
    )


@dataclass(frozen=True)
class Move:
    """One copy to publish: where, what, and its deduplication key."""

    target: str
    message: Message
    producer_name: str
    sequence_id: int
    dead: bool
    """True: to the dead letter topic."""
    chunk: ChunkFields | None = None
    """The copy of one chunk of a chunked message (None: a whole message)."""


def _times(single: MessageView) -> int:
    """The retries the message had (its ``RECONSUMETIMES``; 0 when none or garbled)."""
    try:
        return max(0, int(single.properties.get(RECONSUMETIMES, "0")))
    except ValueError:
        return 0


def _properties(single: MessageView, source_topic: str, message_id: str) -> tuple[dict[str, str], str]:
    """The copy's properties (the original's, with where it came from) and its origin id."""
    properties = dict(single.properties)
    properties[REAL_TOPIC] = single.properties.get(REAL_TOPIC) or source_topic
    origin = single.properties.get(ORIGIN_MESSAGE_ID) or message_id
    properties[ORIGIN_MESSAGE_ID] = origin
    return properties, origin


def _copy(single: MessageView, properties: dict[str, str], deliver_at_ms: int = 0) -> Message:
    return Message(
        payload=single.payload, properties=properties, partition_key=single.partition_key,
        has_partition_key=single.has_partition_key, event_time_ms=single.event_time_ms, deliver_at_ms=deliver_at_ms,
        ordering_key=single.ordering_key,
    )


def plan_reconsume(
    policy: DeadLetterPolicy, subscription: str, source_topic: str, message_id: str, single: MessageView,
    delay_ms: int, now_ms: int | None = None,
) -> Move:
    """The copy ``reconsume_later`` publishes: to the retry topic, delayed by ``delay_ms``,
    or to the DLQ once the retries would exceed ``max_redeliver_count``.

    Raises:
        InvalidArgument: a delay outside 1 s – 864,000 s.
    """
    if not 1000 <= delay_ms <= MAX_DELAY_MS:
        raise InvalidArgument(f"a reconsume_later delay is 1 s to 864,000 s, not {delay_ms} ms")
    times = _times(single) + 1
    properties, origin = _properties(single, source_topic, message_id)
    producer = f"{MOVE_PRODUCER_PREFIX}{subscription}:{origin}"
    if times > policy.max_redeliver_count:
        properties[DEAD_LETTER_REASON] = (
            f"reconsume_later after {times - 1} retries; max_redeliver_count is {policy.max_redeliver_count}"
        )
        return Move(policy.dead_letter_topic, _copy(single, properties), producer, times, dead=True)
    properties[RETRY_TOPIC] = policy.retry_letter_topic
    properties[RECONSUMETIMES] = str(times)
    properties[DELAY_TIME] = str(delay_ms)
    now = math.ceil(time.time() * 1000) if now_ms is None else now_ms  # up: never early
    return Move(policy.retry_letter_topic, _copy(single, properties, now + delay_ms), producer, times, dead=False)


def plan_dead_letter(
    policy: DeadLetterPolicy, subscription: str, source_topic: str, message_id: str, single: MessageView,
    redelivery_count: int, chunk: Entry | None = None,
) -> Move:
    """The DLQ copy of a message redelivered ``redelivery_count`` times (negative acks);
    with ``chunk`` (the stored chunk ``single`` is the message of), the copy of that chunk
    of the chunked message ``message_id``."""
    properties, origin = _properties(single, source_topic, message_id)
    properties[DEAD_LETTER_REASON] = (
        f"redelivery count {redelivery_count} reached max_redeliver_count {policy.max_redeliver_count}"
    )
    producer = f"{MOVE_PRODUCER_PREFIX}{subscription}:{origin}"
    sequence_id = _times(single) + 1
    fields = chunk_fields(chunk, f"{producer}-{sequence_id}") if chunk is not None else None
    return Move(policy.dead_letter_topic, _copy(single, properties), producer, sequence_id, dead=True, chunk=fields)
