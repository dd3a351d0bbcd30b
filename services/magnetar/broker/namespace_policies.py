"""A namespace's policies, as Pulsar's: retention, message TTL, backlog quotas,
deduplication, delayed delivery, publish and dispatch rates, plus Magnetar's dead-letter defaults. Typed values,
Pulsar's rules for setting them, and their keys in the namespace's policies document
(:mod:`magnetar.metadata.tenants`).

Stored keys (absent: not set, the broker's default applies): ``retention``
(``retention_time_minutes``, ``retention_size_mb``), ``message_ttl_seconds``,
``backlog_quotas`` (``{"destination_storage": {"limit_size", "limit_time", "policy"}}``),
``deduplication``, ``delayed_delivery`` (``active``, ``tick_time_ms``,
``max_delivery_delay_ms``), ``publish_rate`` (``msg_rate``, ``byte_rate``),
``dispatch_rate`` (``msg_rate``, ``byte_rate``, ``relative_to_publish_rate``,
``period_s``), ``dead_letter_policy``, ``schema_compatibility_strategy`` (Pulsar's
strategy name), ``is_allow_auto_update_schema``, ``schema_validation_enforced`` and ``persistence``
(``bookkeeper_ensemble``, ``bookkeeper_write_quorum``, ``bookkeeper_ack_quorum``,
``managed_ledger_max_mark_delete_rate``), ``compaction_threshold`` (bytes) and
``auto_topic_creation`` (``allow_auto_topic_creation``, ``topic_type``,
``default_num_partitions``). Other keys of the document are
kept as they are.
strategy name), ``is_allow_auto_update_schema``, ``schema_validation_enforced`` and
``inactive_topic_policies`` (``delete_mode``, ``max_inactive_duration_s``,
``delete_while_inactive``). Other keys of the document are kept as they are.

Every change is one compare-and-set of the document whose check runs on the document
read, so a backlog quota and a retention set at the same time cannot both pass the check
against the other's old value. A refused change writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import Enum, StrEnum
from typing import Any, Protocol, TypeVar

from magnetar.broker.deadletter import DEAD_LETTER_KEY, DeadLetterDefaults
from magnetar.broker.retention import RetentionPolicy
from magnetar.broker.schema.compatibility import SchemaCompatibilityStrategy
from magnetar.common.errors import InvalidArgument, PreconditionFailed
from magnetar.common.names import NamespaceName
from magnetar.common.policies import effective
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.metadata.errors import CorruptMetadata
from magnetar.metadata.tenants import RETENTION_KEY, validate_retention

T = TypeVar("T")
TTL_KEY = "message_ttl_seconds"
QUOTAS_KEY = "backlog_quotas"
DEDUPLICATION_KEY = "deduplication"
DELAYED_KEY = "delayed_delivery"
PUBLISH_RATE_KEY = "publish_rate"
DISPATCH_RATE_KEY = "dispatch_rate"
SCHEMA_STRATEGY_KEY = "schema_compatibility_strategy"
SCHEMA_AUTO_UPDATE_KEY = "is_allow_auto_update_schema"
SCHEMA_VALIDATION_KEY = "schema_validation_enforced"
PERSISTENCE_KEY = "persistence"
COMPACTION_THRESHOLD_KEY = "compaction_threshold"
AUTO_TOPIC_CREATION_KEY = "auto_topic_creation"
TOPIC_TYPES = ("non-partitioned", "partitioned")
"""Pulsar's TopicType names."""
MAX_PRODUCERS_KEY = "max_producers_per_topic"
MAX_CONSUMERS_KEY = "max_consumers_per_topic"
INACTIVE_TOPIC_KEY = "inactive_topic_policies"
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_MB = 1024 * 1024

RETENTION_BELOW_QUOTA = "Retention Quota must exceed configured backlog quota for namespace."
QUOTA_ABOVE_RETENTION = (
    "Backlog Quota exceeds configured retention quota for namespace. Please increase retention quota and retry"
)
SINGLE_ZERO_LIMIT = (
    "Invalid retention policy: Setting a single time or size limit to 0 is invalid when one of the limits has a "
    "non-zero value. Use the value of -1 instead of 0 to ignore a specific limit. To disable retention both limits "
    "must be set to 0."
)


class PolicyKind(Enum):
    RETENTION = "retention"
    MESSAGE_TTL = "messageTTL"
    BACKLOG_QUOTA = "backlogQuota"
    DEDUPLICATION = "deduplication"
    DELAYED_DELIVERY = "delayedDelivery"
    DEAD_LETTER = "deadLetterPolicy"
    PUBLISH_RATE = "publishRate"
    DISPATCH_RATE = "dispatchRate"
    SCHEMA_COMPATIBILITY_STRATEGY = "schemaCompatibilityStrategy"
    IS_ALLOW_AUTO_UPDATE_SCHEMA = "isAllowAutoUpdateSchema"
    SCHEMA_VALIDATION_ENFORCED = "schemaValidationEnforced"
    PERSISTENCE = "persistence"
    COMPACTION_THRESHOLD = "compactionThreshold"
    AUTO_TOPIC_CREATION = "autoTopicCreation"
    MAX_PRODUCERS = "maxProducersPerTopic"
    MAX_CONSUMERS = "maxConsumersPerTopic"
    INACTIVE_TOPIC = "inactiveTopicPolicies"


