"""The SDK's enums and option objects, named as in Pulsar's Python client."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from magnetar.common.access_mode import ProducerAccessMode
from magnetar.common.compression import CompressionType, codec
from magnetar.common.errors import (
    InvalidArgument,
    InvalidConfiguration,
    MagnetarError,
    ProducerQueueIsFull,
)
from magnetar.common.message_id import MessageId
from magnetar.schema import BytesSchema, Schema

from .redelivery_backoff import MultiplierRedeliveryBackoff


class ConsumerType(enum.IntEnum):
    """Subscription type; the values are the wire's ``SubscriptionType``."""

    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(enum.IntEnum):
    """Where a new subscription starts; the values are the wire's ``InitialPosition``."""

    Latest = 0
    Earliest = 1


class PartitionsRoutingMode(enum.Enum):
    """How a producer picks the partition of a message without a partition key."""

    RoundRobinDistribution = "round_robin"
    UseSinglePartition = "single"
    # Short aliases.
    RoundRobinPartition = "round_robin"
    SinglePartition = "single"


class BatchingType(enum.IntEnum):
    """How a batching producer groups messages into batches (pulsar-client's
    ``BatchingType``, same names and numbers): ``Default``, all messages in one batch;
    ``KeyBased``, one batch per key (ordering key, else partition key; the messages
    without either together), so a Key_Shared consumer gets a batch whole."""

    Default = 0
    KeyBased = 1


def check_batching_type(value: object) -> BatchingType:
    """``value`` as a :class:`BatchingType` (pulsar-client's ``BatchingType`` members are
    taken too: same names).

    Raises:
        InvalidConfiguration: not a batching type.
    """
    if isinstance(value, BatchingType):
        return value
    name = getattr(value, "name", value)  # pulsar.BatchingType.KeyBased and the like
    if isinstance(name, str) and name in BatchingType.__members__:
        return BatchingType[name]
    raise InvalidConfiguration(f"batching_type must be BatchingType.Default or BatchingType.KeyBased, not {value!r}")


class RegexSubscriptionMode(enum.IntEnum):
    """Which topics a pattern subscription takes (pulsar-client's ``RegexSubscriptionMode``,
    same names and numbers; the wire's ``CommandGetTopicsOfNamespace.Mode``)."""

    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


def check_regex_subscription_mode(value: object) -> RegexSubscriptionMode:
    """``value`` as a :class:`RegexSubscriptionMode` (pulsar-client's members are taken
    too: same names).

    Raises:
        InvalidConfiguration: not a regex subscription mode.
    """
    if isinstance(value, RegexSubscriptionMode):
        return value
    name = getattr(value, "name", value)  # pulsar.RegexSubscriptionMode.AllTopics and the like
    if isinstance(name, str) and name in RegexSubscriptionMode.__members__:
        return RegexSubscriptionMode[name]
    raise InvalidConfiguration(
        "regex_subscription_mode must be RegexSubscriptionMode.PersistentOnly, NonPersistentOnly or "
        f"AllTopics, not {value!r}"
    )


