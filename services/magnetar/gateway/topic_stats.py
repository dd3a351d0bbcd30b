"""The brokers' stats messages as Pulsar's JSON: TopicStats, the partitioned topic's
aggregate (PartitionedTopicStats) and PersistentTopicInternalStats.

A partitioned topic's aggregate sums its partitions' counters, rates and sizes; its
subscriptions are merged by name (backlogs, unacked messages and counters summed,
consumers listed together), as Pulsar's ``PartitionedTopicStatsImpl.add`` does.
"""

from __future__ import annotations

from datetime import UTC, datetime

from magnetar.gateway import topic_models as m
from magnetar.proto.v1 import broker_pb2 as pb

TYPE_NAMES = {pb.EXCLUSIVE: "Exclusive", pb.SHARED: "Shared", pb.FAILOVER: "Failover", pb.KEY_SHARED: "Key_Shared"}


def iso_time(ms: int) -> str:
    """Milliseconds since the epoch as Pulsar's DateFormatter writes them (ISO 8601,
    milliseconds, UTC); '' for 0."""
    if ms <= 0:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _average(throughput: float, rate: float) -> float:
    return throughput / rate if rate > 0 else 0.0


def subscription_stats(s: pb.SubscriptionStats) -> m.SubscriptionStats:
    consumers = [
        m.ConsumerStats(
            msgRateOut=c.msg_rate_out, msgThroughputOut=c.msg_throughput_out, bytesOutCounter=c.bytes_out_counter,
            msgOutCounter=c.msg_out_counter, consumerName=c.consumer_name, availablePermits=c.available_permits,
            unackedMessages=c.unacked_messages, blockedConsumerOnUnackedMsgs=c.blocked,
            connectedSince=iso_time(c.connected_since_ms), msgRateRedeliver=c.msg_rate_redeliver,
            messageAckRate=c.message_ack_rate,
        )
        for c in s.consumer_stats
    ]
    return m.SubscriptionStats(
        msgRateOut=s.msg_rate_out, msgThroughputOut=s.msg_throughput_out, bytesOutCounter=s.bytes_out_counter,
        msgOutCounter=s.msg_out_counter, msgRateRedeliver=s.msg_rate_redeliver, messageAckRate=s.message_ack_rate,
        msgBacklog=s.backlog, backlogSize=s.backlog_size, msgBacklogNoDelayed=s.backlog,
        blockedSubscriptionOnUnackedMsgs=s.consumers > 0 and s.blocked_consumers == s.consumers,
        unackedMessages=s.unacked, type=TYPE_NAMES.get(s.type, "Exclusive"),
        activeConsumerName=s.active_consumer or None, consumers=consumers,
        isDurable=s.durable, durable=s.durable, subscriptionProperties=dict(s.subscription_properties),
        dispatchThrottledMsgEventsByTopicLimit=s.dispatch_throttled_msg_events,
        dispatchThrottledBytesEventsByTopicLimit=s.dispatch_throttled_bytes_events,
        dispatchThrottledTimeMs=s.dispatch_throttled_time_ms,
    )


def topic_stats(t: pb.TopicStats) -> m.TopicStats:
    publishers = [
        m.PublisherStats(
            msgRateIn=p.msg_rate_in, msgThroughputIn=p.msg_throughput_in,
            averageMsgSize=_average(p.msg_throughput_in, p.msg_rate_in), producerId=i, producerName=p.producer_name,
            connectedSince=iso_time(p.connected_since_ms), throttledTimeMs=p.throttled_time_ms,
        )
        for i, p in enumerate(t.publishers)
    ]
    return m.TopicStats(
        msgRateIn=t.msg_rate_in, msgThroughputIn=t.msg_throughput_in, msgRateOut=t.msg_rate_out,
        msgThroughputOut=t.msg_throughput_out, bytesInCounter=t.bytes_in_counter, msgInCounter=t.msg_in_counter,
        bytesOutCounter=t.bytes_out_counter, msgOutCounter=t.msg_out_counter,
        averageMsgSize=_average(t.msg_throughput_in, t.msg_rate_in), storageSize=t.storage_size,
        backlogSize=t.backlog_size, publishers=publishers,
        subscriptions={s.name: subscription_stats(s) for s in sorted(t.subscriptions, key=lambda s: s.name)},
    )


_SUMMED = ("msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter", "msgRateRedeliver", "messageAckRate",
           "msgBacklog", "backlogSize", "msgBacklogNoDelayed", "unackedMessages",
           "dispatchThrottledMsgEventsByTopicLimit", "dispatchThrottledBytesEventsByTopicLimit", "dispatchThrottledTimeMs")


def _merge(into: m.SubscriptionStats, other: m.SubscriptionStats) -> None:
    for name in _SUMMED:
        setattr(into, name, getattr(into, name) + getattr(other, name))
    into.consumers.extend(other.consumers)
    into.blockedSubscriptionOnUnackedMsgs = into.blockedSubscriptionOnUnackedMsgs and other.blockedSubscriptionOnUnackedMsgs
    into.activeConsumerName = into.activeConsumerName or other.activeConsumerName


def partitioned_stats(names: list[str], partitions: list[pb.TopicStats], per_partition: bool) -> m.PartitionedTopicStats:
    """The aggregate of ``partitions`` (the stats of partitions ``names``, in order)."""
    each = [topic_stats(t) for t in partitions]
    total = m.PartitionedTopicStats(metadata=m.PartitionedTopicMetadata(partitions=len(names)))
    for stats in each:
        for name in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter",
                     "msgInCounter", "bytesOutCounter", "msgOutCounter", "storageSize", "backlogSize"):
            setattr(total, name, getattr(total, name) + getattr(stats, name))
        total.publishers.extend(p.model_copy() for p in stats.publishers)
        for sub_name, sub in stats.subscriptions.items():
            if sub_name in total.subscriptions:
                _merge(total.subscriptions[sub_name], sub)
            else:
                total.subscriptions[sub_name] = sub.model_copy(deep=True)
    total.averageMsgSize = _average(total.msgThroughputIn, total.msgRateIn)
    if per_partition:
        total.partitions = dict(zip(names, each, strict=True))
    return total


def internal_stats(s: pb.InternalStats) -> m.PersistentTopicInternalStats:
    return m.PersistentTopicInternalStats(
        entriesAddedCounter=s.entries_added, numberOfEntries=s.number_of_entries, totalSize=s.total_size,
        currentLedgerEntries=s.current_ledger_entries, currentLedgerSize=s.current_ledger_size,
        lastLedgerCreatedTimestamp=iso_time(s.last_ledger_created_ms), pendingAddEntriesCount=s.pending_adds,
        lastConfirmedEntry=s.last_confirmed_entry, state=s.state,
        ledgers=[m.LedgerInfo(ledgerId=i.ledger_id, entries=i.entries, size=i.size, timestamp=i.created_ms) for i in s.ledgers],
        cursors={
            c.name: m.CursorStats(
                markDeletePosition=c.mark_delete_position, readPosition=c.read_position,
                messagesConsumedCounter=c.messages_consumed, individuallyDeletedMessages=c.individually_deleted_messages,
                state=c.state, active=c.active, numberOfEntriesSinceFirstNotAckedMessage=c.entries_since_first_not_acked,
                totalNonContiguousDeletedMessagesRange=c.deleted_ranges, properties=dict(c.properties),
            )
            for c in s.cursors
        },
    )