class QuotaType(StrEnum):
    """Pulsar's BacklogQuotaType."""

    DESTINATION_STORAGE = "destination_storage"
    MESSAGE_AGE = "message_age"


class QuotaPolicy(StrEnum):
    """Pulsar's BacklogQuota.RetentionPolicy: what happens over quota."""

    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"


@dataclass(frozen=True)
class BacklogQuota:
    """Pulsar's BacklogQuota: ``limit_size`` bytes of backlog (destination_storage) or
    ``limit_time`` seconds of age of the oldest unacknowledged message (message_age);
    -1: no limit."""

    limit_size: int = -1
    limit_time: int = -1
    policy: QuotaPolicy = QuotaPolicy.PRODUCER_REQUEST_HOLD

    @property
    def blocks_producers(self) -> bool:
        """Over quota, producers are held (producer_request_hold: their sends wait) or
        refused (producer_exception); else the slowest subscriptions are moved forward."""
        return self.policy is not QuotaPolicy.CONSUMER_BACKLOG_EVICTION


@dataclass(frozen=True)
class DelayedDelivery:
    """Pulsar's DelayedDeliveryPolicies (``tickTime``, ``maxDeliveryDelayInMillis``)."""

    active: bool = True
    tick_time_ms: int = 1000
    """Stored and shown; Magnetar's dispatchers use exact timers, not a tick."""
    max_delivery_delay_ms: int = 0
    """A delayed message due later than this after its publish time is refused (0: no limit)."""


@dataclass(frozen=True)
class PublishRate:
    """Pulsar's PublishRate: per topic partition, messages and bytes a second; -1 (or 0):
    no limit."""

    msg_rate: int = -1
    """publishThrottlingRateInMsg"""
    byte_rate: int = -1
    """publishThrottlingRateInByte"""


@dataclass(frozen=True)
class DispatchRate:
    """Pulsar's DispatchRate: per topic partition (its subscriptions share it), messages
    and bytes dispatched per ``period_s`` seconds; -1 (or 0): no limit."""

    msg_rate: int = -1
    """dispatchThrottlingRateInMsg"""
    byte_rate: int = -1
    """dispatchThrottlingRateInByte"""
    relative_to_publish_rate: bool = False
    """The limits are added to the topic's publish rate of the last stats interval."""
    period_s: int = 1
    """ratePeriodInSecond"""


_INT32_MAX_S = 2**31 - 1


class InactiveTopicDeleteMode(StrEnum):
    DELETE_WHEN_NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
    DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP = "delete_when_subscriptions_caught_up"


@dataclass(frozen=True)
class InactiveTopicPolicies:
    """Pulsar's InactiveTopicPolicies (``inactiveTopicDeleteMode``,
    ``maxInactiveDurationSeconds``, ``deleteWhileInactive``)."""

    delete_mode: InactiveTopicDeleteMode = InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS
    max_inactive_duration_s: int = 60
    delete_while_inactive: bool = False

    def checked(self) -> InactiveTopicPolicies:
        """Raises: InvalidArgument: an unknown mode, a duration not in 1..2**31-1 s."""
        try:
            mode = InactiveTopicDeleteMode(self.delete_mode)
        except ValueError:
            raise InvalidArgument(
                f"unknown inactiveTopicDeleteMode {self.delete_mode!r}: "
                f"{' or '.join(m.value for m in InactiveTopicDeleteMode)}"
            ) from None
        duration = self.max_inactive_duration_s
        if isinstance(duration, bool) or not isinstance(duration, int) or not 1 <= duration <= _INT32_MAX_S:
            raise InvalidArgument(f"maxInactiveDurationSeconds must be 1 to {_INT32_MAX_S}, not {duration!r}")
        if not isinstance(self.delete_while_inactive, bool):
            raise InvalidArgument(f"deleteWhileInactive must be true or false, not {self.delete_while_inactive!r}")
        return InactiveTopicPolicies(mode, duration, self.delete_while_inactive)

    def to_document(self) -> dict[str, object]:
        return {"delete_mode": str(self.delete_mode), "max_inactive_duration_s": self.max_inactive_duration_s,
                "delete_while_inactive": self.delete_while_inactive}


