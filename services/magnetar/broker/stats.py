"""A topic's stats as the core builds them (Pulsar's ``TopicStats``, ``PublisherStats``,
``SubscriptionStats`` and ``ConsumerStats``); each door translates them to its wire.

Counters are since the topic was loaded on this broker; rates are per second over the
broker's last stats interval (``stats_interval_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.broker.subscription_type import SubscriptionType


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    consumer_name: str
    available_permits: int
    unacked_messages: int
    blocked: bool
    """Paused: it holds ``max_unacked_messages_per_consumer`` unacked messages."""
    msg_out_counter: int
    bytes_out_counter: int
    msg_rate_out: float
    msg_throughput_out: float
    connected_since_ms: int
    msg_rate_redeliver: float = 0.0
    """Messages it failed per second: nacks, ack timeouts, redeliver-all requests."""
    message_ack_rate: float = 0.0
    """Messages it acknowledged per second."""


@dataclass(frozen=True, slots=True)
class SubscriptionStats:
    name: str
    type: SubscriptionType
    backlog: int
    """Entries after the mark-delete position not acknowledged."""
    consumers: int
    unacked: int
    """Messages delivered to consumers and not acknowledged yet."""
    mark_delete_position: str
    """``ledger:entry``."""
    durable: bool
    blocked_consumers: int
    consumer_stats: list[ConsumerStats]
    msg_out_counter: int
    bytes_out_counter: int
    msg_rate_out: float
    msg_throughput_out: float
    backlog_size: int
    """Estimated bytes after the mark-delete position."""
    active_consumer: str
    """Exclusive and Failover: the consumer that gets the messages ('' without one)."""
    dispatch_throttled_time_ms: int
    """Time its dispatcher waited for the namespace's dispatchRate."""
    dispatch_throttled_msg_events: int
    dispatch_throttled_bytes_events: int
    subscription_properties: dict[str, str] = field(default_factory=dict)
    """The subscription's properties (Pulsar's subscriptionProperties)."""
    msg_drop_counter: int = 0
    """Non-persistent topics: messages dropped (no consumer with permits at publish time)."""
    msg_drop_rate: float = 0.0
    msg_rate_redeliver: float = 0.0
    """Summed over its consumers (those attached now), as Pulsar's."""
    message_ack_rate: float = 0.0
    """Summed over its consumers (those attached now), as Pulsar's."""


@dataclass(frozen=True, slots=True)
class PublisherStats:
    producer_name: str
    connected_since_ms: int
    msg_in_counter: int
    bytes_in_counter: int
    msg_rate_in: float
    msg_throughput_in: float
    throttled_time_ms: int
    """Time this producer's stream was paused by the namespace's publishRate."""


@dataclass(frozen=True, slots=True)
class TopicStats:
    topic: str
    msg_in_counter: int
    bytes_in_counter: int
    msg_out_counter: int
    bytes_out_counter: int
    entries: int
    storage_size: int
    ledgers: int
    msg_rate_in: float
    msg_throughput_in: float
    msg_rate_out: float
    msg_throughput_out: float
    backlog_size: int
    """Estimated bytes after the slowest durable subscription's mark-delete position."""
    publishers: list[PublisherStats] = field(default_factory=list)
    subscriptions: list[SubscriptionStats] = field(default_factory=list)
    msg_drop_counter: int = 0
    """Non-persistent topics: messages dropped over its subscriptions (Pulsar's msgDropRate, summed)."""
    msg_drop_rate: float = 0.0

    @property
    def producers(self) -> int:
        return len(self.publishers)
