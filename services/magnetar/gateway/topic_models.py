"""Bodies of the persistent-topic routes, with Pulsar's JSON field names (TopicStats,
PersistentTopicInternalStats, ResetCursorData, MessageId …).

Stats carry every field Pulsar's clients commonly read; what Magnetar does not have
(offloading, replication, chunking, redelivery and expiry rates) is reported as 0 or
empty rather than left out, so scripts that read them keep working.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field

from magnetar.gateway.models import PulsarModel


class PartitionedTopicMetadata(PulsarModel):
    partitions: int = Field(description="0: not a partitioned topic")
    properties: dict[str, str] | None = None


class MessageIdData(PulsarModel):
    """Pulsar's MessageId JSON (``lastMessageId``)."""

    ledgerId: int
    entryId: int
    partitionIndex: int = -1


class ResetCursorData(PulsarModel):
    """Where to create or reset a subscription: an entry (``batchIndex`` is accepted and
    ignored: a subscription moves by whole entries)."""

    ledgerId: int
    entryId: int
    partitionIndex: int = -1
    batchIndex: int = -1
    excluded: bool = Field(
        default=False, validation_alias=AliasChoices("excluded", "isExcluded"),
        description="start after the entry instead of at it",
    )
    properties: dict[str, str] | None = Field(default=None, description="accepted, not stored")


# -- stats -----------------------------------------------------------------------
class PublisherStats(PulsarModel):
    accessMode: str = "Shared"
    msgRateIn: float = 0.0
    msgThroughputIn: float = 0.0
    averageMsgSize: float = 0.0
    chunkedMessageRate: float = 0.0
    producerId: int = 0
    producerName: str = ""
    address: str | None = None
    connectedSince: str = ""
    clientVersion: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    throttledTimeMs: int = Field(default=0, description="Magnetar: time its stream was paused by the publishRate")


class _Outflow(PulsarModel):
    """What went out to consumers (a consumer's, or a subscription's)."""

    msgRateOut: float = 0.0
    msgThroughputOut: float = 0.0
    bytesOutCounter: int = 0
    msgOutCounter: int = 0
    msgRateRedeliver: float = 0.0
    messageAckRate: float = 0.0
    chunkedMessageRate: float = 0.0


class ConsumerStats(_Outflow):
    consumerName: str = ""
    availablePermits: int = 0
    unackedMessages: int = 0
    avgMessagesPerEntry: int = 0
    blockedConsumerOnUnackedMsgs: bool = False
    address: str | None = None
    connectedSince: str = ""
    clientVersion: str | None = None
    lastAckedTimestamp: int = 0
    lastConsumedTimestamp: int = 0
    metadata: dict[str, str] = Field(default_factory=dict)


class SubscriptionStats(_Outflow):
    msgBacklog: int = 0
    backlogSize: int = 0
    msgBacklogNoDelayed: int = 0
    blockedSubscriptionOnUnackedMsgs: bool = False
    msgDelayed: int = 0
    unackedMessages: int = 0
    type: str = "Exclusive"
    activeConsumerName: str | None = None
    msgRateExpired: float = 0.0
    totalMsgExpired: int = 0
    lastExpireTimestamp: int = 0
    consumers: list[ConsumerStats] = Field(default_factory=list)
    isDurable: bool = True
    isReplicated: bool = False
    durable: bool = True
    replicated: bool = False
    allowOutOfOrderDelivery: bool = False
    nonContiguousDeletedMessagesRanges: int = 0
    subscriptionProperties: dict[str, str] = Field(default_factory=dict)
    dispatchThrottledMsgEventsByTopicLimit: int = 0
    dispatchThrottledBytesEventsByTopicLimit: int = 0
    dispatchThrottledTimeMs: int = Field(
        default=0, description="Magnetar: time its dispatcher waited for the dispatchRate with messages to send")


class TopicStats(PulsarModel):
    msgRateIn: float = 0.0
    msgThroughputIn: float = 0.0
    msgRateOut: float = 0.0
    msgThroughputOut: float = 0.0
    bytesInCounter: int = 0
    msgInCounter: int = 0
    bytesOutCounter: int = 0
    msgOutCounter: int = 0
    averageMsgSize: float = 0.0
    msgChunkPublished: bool = False
    storageSize: int = 0
    backlogSize: int = 0
    offloadedStorageSize: int = 0
    publishers: list[PublisherStats] = Field(default_factory=list)
    waitingPublishers: int = 0
    subscriptions: dict[str, SubscriptionStats] = Field(default_factory=dict)
    replication: dict[str, Any] = Field(default_factory=dict)
    nonContiguousDeletedMessagesRanges: int = 0


class PartitionedTopicStats(TopicStats):
    metadata: PartitionedTopicMetadata
    partitions: dict[str, TopicStats] = Field(default_factory=dict)


# -- internal stats ----------------------------------------------------------------
class LedgerInfo(PulsarModel):
    ledgerId: int
    entries: int
    size: int
    timestamp: int = Field(default=0, description="when the ledger was created (ms)")
    offloaded: bool = False
    underReplicated: bool = False


class CursorStats(PulsarModel):
    markDeletePosition: str
    readPosition: str
    waitingReadOp: bool = False
    pendingReadOps: int = 0
    messagesConsumedCounter: int = 0
    cursorLedger: int = Field(default=-1, description="-1: cursors are stored in ZooKeeper, not in ledgers")
    cursorLedgerLastEntry: int = -1
    individuallyDeletedMessages: str = "[]"
    lastLedgerSwitchTimestamp: str = ""
    state: str = "Open"
    active: bool = False
    numberOfEntriesSinceFirstNotAckedMessage: int = 0
    totalNonContiguousDeletedMessagesRange: int = 0
    subscriptionHavePendingRead: bool = False
    subscriptionHavePendingReplayRead: bool = False
    properties: dict[str, str] = Field(default_factory=dict)


class PersistentTopicInternalStats(PulsarModel):
    entriesAddedCounter: int
    numberOfEntries: int
    totalSize: int
    currentLedgerEntries: int
    currentLedgerSize: int
    lastLedgerCreatedTimestamp: str
    lastLedgerCreationFailureTimestamp: str | None = None
    waitingCursorsCount: int = 0
    pendingAddEntriesCount: int
    lastConfirmedEntry: str
    state: str
    ledgers: list[LedgerInfo]
    cursors: dict[str, CursorStats]
    schemaLedgers: list[LedgerInfo] = Field(default_factory=list)