@dataclass(frozen=True)
class PersistencePolicies:
    """Pulsar's PersistencePolicies: the quorums of the new ledgers of a namespace's
    topics (a topic's open ledger keeps its own until it rolls over)."""

    bookkeeper_ensemble: int = 2
    bookkeeper_write_quorum: int = 2
    bookkeeper_ack_quorum: int = 2
    managed_ledger_max_mark_delete_rate: float = 0.0
    """Cursor positions written to ZooKeeper per second at most (0: the broker's
    ``cursor_persist_interval_s``)."""


@dataclass(frozen=True)
class AutoTopicCreation:
    """Pulsar's AutoTopicCreationOverride: whether a topic is created on first use by a
    producer or consumer, and as what (a partitioned topic: with
    ``default_num_partitions`` partitions, made when a client asks its partitioned
    metadata)."""

    allow_auto_topic_creation: bool
    topic_type: str = "non-partitioned"
    default_num_partitions: int | None = None

    @property
    def partitioned(self) -> bool:
        return self.allow_auto_topic_creation and self.topic_type == "partitioned"


@dataclass(frozen=True)
class NamespacePolicies:
    """What a namespace sets (None / empty: not set; the broker's default applies)."""

    retention: RetentionPolicy | None = None
    message_ttl_s: int | None = None
    """0: messages never expire."""
    backlog_quotas: Mapping[QuotaType, BacklogQuota] = field(default_factory=dict)
    deduplication: bool | None = None
    delayed_delivery: DelayedDelivery | None = None
    dead_letter: DeadLetterDefaults | None = None
    publish_rate: PublishRate | None = None
    dispatch_rate: DispatchRate | None = None
    schema_compatibility_strategy: SchemaCompatibilityStrategy | None = None
    """None (or UNDEFINED, Pulsar's default): the broker's ``schema_compatibility_strategy``."""
    is_allow_auto_update_schema: bool | None = None
    """None: true (producers may register new compatible versions)."""
    schema_validation_enforced: bool | None = None
    """None: false (a producer without a schema may write to a topic with one)."""
    persistence: PersistencePolicies | None = None
    """None: the broker's ``ensemble_size``, ``write_quorum`` and ``ack_quorum``."""
    compaction_threshold: int | None = None
    """Bytes not yet compacted past which the policy task compacts a topic (None, 0: never)."""
    auto_topic_creation: AutoTopicCreation | None = None
    """None: the broker's ``allow_auto_topic_creation``, ``allow_auto_topic_creation_type``
    and ``default_num_partitions``."""
    max_producers: int | None = None
    """maxProducersPerTopic (a topic's: maxProducers); None or 0: no limit."""
    max_consumers: int | None = None
    """maxConsumersPerTopic (a topic's: maxConsumers); None or 0: no limit."""
    inactive_topic_policies: InactiveTopicPolicies | None = None
    """None: the broker's ``delete_inactive_topics_*`` settings."""

    def producers_full(self, producers: int) -> bool:
        """A topic with ``producers`` may take no more (maxProducers; None or 0: no limit)."""
        return bool(self.max_producers) and producers >= (self.max_producers or 0)

    def consumers_full(self, consumers: int) -> bool:
        """A topic with ``consumers`` (over all its subscriptions) may take no more."""
        return bool(self.max_consumers) and consumers >= (self.max_consumers or 0)

    @property
    def allow_auto_update_schema(self) -> bool:
        return effective(self.is_allow_auto_update_schema, default=True)

    @property
    def validation_enforced(self) -> bool:
        return effective(self.schema_validation_enforced, default=False)

    def quota(self, kind: QuotaType) -> BacklogQuota | None:
        return self.backlog_quotas.get(kind)

    @property
    def delayed_delivery_active(self) -> bool:
        return self.delayed_delivery is None or self.delayed_delivery.active

    @property
    def max_delivery_delay_ms(self) -> int:
        return 0 if self.delayed_delivery is None else self.delayed_delivery.max_delivery_delay_ms


def managed_ledger_config(base: ManagedLedgerConfig, policies: NamespacePolicies) -> ManagedLedgerConfig:
    """The broker's managed-ledger settings ``base`` with the namespace's persistence
    policies: the quorums of new ledgers and, for a mark-delete rate, the cursor persist
    interval (one write per 1/rate seconds at most)."""
    p = policies.persistence
    if p is None:
        return base
    interval = base.cursor_persist_interval_s
    if p.managed_ledger_max_mark_delete_rate > 0:
        interval = 1.0 / p.managed_ledger_max_mark_delete_rate
    return replace(base, ensemble_size=p.bookkeeper_ensemble, write_quorum=p.bookkeeper_write_quorum,
                   ack_quorum=p.bookkeeper_ack_quorum, cursor_persist_interval_s=interval)