def check_discovery_period(value: object) -> float:
    """``pattern_auto_discovery_period`` in seconds; 0 or less: no discovery (as
    pulsar-client, which looks again only when the period is > 0).

    Raises:
        InvalidConfiguration: not a number.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidConfiguration(f"pattern_auto_discovery_period must be a number of seconds, not {value!r}")
    return float(value)


class HashingScheme(enum.Enum):
    """The hash that picks a keyed message's partition. Magnetar has one,
    ``Murmur3_32Hash`` (the same partition as Pulsar clients with that scheme); the
    other members exist so Pulsar code names them, and are refused (see
    :func:`check_hashing_scheme`) rather than silently hashed another way."""

    BoostHash = 0
    JavaStringHash = 1
    Murmur3_32Hash = 2


def check_compression_type(value: object) -> CompressionType:
    """``value`` as a :class:`CompressionType` (pulsar-client's ``CompressionType``
    members are taken too: they have the same names and numbers).

    Raises:
        InvalidArgument: not a compression type.
    """
    if isinstance(value, CompressionType):
        return value
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return codec(value)
    name = getattr(value, "name", None)  # pulsar.CompressionType.LZ4 and the like
    if isinstance(name, str):
        return codec(name)
    raise InvalidArgument(f"compression_type must be a CompressionType, not {value!r}")


def check_hashing_scheme(scheme: object) -> HashingScheme:
    """The scheme, if Magnetar hashes keys that way.

    Raises:
        InvalidConfiguration: not a :class:`HashingScheme`, or one other than ``Murmur3_32Hash``
            (keys would still go where Murmur3 sends them: a silent change of placement).
    """
    if not isinstance(scheme, HashingScheme):
        raise InvalidConfiguration(f"hashing_scheme must be a HashingScheme, not {scheme!r}")
    if scheme is not HashingScheme.Murmur3_32Hash:
        raise InvalidConfiguration(
            f"hashing_scheme={scheme.name} is not supported: Magnetar places keyed messages with "
            "Murmur3_32Hash only; pass HashingScheme.Murmur3_32Hash or leave it unset"
        )
    return scheme


def check_replication_clusters(replication_clusters: object) -> None:
    """Refuse ``replication_clusters`` on a send: Magnetar has no geo-replication, so
    the message would stay in the local cluster only while the caller believes otherwise.

    Raises:
        InvalidConfiguration: a non-empty ``replication_clusters``.
    """
    if replication_clusters:
        raise InvalidConfiguration(
            f"replication_clusters={replication_clusters!r} is not supported: Magnetar has no "
            "geo-replication, every message stays in the local cluster; leave it unset"
        )


class Result(enum.Enum):
    """The first argument of a ``send_async`` callback on success (``Result.Ok``).

    On failure the callback gets the :class:`~magnetar.MagnetarError` instead, so
    ``res == Result.Ok`` reads as in Pulsar and the error keeps its type and message.
    A member other than ``Ok`` equals the errors of its kind: with a full queue the
    callback gets a :class:`~magnetar.ProducerQueueIsFull`, which
    ``== Result.ProducerQueueIsFull`` as Pulsar's result would. The values are Pulsar's.
    """

    Ok = 0
    ProducerQueueIsFull = 27

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MagnetarError):
            kind = _ERRORS.get(self.name)
            return kind is not None and isinstance(other, kind)
        return self is other

    def __hash__(self) -> int:
        return hash(self.name)


_ERRORS: dict[str, type[MagnetarError]] = {"ProducerQueueIsFull": ProducerQueueIsFull}
"""The error class a (failure) :class:`Result` stands for."""


class KeySharedMode(enum.IntEnum):
    """How a Key_Shared subscription spreads keys (pulsar-client's ``KeySharedMode``); the
    values are the wire's ``KeySharedMode``."""

    AutoSplit = 0
    Sticky = 1


KEY_HASH_RANGE = 65536
"""Key hashes are 0 .. 65,535: Pulsar's Murmur3 hash of the key modulo this."""


class ConsumerKeySharedPolicy:
    """A Key_Shared consumer's policy, as pulsar-client's ``ConsumerKeySharedPolicy``.

    Args:
        key_shared_mode: ``AutoSplit`` (keys spread over the consumers by consistent
            hashing) or ``Sticky`` (this consumer takes the keys whose hash its
            ``sticky_ranges`` hold).
        allow_out_of_order_delivery: accepted; the broker keeps each key's order anyway
            (which the flag allows but does not require).
        sticky_ranges: inclusive ``(start, end)`` hash ranges within 0 .. 65,535; needed
            in Sticky mode. The broker refuses ranges another consumer of the subscription
            holds (ConsumerAssignError) and a mode other than the subscription's
            (ConsumerBusy).

    Raises:
        InvalidConfiguration: Sticky without ranges, ranges given in AutoSplit, a range
            outside 0 .. 65,535 or with start > end, ranges that overlap each other
            (pulsar-client raises ValueError for the first).
    """

    def __init__(
        self,
        key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
        allow_out_of_order_delivery: bool = False,
        sticky_ranges: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        if not isinstance(key_shared_mode, KeySharedMode):
            raise InvalidConfiguration(f"key_shared_mode must be a KeySharedMode, not {key_shared_mode!r}")
        ranges = [tuple(r) for r in sticky_ranges or ()]
        if key_shared_mode is KeySharedMode.Sticky and not ranges:
            raise InvalidConfiguration("key_shared_mode=KeySharedMode.Sticky needs sticky_ranges")
        if key_shared_mode is KeySharedMode.AutoSplit and ranges:
            raise InvalidConfiguration("sticky_ranges are for key_shared_mode=KeySharedMode.Sticky only")
        for r in ranges:
            if len(r) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in r) or not 0 <= r[0] <= r[1] < KEY_HASH_RANGE:
                raise InvalidConfiguration(f"a sticky range is (start, end) with 0 <= start <= end < {KEY_HASH_RANGE}, not {r!r}")
        ordered = sorted(ranges)
        for a, b in zip(ordered, ordered[1:], strict=False):
            if b[0] <= a[1]:
                raise InvalidConfiguration(f"sticky ranges {a} and {b} overlap")
        self._mode = key_shared_mode
        self._allow_out_of_order_delivery = bool(allow_out_of_order_delivery)
        self._ranges: list[tuple[int, int]] = ranges  # type: ignore[assignment]

    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order_delivery

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)

    def __repr__(self) -> str:
        return (
            f"ConsumerKeySharedPolicy({self._mode.name}, allow_out_of_order_delivery="
            f"{self._allow_out_of_order_delivery}, sticky_ranges={self._ranges})"
        )


