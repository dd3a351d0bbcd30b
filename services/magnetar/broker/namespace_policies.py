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
    inactive_topic_policies: InactiveTopicPolicies | None = None
    """None: the broker's ``delete_inactive_topics_*`` settings."""

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
            inactive_topic_policies=None if inactive is None else InactiveTopicPolicies(**inactive).checked(),
        )
        if policies.deduplication is not None:
            _typed(policies.deduplication, bool, PolicyKind.DEDUPLICATION)
        if policies.is_allow_auto_update_schema is not None:
            _typed(policies.is_allow_auto_update_schema, bool, PolicyKind.IS_ALLOW_AUTO_UPDATE_SCHEMA)
        if policies.schema_validation_enforced is not None:
            _typed(policies.schema_validation_enforced, bool, PolicyKind.SCHEMA_VALIDATION_ENFORCED)
    except (TypeError, KeyError, ValueError, AttributeError, InvalidArgument) as exc:
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