def overlay(topic: NamespacePolicies, namespace: NamespacePolicies) -> NamespacePolicies:
    """What applies to a topic: each policy the topic sets over its namespace's, field by
    field (backlog quotas type by type), as Pulsar's; what neither sets stays unset (the
    broker's default)."""
    changes: dict[str, Any] = {
        rule.attr: effective(getattr(topic, rule.attr), getattr(namespace, rule.attr), default=None)
        for kind, rule in RULES.items() if kind is not PolicyKind.BACKLOG_QUOTA
    }
    return replace(namespace, backlog_quotas={**namespace.backlog_quotas, **topic.backlog_quotas}, **changes)


# -- Pulsar's rules -------------------------------------------------------------------
def _is_int(value: object, low: int, high: int = _INT64_MAX) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_retention(retention: RetentionPolicy) -> RetentionPolicy:
    """Raises: InvalidArgument with Pulsar's reason (a limit below -1, or one limit 0
    and the other not)."""
    size, time = retention.retention_size_mb, retention.retention_time_minutes
    if not _is_int(size, -1):
        raise InvalidArgument("Invalid retention policy: size limit must be >= -1")
    if not _is_int(time, -1, _INT32_MAX):
        raise InvalidArgument("Invalid retention policy: time limit must be >= -1")
    if (time == 0) != (size == 0):
        raise InvalidArgument(SINGLE_ZERO_LIMIT)
    return retention


def check_message_ttl(seconds: object) -> int:
    """Raises: PreconditionFailed (Pulsar's 412) below 0 or not a 32-bit integer."""
    if not _is_int(seconds, 0, _INT32_MAX):
        raise PreconditionFailed("Invalid value for message TTL, message TTL must >= 0")
    assert isinstance(seconds, int)
    return seconds


def check_backlog_quota(quota: BacklogQuota) -> BacklogQuota:
    """Raises: InvalidArgument: a limit below -1 or an unknown policy."""
    if not _is_int(quota.limit_size, -1):
        raise InvalidArgument(f"Invalid backlog quota: limitSize must be >= -1, got {quota.limit_size!r}")
    if not _is_int(quota.limit_time, -1, _INT32_MAX):
        raise InvalidArgument(f"Invalid backlog quota: limitTime must be >= -1, got {quota.limit_time!r}")
    if not isinstance(quota.policy, QuotaPolicy):
        raise InvalidArgument(f"Invalid backlog quota policy {quota.policy!r}")
    return quota


def check_delayed_delivery(policy: DelayedDelivery) -> DelayedDelivery:
    """Raises: InvalidArgument: a negative tick or maximum delay."""
    if not isinstance(policy.active, bool):
        raise InvalidArgument(f"delayed delivery 'active' is a boolean, not {policy.active!r}")
    if not _is_int(policy.tick_time_ms, 0):
        raise InvalidArgument(f"delayed delivery tickTime must be >= 0, got {policy.tick_time_ms!r}")
    if not _is_int(policy.max_delivery_delay_ms, 0):
        raise InvalidArgument(f"maxDeliveryDelayInMillis must be >= 0, got {policy.max_delivery_delay_ms!r}")
    return policy


def check_limit(kind: PolicyKind) -> Callable[[object, PolicyKind], int]:
    """Pulsar's check of maxProducers / maxConsumers: a 32-bit count >= 0 (0: no limit)."""
    what = "maxProducers" if kind is PolicyKind.MAX_PRODUCERS else "maxConsumers"

    def check(value: object, _kind: PolicyKind) -> int:
        if not _is_int(value, 0, _INT32_MAX):
            raise PreconditionFailed(f"{what} must be 0 or more")
        assert isinstance(value, int)
        return value

    return check


def check_publish_rate(rate: PublishRate) -> PublishRate:
    """Raises: InvalidArgument: a limit below -1 or out of Pulsar's range (int32 messages,
    int64 bytes)."""
    if not _is_int(rate.msg_rate, -1, _INT32_MAX):
        raise InvalidArgument(f"publishThrottlingRateInMsg must be -1 (no limit) or a 32-bit count >= 0, got {rate.msg_rate!r}")
    if not _is_int(rate.byte_rate, -1):
        raise InvalidArgument(f"publishThrottlingRateInByte must be -1 (no limit) or >= 0, got {rate.byte_rate!r}")
    return rate


def check_dispatch_rate(rate: DispatchRate) -> DispatchRate:
    """Raises: InvalidArgument: a limit below -1, a period below 1 s, a flag not a bool."""
    if not _is_int(rate.msg_rate, -1, _INT32_MAX):
        raise InvalidArgument(f"dispatchThrottlingRateInMsg must be -1 (no limit) or a 32-bit count >= 0, got {rate.msg_rate!r}")
    if not _is_int(rate.byte_rate, -1):
        raise InvalidArgument(f"dispatchThrottlingRateInByte must be -1 (no limit) or >= 0, got {rate.byte_rate!r}")
    if not _is_int(rate.period_s, 1, _INT32_MAX):
        raise InvalidArgument(f"ratePeriodInSecond must be at least 1, got {rate.period_s!r}")
    if not isinstance(rate.relative_to_publish_rate, bool):
        raise InvalidArgument(f"relativeToPublishRate is a boolean, not {rate.relative_to_publish_rate!r}")
    return rate


