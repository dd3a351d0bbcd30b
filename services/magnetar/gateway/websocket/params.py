"""The query parameters of Pulsar's WebSocket endpoints, checked and typed.

Names, defaults and enum spellings are Pulsar's (its ProducerHandler, ConsumerHandler
and ReaderHandler). A bad value raises :class:`InvalidQuery`; the endpoint then refuses
the upgrade with 400 ``Invalid query params: <message>``. So does a parameter asking for
something the gateway does not do, rather than being accepted and ignored:
``encryptionKeys`` and ``cryptoFailureAction`` (no end-to-end encryption), ``hashingScheme=JavaStringHash``
(keys are placed with Murmur3 only), ``priorityLevel`` other than 0 on a Shared
subscription (its dispatcher does not order by priority) and ``subscriptionMode=NonDurable``. ``token`` is
read by the gateway's authentication (gateway/auth.py), not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from magnetar.client.options import ConsumerType, HashingScheme, PartitionsRoutingMode
from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId
from magnetar.gateway.websocket import ids

_INT = re.compile(r"[-+]?[0-9]+", re.ASCII)
_INT32_MAX = 2**31 - 1
MIN_ACK_TIMEOUT_MS = 1000
"""Pulsar refuses an ack timeout under a second (0 turns it off)."""

SUBSCRIPTION_TYPES = {
    "Exclusive": ConsumerType.Exclusive,
    "Shared": ConsumerType.Shared,
    "Failover": ConsumerType.Failover,
    "Key_Shared": ConsumerType.KeyShared,
}
ROUTING_MODES = {
    "SinglePartition": PartitionsRoutingMode.UseSinglePartition,
    "RoundRobinPartition": PartitionsRoutingMode.RoundRobinDistribution,
    "CustomPartition": None,  # Pulsar ignores it: the default applies
}
HASHING_SCHEMES = {"JavaStringHash": HashingScheme.JavaStringHash, "Murmur3_32Hash": HashingScheme.Murmur3_32Hash}
COMPRESSION_TYPES = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
SUBSCRIPTION_MODES = ("Durable", "NonDurable")


class InvalidQuery(Exception):
    """A query parameter with a value Pulsar would refuse."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Query:
    """Reads typed values from the first value of each parameter (as Pulsar does)."""

    def __init__(self, query: Mapping[str, str]) -> None:
        self.query = query

    def text(self, name: str) -> str | None:
        value = self.query.get(name)
        return value if value else None

    def integer(self, name: str, default: int, low: int = 0, high: int = _INT32_MAX) -> int:
        value = self.query.get(name)
        if value is None or value == "":
            return default
        if not _INT.fullmatch(value):
            raise InvalidQuery(f"Invalid {name} {value}: not an integer")
        number = int(value)
        if not low <= number <= high:
            raise InvalidQuery(f"Invalid {name} {value}: must be from {low} to {high}")
        return number

    def boolean(self, name: str, default: bool) -> bool:
        value = self.query.get(name)
        if value is None or value == "":
            return default
        if value.lower() not in ("true", "false"):
            raise InvalidQuery(f"Invalid {name} {value}: true or false")
        return value.lower() == "true"

    def choice(self, name: str, choices: Mapping[str, object] | tuple[str, ...]) -> str | None:
        value = self.query.get(name)
        if value is None or value == "":
            return None
        if value not in choices:
            raise InvalidQuery(f"Invalid {name} {value}")
        return value


@dataclass(frozen=True)
class ProducerParams:
    producer_name: str | None = None
    send_timeout_millis: int = 30_000
    batching_enabled: bool = False  # Pulsar's WebSocket default (the client's is true)
    batching_max_messages: int = 1000
    max_pending_messages: int = 1000
    batching_max_publish_delay_ms: int = 10
    routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.UseSinglePartition
    initial_sequence_id: int | None = None
    compression_type: str = "NONE"  # the SDK producer compresses each batch with it


def _refuse_encryption(q: _Query, name: str) -> None:
    if q.text(name) is not None:
        raise InvalidQuery(f"Invalid {name} {q.query[name]}: end-to-end encryption is not supported by this gateway")