@dataclass
class ConsumerDeadLetterPolicy:
    """Where messages go after too many retries or redeliveries (Pulsar's
    ``ConsumerDeadLetterPolicy``). A name left None takes the namespace's default, else
    ``<topic>-<subscription>-RETRY`` / ``-DLQ`` and, for the DLQ's initial subscription,
    ``<subscription>-DLQ-sub``. The namespace's default count applies to consumers that
    give no policy (``enable_retry`` alone); None here means the same."""

    max_redeliver_count: int | None = 16
    dead_letter_topic: str | None = None
    retry_letter_topic: str | None = None
    initial_subscription_name: str | None = None


DEFAULT_BATCH_RECEIVE_MAX_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True)
class ConsumerBatchReceivePolicy:
    """How much one ``Consumer.batch_receive()`` returns (Pulsar's
    ``ConsumerBatchReceivePolicy``, with its defaults: no count limit, 10 MiB, 100 ms).

    A batch is complete as soon as the queued messages reach ``max_num_message`` or
    ``max_num_bytes`` (payload bytes), or once ``timeout_ms`` has passed since the call,
    with whatever arrived then (possibly nothing). A value <= 0 means no such limit (no
    timeout: wait until a limit is reached). As in Pulsar, a policy with no count and no
    byte limit gets the default byte limit (10 MiB), and one with no limit and no timeout
    is refused; the consumer also caps ``max_num_message`` at its ``receiver_queue_size``.

    Raises:
        InvalidConfiguration: a value that is not an int, or all three <= 0.
    """

    max_num_message: int = -1
    max_num_bytes: int = DEFAULT_BATCH_RECEIVE_MAX_BYTES
    timeout_ms: int = 100

    def __post_init__(self) -> None:
        for name in ("max_num_message", "max_num_bytes", "timeout_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidConfiguration(f"ConsumerBatchReceivePolicy: {name} must be an int, not {value!r}")
        if self.max_num_message <= 0 and self.max_num_bytes <= 0:
            if self.timeout_ms <= 0:
                raise InvalidConfiguration(
                    "ConsumerBatchReceivePolicy needs at least one of max_num_message, max_num_bytes and "
                    "timeout_ms > 0 (with none, batch_receive would never return)"
                )
            # Pulsar's reset (C++ BatchReceivePolicy, Java ConsumerBase): no limit at all
            # would let one batch take any amount of memory.
            object.__setattr__(self, "max_num_message", -1)
            object.__setattr__(self, "max_num_bytes", DEFAULT_BATCH_RECEIVE_MAX_BYTES)


DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
DEFAULT_AUTO_UPDATE_PARTITIONS_INTERVAL_S = 60.0
DEFAULT_RETRY_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


@dataclass
class ProducerConfig:
    producer_name: str | None = None
    # The first message's sequence id is this + 1 (None: the broker's last for the
    # producer name + 1); pulsar-client's initial_sequence_id.
    initial_sequence_id: int | None = None
    batching_enabled: bool = True
    batching_max_messages: int = 1000
    batching_max_allowed_size_in_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: int = 10
    batching_type: BatchingType = BatchingType.Default
    send_timeout_millis: int = 30000
    max_pending_messages: int = 1000
    block_if_queue_full: bool = False
    message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution
    hashing_scheme: HashingScheme = HashingScheme.Murmur3_32Hash
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    properties: dict[str, str] = field(default_factory=dict)
    # Each batch's messages compressed together (as Pulsar's compressionType): NONE, LZ4,
    # ZLib, ZSTD or SNAPPY, readable by every consumer (ours and pulsar-client's).
    compression_type: CompressionType = CompressionType.NONE
    # A partitioned producer adds the partitions of a grown topic (Pulsar's
    # autoUpdatePartitions / autoUpdatePartitionsInterval, on, 60 s).
    auto_update_partitions: bool = True
    auto_update_partitions_interval_seconds: float = DEFAULT_AUTO_UPDATE_PARTITIONS_INTERVAL_S
    # Pulsar's access modes: Shared, Exclusive, WaitForExclusive, ExclusiveWithFencing.
    access_mode: ProducerAccessMode = ProducerAccessMode.Shared
    # What send() encodes values with, declared to the broker (bytes: nothing declared).
    schema: Schema = field(default_factory=BytesSchema)
    # A message over max_message_size goes as chunks of at most that many bytes
    # (pulsar-client's chunking_enabled; refused together with batching, as there).
    chunking_enabled: bool = False


@dataclass
class ConsumerConfig:
    subscription_name: str
    consumer_type: ConsumerType = ConsumerType.Exclusive
    consumer_name: str | None = None
    receiver_queue_size: int = 1000
    priority_level: int = 0
    initial_position: InitialPosition = InitialPosition.Latest
    negative_ack_redelivery_delay_ms: int = 60000
    # When set, a nacked message waits backoff.next(its redelivery count) ms instead
    # (pulsar-client's negativeAckRedeliveryBackoff; see redelivery_backoff.py).
    negative_ack_redelivery_backoff: MultiplierRedeliveryBackoff | None = None
    # Set on the subscription when this subscribe creates it (Pulsar's subscription
    # properties); an existing subscription keeps its own.
    subscription_properties: dict[str, str] = field(default_factory=dict)
    unacked_messages_timeout_ms: int | None = None
    enable_retry: bool = False
    dead_letter_policy: ConsumerDeadLetterPolicy | None = None
    # Key_Shared only (None: AutoSplit).
    key_shared_policy: ConsumerKeySharedPolicy | None = None
    # What one batch_receive() returns (None: the default policy).
    batch_receive_policy: ConsumerBatchReceivePolicy | None = field(default_factory=ConsumerBatchReceivePolicy)
    # reconsume_later's levels (level 1 is the first): "1s 5s 1m" or timedeltas / ms.
    retry_delay_levels: str | Sequence[timedelta | int] = DEFAULT_RETRY_DELAY_LEVELS
    # Acks are grouped: sent ack_group_time_ms after the first one not sent yet, or when this many are pending.
    ack_group_time_ms: int = 100
    ack_group_max_size: int = 1000
    # Readers: where the subscription starts (None: initial_position decides) and a
    # cursor the broker never stores.
    start_message_id: MessageId | None = None
    start_message_id_inclusive: bool = False
    non_durable: bool = False
    # Read the topic's compacted view up to its horizon, then the topic (pulsar-client's
    # is_read_compacted; the broker refuses it on Shared and KeyShared subscriptions).
    is_read_compacted: bool = False
    # A consumer of partitioned topics subscribes the partitions they grow (as
    # ProducerConfig; readers keep the partitions they started with).
    auto_update_partitions: bool = True
    auto_update_partitions_interval_seconds: float = DEFAULT_AUTO_UPDATE_PARTITIONS_INTERVAL_S
    # What Message.value() decodes payloads with, declared to the broker (bytes: nothing).
    schema: Schema = field(default_factory=BytesSchema)
    # Chunked messages (pulsar-client's names and defaults): how many incomplete ones
    # are held (0: no limit), whether the oldest dropped then is acked, and when an
    # incomplete one expires (the C++ client's expireTimeOfIncompleteChunkedMessageMs).
    max_pending_chunked_message: int = 10
    auto_ack_oldest_chunked_message_on_queue_full: bool = False
    expire_time_of_incomplete_chunked_message_ms: int = 60_000
    # Pattern subscriptions (pulsar-client's names and defaults): how often the
    # namespace is listed again (seconds; 0 or less: never), and which topics match.
    pattern_auto_discovery_period: float = 60
    regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly


PRODUCER_DEFAULTS = ProducerConfig()
"""The producer options' defaults: the blocking and asyncio clients' signatures take
theirs from here (and from :data:`CONSUMER_DEFAULTS`), so they are written once."""
def check_subscription_properties(value: object) -> dict[str, str]:
    """``subscription_properties`` as a dict of strings (None: none).

    Raises:
        InvalidConfiguration: not a mapping of non-empty string keys to string values.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidConfiguration(f"subscription_properties must be a dict of strings, not {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise InvalidConfiguration(f"subscription_properties must map non-empty strings to strings, not {k!r}: {v!r}")
    return dict(value)


CONSUMER_DEFAULTS = ConsumerConfig(subscription_name="")


def check_chunking(batching_enabled: bool, chunking_enabled: bool) -> None:
    """Refuse chunking together with batching, as pulsar-client does.

    Raises:
        InvalidConfiguration: both on.
    """
    if batching_enabled and chunking_enabled:
        raise InvalidConfiguration("Batching and chunking of messages can't be enabled together.")


def check_initial_sequence_id(initial_sequence_id: object) -> None:
    """Refuse an ``initial_sequence_id`` that is not None or an int >= 0.

    Raises:
        InvalidConfiguration: any other value.
    """
    if initial_sequence_id is None:
        return
    if not isinstance(initial_sequence_id, int) or isinstance(initial_sequence_id, bool) or initial_sequence_id < 0:
        raise InvalidConfiguration(f"initial_sequence_id must be None or an int >= 0, not {initial_sequence_id!r}")


def check_priority_level(consumer_type: ConsumerType, priority_level: object) -> None:
    """Refuse a priority level the subscription type would ignore.

    Failover orders its consumers by priority level (as Pulsar); Exclusive has one
    consumer, so any level means nothing (as in Pulsar). Pulsar's Shared dispatcher
    serves the best level first; Magnetar's spreads messages over every consumer, so a
    level there would be silently ignored.

    Raises:
        InvalidConfiguration: a level that is not an int >= 0, or non-zero on a Shared subscription.
    """
    if not isinstance(priority_level, int) or isinstance(priority_level, bool) or priority_level < 0:
        raise InvalidConfiguration(f"priority_level must be an int >= 0, not {priority_level!r}")
    if priority_level and consumer_type is ConsumerType.Shared:
        raise InvalidConfiguration(
            f"priority_level={priority_level} is not supported on a Shared subscription: Magnetar's Shared "
            "dispatcher does not order consumers by priority (Failover does); leave it 0"
        )