def check_persistence(policy: PersistencePolicies) -> PersistencePolicies:
    """Pulsar's rule: ensemble >= write quorum >= ack quorum >= 1; a mark-delete rate >= 0.

    Raises: InvalidArgument (Pulsar's 400) with Pulsar's reason.
    """
    e, w, a = policy.bookkeeper_ensemble, policy.bookkeeper_write_quorum, policy.bookkeeper_ack_quorum
    if not all(_is_int(v, 1, _INT32_MAX) for v in (e, w, a)) or not e >= w >= a:
        raise InvalidArgument(f"Bookkeeper Ensemble ({e}) >= WriteQuorum ({w}) >= AckQuorum ({a}) >= 1 must hold")
    rate = policy.managed_ledger_max_mark_delete_rate
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < float("inf"):
        raise InvalidArgument(f"managedLedgerMaxMarkDeleteRate must be >= 0, got {rate!r}")
    return replace(policy, managed_ledger_max_mark_delete_rate=float(rate))


def check_compaction_threshold(threshold: object) -> int:
    """Raises: PreconditionFailed (Pulsar's 412) below 0 or not a 64-bit integer."""
    if not _is_int(threshold, 0):
        raise PreconditionFailed(f"compactionThreshold must be 0 or more, got {threshold!r}")
    assert isinstance(threshold, int)
    return threshold


def check_auto_topic_creation(policy: AutoTopicCreation) -> AutoTopicCreation:
    """Pulsar's AutoTopicCreationOverride rules (checked when creation is allowed).

    Raises: InvalidArgument (Pulsar's 400) with Pulsar's reason.
    """
    if not isinstance(policy.allow_auto_topic_creation, bool):
        raise InvalidArgument(f"allowAutoTopicCreation is a boolean, not {policy.allow_auto_topic_creation!r}")
    if not policy.allow_auto_topic_creation:
        return policy
    partitions = policy.default_num_partitions
    problem = None
    if policy.topic_type not in TOPIC_TYPES:
        problem = "Unknown topic type."
    elif policy.topic_type == "partitioned" and partitions is None:
        problem = "[defaultNumPartitions] cannot be null when the type is partitioned."
    elif policy.topic_type == "partitioned" and not _is_int(partitions, 1, _INT32_MAX):
        problem = "[defaultNumPartitions] cannot be less than 1 for partition type."
    elif policy.topic_type == "non-partitioned" and partitions is not None:
        problem = "[defaultNumPartitions] is not allowed to be set when the type is non-partition."
    if problem is not None:
        raise InvalidArgument(f"Invalid configuration for autoTopicCreationOverride. the detail is {problem}")
    return policy


def auto_topic_creation(
    policies: NamespacePolicies, allow: bool, topic_type: str, default_num_partitions: int,
) -> AutoTopicCreation:
    """What applies to a namespace's new topics: its override, else the broker's settings."""
    broker = AutoTopicCreation(
        allow, topic_type, default_num_partitions if topic_type == "partitioned" else None)
    return effective(policies.auto_topic_creation, default=broker)


def quota_within_retention(quota: BacklogQuota | None, retention: RetentionPolicy | None) -> bool:
    """Pulsar's check of a destination_storage quota against retention: a positive
    retention limit must exceed the quota's (size in bytes, time in seconds)."""
    if quota is None or retention is None:
        return True
    size_mb, minutes = retention.retention_size_mb, retention.retention_time_minutes
    if size_mb > 0 and quota.limit_size >= size_mb * _MB:
        return False
    return not (minutes > 0 and quota.limit_time >= minutes * 60)


@dataclass(frozen=True)
class PolicyRule:
    """How the core holds one policy: its field of :class:`NamespacePolicies` and the check
    of a value (Pulsar's rules; it returns the value to store)."""

    attr: str
    check: Callable[[object, PolicyKind], object]


def _of(cls: type, check: Callable[[Any], object] = lambda v: v) -> Callable[[object, PolicyKind], object]:
    return lambda value, kind: check(_typed(value, cls, kind))


def _dead_letter(value: object, kind: PolicyKind) -> DeadLetterDefaults | None:
    defaults = _typed(value, DeadLetterDefaults, kind)
    defaults.check()
    return defaults if defaults.to_document() else None


