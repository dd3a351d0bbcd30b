"""The gRPC door's translation between ``broker_pb2`` messages and the broker core's
own types (subscription types, message ids, deliveries, stats, dead-letter policies).

Subscription types and initial positions have the same numbers on both sides, so they
translate by value (checked here, since an unknown number must be refused, not stored).

Entries a Pulsar client sent (stored as sent, see :mod:`magnetar.protocol.stored`) go to
the SDK as the ``EntryBatch`` it reads (:func:`sdk_entry`), with the same messages and
ids; a compressed one decompressed (the SDK reads a compressed ``EntryBatch`` too, but
Pulsar's batch records would have to be re-encoded and compressed again to make one).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from magnetar.broker.deadletter.policy import DeadLetterDefaults, DeadLetterPolicy
from magnetar.broker.entry import PULSAR_MAGIC, decode_entry, encode_entry
from magnetar.broker.subscription_type import InitialPosition, KeySharedPolicy, SubscriptionType
from magnetar.common import masks
from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.consumer import Delivery
    from magnetar.broker.entry import MessageView
    from magnetar.broker.stats import ConsumerStats, PublisherStats, SubscriptionStats, TopicStats


# -- into the core ---------------------------------------------------------------------
def subscription_type(value: int) -> SubscriptionType:
    """Raises: InvalidArgument: not a subscription type."""
    try:
        return SubscriptionType(value)
    except ValueError:
        raise InvalidArgument(f"unknown subscription type {value}") from None


def initial_position(value: int) -> InitialPosition:
    """Raises: InvalidArgument: not an initial position."""
    try:
        return InitialPosition(value)
    except ValueError:
        raise InvalidArgument(f"unknown initial position {value}") from None


def key_shared(s: pb.Subscribe, sub_type: SubscriptionType) -> KeySharedPolicy | None:
    """A Key_Shared consumer's policy (None: AUTO_SPLIT, or not Key_Shared).

    Raises: InvalidArgument: an unknown mode or bad ranges."""
    if sub_type != SubscriptionType.Key_Shared or not s.HasField("key_shared_meta"):
        return None
    m = s.key_shared_meta
    return KeySharedPolicy.of(m.mode, [(r.start, r.end) for r in m.hash_ranges], m.allow_out_of_order_delivery)


def message_id(m: pb.MessageIdData) -> MessageId:
    """Raises: InvalidArgument: a part out of range."""
    return MessageId.from_proto(m)


def dead_letter_asked(p: pb.DeadLetterPolicy) -> DeadLetterDefaults:
    """What a consumer asked for (fields left at 0 or '' are not asked)."""
    return DeadLetterDefaults(
        max_redeliver_count=p.max_redeliver_count or None, retry_letter_topic=p.retry_letter_topic or None,
        dead_letter_topic=p.dead_letter_topic or None, initial_subscription_name=p.initial_subscription_name or None,
    )


# -- out of the core -------------------------------------------------------------------
def deliveries(out: Iterable[Delivery], partition: int) -> pb.Deliveries:
    """Deliveries of the topic partition ``partition`` (-1: not partitioned)."""
    batch = pb.Deliveries()
    append = batch.deliveries.add
    for d in out:
        p = d.position
        entry = d.entry
        sent = append(entry=sdk_entry(entry) if entry[:2] == PULSAR_MAGIC else entry, redelivery_count=d.redelivery_count)
        mid = sent.message_id
        mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index = p[0], p[1], partition, -1
        if d.skipped:
            sent.ack_set = masks.to_bytes(d.skipped, d.messages)
    return batch


def sdk_entry(data: bytes) -> bytes:
    """A stored Pulsar entry as the ``EntryBatch`` the SDK reads (the same messages with
    their keys, ordering keys, properties and event times, the same producer, sequence
    ids, publish time and schema version, and a chunk's uuid and chunk fields),
    decompressed; an unreadable one as stored."""
    try:
        entry = decode_entry(data)
    except InvalidArgument:
        return data
    return encode_entry(
        entry.producer_name, entry.sequence_id, entry.publish_time_ms, entry.batched, entry.messages, entry.schema_version,
        chunk=entry,
    )


def single_message(m: MessageView) -> pb.SingleMessage:
    if isinstance(m, pb.SingleMessage):  # decoded from an EntryBatch: already the wire's
        return m
    out = pb.SingleMessage(
        payload=m.payload, partition_key=m.partition_key, has_partition_key=m.has_partition_key,
        event_time_ms=m.event_time_ms, sequence_id=m.sequence_id, deliver_at_ms=m.deliver_at_ms,
        ordering_key=m.ordering_key,
    )
    out.properties.update(m.properties)
    return out


def dead_letter_policy(policy: DeadLetterPolicy) -> pb.DeadLetterPolicy:
    return pb.DeadLetterPolicy(
        max_redeliver_count=policy.max_redeliver_count, retry_letter_topic=policy.retry_letter_topic,
        dead_letter_topic=policy.dead_letter_topic, initial_subscription_name=policy.initial_subscription_name,
    )


def _consumer_stats(c: ConsumerStats) -> pb.ConsumerStats:
    return pb.ConsumerStats(
        consumer_name=c.consumer_name, available_permits=c.available_permits, unacked_messages=c.unacked_messages,
        blocked=c.blocked, msg_out_counter=c.msg_out_counter, bytes_out_counter=c.bytes_out_counter,
        msg_rate_out=c.msg_rate_out, msg_throughput_out=c.msg_throughput_out, connected_since_ms=c.connected_since_ms,
        msg_rate_redeliver=c.msg_rate_redeliver, message_ack_rate=c.message_ack_rate,
    )


def _subscription_stats(s: SubscriptionStats) -> pb.SubscriptionStats:
    return pb.SubscriptionStats(
        name=s.name, type=int(s.type),  # type: ignore[arg-type]  # the same numbers
        backlog=s.backlog, consumers=s.consumers, unacked=s.unacked,
        mark_delete_position=s.mark_delete_position, durable=s.durable, blocked_consumers=s.blocked_consumers,
        consumer_stats=[_consumer_stats(c) for c in s.consumer_stats],
        msg_out_counter=s.msg_out_counter, bytes_out_counter=s.bytes_out_counter,
        msg_rate_out=s.msg_rate_out, msg_throughput_out=s.msg_throughput_out, backlog_size=s.backlog_size,
        active_consumer=s.active_consumer, dispatch_throttled_time_ms=s.dispatch_throttled_time_ms,
        dispatch_throttled_msg_events=s.dispatch_throttled_msg_events,
        dispatch_throttled_bytes_events=s.dispatch_throttled_bytes_events,
        subscription_properties=s.subscription_properties,
        msg_drop_counter=s.msg_drop_counter, msg_drop_rate=s.msg_drop_rate,
        msg_rate_redeliver=s.msg_rate_redeliver, message_ack_rate=s.message_ack_rate,
    )


def _publisher_stats(p: PublisherStats) -> pb.PublisherStats:
    return pb.PublisherStats(
        producer_name=p.producer_name, connected_since_ms=p.connected_since_ms, msg_in_counter=p.msg_in_counter,
        bytes_in_counter=p.bytes_in_counter, msg_rate_in=p.msg_rate_in, msg_throughput_in=p.msg_throughput_in,
        throttled_time_ms=p.throttled_time_ms,
    )


def topic_stats(t: TopicStats) -> pb.TopicStats:
    return pb.TopicStats(
        topic=t.topic, msg_in_counter=t.msg_in_counter, bytes_in_counter=t.bytes_in_counter,
        msg_out_counter=t.msg_out_counter, bytes_out_counter=t.bytes_out_counter, entries=t.entries,
        storage_size=t.storage_size, producers=t.producers, ledgers=t.ledgers,
        subscriptions=[_subscription_stats(s) for s in t.subscriptions],
        publishers=[_publisher_stats(p) for p in t.publishers],
        msg_rate_in=t.msg_rate_in, msg_throughput_in=t.msg_throughput_in, msg_rate_out=t.msg_rate_out,
        msg_throughput_out=t.msg_throughput_out, backlog_size=t.backlog_size,
        msg_drop_counter=t.msg_drop_counter, msg_drop_rate=t.msg_drop_rate,
    )