def producer_params(query: Mapping[str, str]) -> ProducerParams:
    """Raises: InvalidQuery."""
    q = _Query(query)
    routing = q.choice("messageRoutingMode", ROUTING_MODES)
    if q.choice("hashingScheme", HASHING_SCHEMES) == "JavaStringHash":
        raise InvalidQuery(
            "Invalid hashingScheme JavaStringHash: not supported by this gateway (keys are placed with Murmur3_32Hash)"
        )
    compression = q.choice("compressionType", COMPRESSION_TYPES) or "NONE"
    _refuse_encryption(q, "encryptionKeys")
    initial = q.query.get("initialSequenceId")
    return ProducerParams(
        producer_name=q.text("producerName"),
        compression_type=compression,
        send_timeout_millis=q.integer("sendTimeoutMillis", 30_000),
        batching_enabled=q.boolean("batchingEnabled", False),
        batching_max_messages=q.integer("batchingMaxMessages", 1000, low=1),
        max_pending_messages=q.integer("maxPendingMessages", 1000, low=1),
        batching_max_publish_delay_ms=q.integer("batchingMaxPublishDelay", 10),
        routing_mode=ROUTING_MODES.get(routing or "") or PartitionsRoutingMode.UseSinglePartition,
        initial_sequence_id=None if not initial else q.integer("initialSequenceId", 0, low=-1, high=2**63 - 1),
    )


@dataclass(frozen=True)
class ConsumerParams:
    subscription_type: ConsumerType = ConsumerType.Exclusive
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    priority_level: int = 0
    ack_timeout_ms: int | None = None
    negative_ack_redelivery_delay_ms: int = 60_000
    max_redeliver_count: int | None = None
    dead_letter_topic: str | None = None
    pull_mode: bool = False

    @property
    def dead_letter(self) -> bool:
        """Whether the consumer has a dead letter policy (either parameter given)."""
        return self.max_redeliver_count is not None or self.dead_letter_topic is not None


def _queue_size(q: _Query, max_queue: int) -> int:
    """``receiverQueueSize`` capped at the gateway's maximum; 0 counts as 1 (as Pulsar)."""
    return max(1, min(q.integer("receiverQueueSize", max_queue), max_queue))


def consumer_params(query: Mapping[str, str], max_queue: int) -> ConsumerParams:
    """Raises: InvalidQuery."""
    q = _Query(query)
    _refuse_encryption(q, "cryptoFailureAction")
    kind = q.choice("subscriptionType", SUBSCRIPTION_TYPES)
    if q.choice("subscriptionMode", SUBSCRIPTION_MODES) == "NonDurable":
        raise InvalidQuery("Invalid subscriptionMode NonDurable: not supported by this gateway (use a reader)")
    ack_timeout = q.integer("ackTimeoutMillis", 0)
    if 0 < ack_timeout < MIN_ACK_TIMEOUT_MS:
        raise InvalidQuery(f"Invalid ackTimeoutMillis {ack_timeout}: 0 (off) or at least {MIN_ACK_TIMEOUT_MS}")
    max_redeliver = q.query.get("maxRedeliverCount")
    priority = q.integer("priorityLevel", 0)
    if priority and kind == "Shared":
        raise InvalidQuery(
            f"Invalid priorityLevel {priority}: not supported on a Shared subscription by this gateway "
            "(its dispatcher does not order consumers by priority; Failover does)"
        )
    return ConsumerParams(
        subscription_type=SUBSCRIPTION_TYPES[kind] if kind else ConsumerType.Exclusive,
        receiver_queue_size=_queue_size(q, max_queue),
        consumer_name=q.text("consumerName"),
        priority_level=priority,
        ack_timeout_ms=ack_timeout or None,
        negative_ack_redelivery_delay_ms=q.integer("negativeAckRedeliveryDelay", 60_000),
        max_redeliver_count=q.integer("maxRedeliverCount", 0, low=1) if max_redeliver else None,
        dead_letter_topic=q.text("deadLetterTopic"),
        pull_mode=q.boolean("pullMode", False),
    )


@dataclass(frozen=True)
class ReaderParams:
    start: MessageId = MessageId.latest
    reader_name: str | None = None
    receiver_queue_size: int = 1000


def reader_params(query: Mapping[str, str], max_queue: int) -> ReaderParams:
    """Raises: InvalidQuery."""
    q = _Query(query)
    _refuse_encryption(q, "cryptoFailureAction")
    text = q.text("messageId") or "latest"
    if text in ("earliest", "latest"):
        start = MessageId.earliest if text == "earliest" else MessageId.latest
    else:
        try:
            start = ids.decode(text)
        except InvalidArgument as exc:
            raise InvalidQuery(f"Invalid messageId: {exc.message}") from None
    return ReaderParams(start, q.text("readerName"), _queue_size(q, max_queue))