RULES: dict[PolicyKind, PolicyRule] = {
    PolicyKind.RETENTION: PolicyRule("retention", _of(RetentionPolicy, check_retention)),
    PolicyKind.MESSAGE_TTL: PolicyRule("message_ttl_s", lambda value, kind: check_message_ttl(value)),
    PolicyKind.BACKLOG_QUOTA: PolicyRule("backlog_quotas", _of(BacklogQuota, check_backlog_quota)),
    PolicyKind.DEDUPLICATION: PolicyRule("deduplication", _of(bool)),
    PolicyKind.DELAYED_DELIVERY: PolicyRule("delayed_delivery", _of(DelayedDelivery, check_delayed_delivery)),
    PolicyKind.DEAD_LETTER: PolicyRule("dead_letter", _dead_letter),
    PolicyKind.PUBLISH_RATE: PolicyRule("publish_rate", _of(PublishRate, check_publish_rate)),
    PolicyKind.DISPATCH_RATE: PolicyRule("dispatch_rate", _of(DispatchRate, check_dispatch_rate)),
    PolicyKind.SCHEMA_COMPATIBILITY_STRATEGY: PolicyRule(
        "schema_compatibility_strategy", lambda value, kind: SchemaCompatibilityStrategy.parse(value)),
    PolicyKind.IS_ALLOW_AUTO_UPDATE_SCHEMA: PolicyRule("is_allow_auto_update_schema", _of(bool)),
    PolicyKind.SCHEMA_VALIDATION_ENFORCED: PolicyRule("schema_validation_enforced", _of(bool)),
    PolicyKind.PERSISTENCE: PolicyRule("persistence", _of(PersistencePolicies, check_persistence)),
    PolicyKind.AUTO_TOPIC_CREATION: PolicyRule(
        "auto_topic_creation", _of(AutoTopicCreation, check_auto_topic_creation)),
    PolicyKind.COMPACTION_THRESHOLD: PolicyRule(
        "compaction_threshold", lambda value, kind: check_compaction_threshold(value)),
    PolicyKind.MAX_PRODUCERS: PolicyRule("max_producers", check_limit(PolicyKind.MAX_PRODUCERS)),
    PolicyKind.MAX_CONSUMERS: PolicyRule("max_consumers", check_limit(PolicyKind.MAX_CONSUMERS)),
    PolicyKind.INACTIVE_TOPIC: PolicyRule(
        "inactive_topic_policies", _of(InactiveTopicPolicies, InactiveTopicPolicies.checked)),
}
"""Each policy kind (one per entry of :data:`magnetar.common.policies.CATALOGUE`) as the
core holds and checks it. A retention and a destination_storage backlog quota are also
checked against each other, and backlog quotas are kept by type."""


def with_policy(
    policies: NamespacePolicies, kind: PolicyKind, value: object, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
) -> NamespacePolicies:
    """``policies`` with ``kind`` set to ``value`` (RetentionPolicy, int seconds,
    BacklogQuota, bool, DelayedDelivery, PublishRate, DispatchRate, DeadLetterDefaults,
    or a SchemaCompatibilityStrategy or its name), checked by Pulsar's rules.

    Raises:
        InvalidArgument: a bad value (400 in Pulsar's REST API).
        PreconditionFailed: a bad TTL, or a retention / destination_storage quota that
            conflicts with the other one (412).
    """
    rule = RULES[kind]
    checked_value = rule.check(value, kind)
    if kind is PolicyKind.RETENTION:
        assert isinstance(checked_value, RetentionPolicy)
        if not quota_within_retention(policies.quota(QuotaType.DESTINATION_STORAGE), checked_value):
            raise PreconditionFailed(RETENTION_BELOW_QUOTA)
    elif kind is PolicyKind.BACKLOG_QUOTA:
        assert isinstance(checked_value, BacklogQuota)
        if quota_type is QuotaType.DESTINATION_STORAGE and not quota_within_retention(checked_value, policies.retention):
            raise PreconditionFailed(QUOTA_ABOVE_RETENTION)
        checked_value = {**policies.backlog_quotas, QuotaType(quota_type): checked_value}
    changes: dict[str, Any] = {rule.attr: checked_value}
    return replace(policies, **changes)


def without_policy(
    policies: NamespacePolicies, kind: PolicyKind, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
) -> NamespacePolicies:
    """``policies`` with ``kind`` (one quota type for BACKLOG_QUOTA) not set."""
    if kind is PolicyKind.BACKLOG_QUOTA:
        return replace(policies, backlog_quotas={k: v for k, v in policies.backlog_quotas.items() if k != quota_type})
    changes: dict[str, Any] = {RULES[kind].attr: None}
    return replace(policies, **changes)


def checked(policies: NamespacePolicies) -> NamespacePolicies:
    """``policies`` if every policy it sets passes :func:`with_policy` (retention first).

    Raises: as :func:`with_policy`.
    """
    out = NamespacePolicies()
    for kind, rule in RULES.items():
        if kind is PolicyKind.BACKLOG_QUOTA:
            for quota_type, quota in policies.backlog_quotas.items():
                out = with_policy(out, kind, quota, quota_type)
            continue
        value = getattr(policies, rule.attr)
        if value is not None:
            out = with_policy(out, kind, value)
    return out


def _typed(value: object, cls: type[T], kind: PolicyKind) -> T:
    if not isinstance(value, cls) or (cls is not bool and isinstance(value, bool)):
        raise InvalidArgument(f"the {kind.value} policy is a {cls.__name__}, not {value!r}")
    return value


# -- the stored document ----------------------------------------------------------------
def from_document(doc: Mapping[str, Any], where: str = "") -> NamespacePolicies:
    """The policies a namespace's document sets (values stored by older code, which the
    rules of :func:`with_policy` would refuse now, are taken as they are).

    Raises:
        CorruptMetadata: a value that is not of its type.
    """
    try:
        retention = doc.get(RETENTION_KEY)
        quotas = doc.get(QUOTAS_KEY) or {}
        delayed = doc.get(DELAYED_KEY)
        dead_letter = doc.get(DEAD_LETTER_KEY)
        publish_rate, dispatch_rate = doc.get(PUBLISH_RATE_KEY), doc.get(DISPATCH_RATE_KEY)
        persistence = doc.get(PERSISTENCE_KEY)
        auto_creation = doc.get(AUTO_TOPIC_CREATION_KEY)
        inactive = doc.get(INACTIVE_TOPIC_KEY)
        policies = NamespacePolicies(
            retention=None if retention is None else RetentionPolicy(
                *validate_retention(retention["retention_time_minutes"], retention["retention_size_mb"])
            ),
            message_ttl_s=None if doc.get(TTL_KEY) is None else check_message_ttl(doc[TTL_KEY]),
            backlog_quotas={
                QuotaType(t): check_backlog_quota(BacklogQuota(q["limit_size"], q["limit_time"], QuotaPolicy(q["policy"])))
                for t, q in quotas.items()
            },
            deduplication=doc.get(DEDUPLICATION_KEY),
            delayed_delivery=None if delayed is None else check_delayed_delivery(DelayedDelivery(**delayed)),
            dead_letter=None if dead_letter is None else DeadLetterDefaults.from_document(dead_letter),
            publish_rate=None if publish_rate is None else check_publish_rate(PublishRate(**publish_rate)),
            dispatch_rate=None if dispatch_rate is None else check_dispatch_rate(DispatchRate(**dispatch_rate)),
            schema_compatibility_strategy=None if doc.get(SCHEMA_STRATEGY_KEY) is None
            else SchemaCompatibilityStrategy.parse(doc[SCHEMA_STRATEGY_KEY]),
            is_allow_auto_update_schema=doc.get(SCHEMA_AUTO_UPDATE_KEY),
            schema_validation_enforced=doc.get(SCHEMA_VALIDATION_KEY),
            persistence=None if persistence is None else check_persistence(PersistencePolicies(**persistence)),
            auto_topic_creation=None if auto_creation is None
            else check_auto_topic_creation(AutoTopicCreation(**auto_creation)),
            compaction_threshold=None if doc.get(COMPACTION_THRESHOLD_KEY) is None
            else check_compaction_threshold(doc[COMPACTION_THRESHOLD_KEY]),
            max_producers=None if doc.get(MAX_PRODUCERS_KEY) is None
            else check_limit(PolicyKind.MAX_PRODUCERS)(doc[MAX_PRODUCERS_KEY], PolicyKind.MAX_PRODUCERS),
            max_consumers=None if doc.get(MAX_CONSUMERS_KEY) is None
            else check_limit(PolicyKind.MAX_CONSUMERS)(doc[MAX_CONSUMERS_KEY], PolicyKind.MAX_CONSUMERS),
            inactive_topic_policies=None if inactive is None else InactiveTopicPolicies(**inactive).checked(),
        )
        if policies.deduplication is not None:
            _typed(policies.deduplication, bool, PolicyKind.DEDUPLICATION)
        if policies.is_allow_auto_update_schema is not None:
            _typed(policies.is_allow_auto_update_schema, bool, PolicyKind.IS_ALLOW_AUTO_UPDATE_SCHEMA)
        if policies.schema_validation_enforced is not None:
            _typed(policies.schema_validation_enforced, bool, PolicyKind.SCHEMA_VALIDATION_ENFORCED)
    except (TypeError, KeyError, ValueError, AttributeError, InvalidArgument, PreconditionFailed) as exc:
        raise CorruptMetadata(f"namespace {where or '?'} has invalid policies: {exc}") from exc
    return policies


def to_document(policies: NamespacePolicies) -> dict[str, Any]:
    """Every key this module owns, None for those not set (removed from the document)."""
    retention, delayed, dead_letter = policies.retention, policies.delayed_delivery, policies.dead_letter
    return {
        RETENTION_KEY: None if retention is None else {
            "retention_time_minutes": retention.retention_time_minutes, "retention_size_mb": retention.retention_size_mb,
        },
        TTL_KEY: policies.message_ttl_s,
        QUOTAS_KEY: {
            str(t): {"limit_size": q.limit_size, "limit_time": q.limit_time, "policy": str(q.policy)}
            for t, q in policies.backlog_quotas.items()
        } or None,
        DEDUPLICATION_KEY: policies.deduplication,
        DELAYED_KEY: None if delayed is None else {
            "active": delayed.active, "tick_time_ms": delayed.tick_time_ms,
            "max_delivery_delay_ms": delayed.max_delivery_delay_ms,
        },
        DEAD_LETTER_KEY: None if dead_letter is None else dead_letter.to_document() or None,
        PUBLISH_RATE_KEY: None if policies.publish_rate is None else asdict(policies.publish_rate),
        DISPATCH_RATE_KEY: None if policies.dispatch_rate is None else asdict(policies.dispatch_rate),
        SCHEMA_STRATEGY_KEY: None if policies.schema_compatibility_strategy is None
        else policies.schema_compatibility_strategy.value,
        SCHEMA_AUTO_UPDATE_KEY: policies.is_allow_auto_update_schema,
        SCHEMA_VALIDATION_KEY: policies.schema_validation_enforced,
        PERSISTENCE_KEY: None if policies.persistence is None else asdict(policies.persistence),
        COMPACTION_THRESHOLD_KEY: policies.compaction_threshold,
        AUTO_TOPIC_CREATION_KEY: None if policies.auto_topic_creation is None else asdict(policies.auto_topic_creation),
        MAX_PRODUCERS_KEY: policies.max_producers,
        MAX_CONSUMERS_KEY: policies.max_consumers,
        INACTIVE_TOPIC_KEY: None if policies.inactive_topic_policies is None
        else policies.inactive_topic_policies.to_document(),
    }


def merged(doc: Mapping[str, Any], policies: NamespacePolicies) -> dict[str, Any]:
    """``doc`` with this module's keys replaced by ``policies``' (others kept)."""
    out = dict(doc)
    for key, value in to_document(policies).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


# -- reading and changing a namespace's policies ----------------------------------------
class PolicyDocuments(Protocol):
    """Where the documents are (``ZkTenantStore``)."""

    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]: ...

    async def update_policies(
        self, tenant: str, namespace: str, fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]: ...

    async def create_namespace(self, tenant: str, namespace: str, policies: Mapping[str, Any] | None = None) -> None: ...


class NamespacePolicyAdmin:
    """Read, set and remove a namespace's policies; ``on_change(namespace, policies)``
    hears of every change made here (the broker applies it to its topics)."""

    def __init__(
        self, store: PolicyDocuments, on_change: Callable[[str, NamespacePolicies], None] | None = None,
    ) -> None:
        self._store = store
        self.on_change = on_change

    async def get(self, namespace: str) -> NamespacePolicies:
        """Raises: InvalidArgument (a bad name), NamespaceNotFound, CorruptMetadata."""
        ns = NamespaceName.parse(namespace)
        return from_document(await self._store.get_policies(ns.tenant, ns.namespace), str(ns))

    async def create_namespace(
        self, namespace: str, policies: NamespacePolicies, extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Create the namespace with ``policies`` (checked first: nothing is created when
        one is refused) and the document keys other modules own in ``extra`` (its
        permissions, replication clusters), in one write.

        Raises: as :func:`with_policy`; TenantNotFound; AlreadyExists.
        """
        ns = NamespaceName.parse(namespace)
        await self._store.create_namespace(ns.tenant, ns.namespace, {**(extra or {}), **merged({}, checked(policies))})

    async def set(
        self, namespace: str, kind: PolicyKind, value: object, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
    ) -> NamespacePolicies:
        """Set one policy (see :func:`with_policy`); returns the policies as written.

        Raises: as :func:`with_policy`; NamespaceNotFound.
        """
        return await self._change(namespace, lambda p: with_policy(p, kind, value, quota_type))

    async def remove(
        self, namespace: str, kind: PolicyKind, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
    ) -> NamespacePolicies:
        """Remove one policy (the broker's default applies again). Raises: NamespaceNotFound."""
        return await self._change(namespace, lambda p: without_policy(p, kind, quota_type))

    async def _change(self, namespace: str, fn: Callable[[NamespacePolicies], NamespacePolicies]) -> NamespacePolicies:
        ns = NamespaceName.parse(namespace)
        result: list[NamespacePolicies] = []

        def update(doc: dict[str, Any]) -> dict[str, Any]:
            result[:] = [fn(from_document(doc, str(ns)))]
            return merged(doc, result[0])

        await self._store.update_policies(ns.tenant, ns.namespace, update)
        if self.on_change is not None:
            self.on_change(str(ns), result[0])
        return result[0]
