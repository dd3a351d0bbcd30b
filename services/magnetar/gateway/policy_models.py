"""Namespace policy bodies with Pulsar's JSON names (Policies, RetentionPolicies,
BacklogQuota, DelayedDeliveryPolicies, PublishRate, DispatchRate, BundlesData), Magnetar's dead-letter defaults,
and their conversion to and from the broker's protobuf messages."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from magnetar.common.bundles import bundle_boundaries, parse_boundary
from magnetar.gateway.models import PulsarModel
from magnetar.proto.v1 import broker_pb2 as pb

Int32 = Annotated[int, Field(ge=-(2**31), lt=2**31)]
Int64 = Annotated[int, Field(ge=-(2**63), lt=2**63)]
QuotaTypeName = Literal["destination_storage", "message_age"]
QuotaPolicyName = Literal["producer_request_hold", "producer_exception", "consumer_backlog_eviction"]

QUOTA_TYPES: dict[str, pb.BacklogQuotaType] = {
    "destination_storage": pb.DESTINATION_STORAGE, "message_age": pb.MESSAGE_AGE,
}
_QUOTA_POLICIES: dict[str, pb.BacklogQuotaPolicy] = {
    "producer_request_hold": pb.PRODUCER_REQUEST_HOLD,
    "producer_exception": pb.PRODUCER_EXCEPTION,
    "consumer_backlog_eviction": pb.CONSUMER_BACKLOG_EVICTION,
}
_QUOTA_POLICY_NAMES = {v: k for k, v in _QUOTA_POLICIES.items()}


class RetentionPolicies(PulsarModel):
    """-1: no limit; both 0: no retention (one 0 and the other not is refused)."""

    retentionTimeInMinutes: Int32 = 0
    retentionSizeInMB: Int64 = 0

    def to_proto(self) -> pb.RetentionPolicies:
        return pb.RetentionPolicies(
            retention_time_minutes=self.retentionTimeInMinutes, retention_size_mb=self.retentionSizeInMB
        )

    @classmethod
    def of(cls, p: pb.RetentionPolicies) -> RetentionPolicies:
        return cls(retentionTimeInMinutes=p.retention_time_minutes, retentionSizeInMB=p.retention_size_mb)


class BacklogQuota(PulsarModel):
    """Sizes in bytes, ``limitTime`` in seconds, -1: no limit. ``limit`` is the deprecated
    mirror of ``limitSize`` (read when ``limitSize`` is absent, always written)."""

    limit: Int64 | None = None
    limitSize: Int64 | None = None
    limitTime: Int32 | None = None
    policy: QuotaPolicyName = "producer_request_hold"

    def to_proto(self) -> pb.BacklogQuota:
        size = self.limitSize if self.limitSize is not None else self.limit
        return pb.BacklogQuota(
            limit_size=-1 if size is None else size, limit_time=-1 if self.limitTime is None else self.limitTime,
            policy=_QUOTA_POLICIES[self.policy],
        )

    @classmethod
    def of(cls, p: pb.BacklogQuota) -> BacklogQuota:
        return cls(limit=p.limit_size, limitSize=p.limit_size, limitTime=p.limit_time,
                   policy=_QUOTA_POLICY_NAMES[p.policy])  # type: ignore[arg-type]


class DelayedDeliveryPolicies(PulsarModel):
    active: bool = False
    tickTime: Int64 = Field(default=0, description="ms; stored and shown (Magnetar uses exact timers)")
    maxDeliveryDelayInMillis: Int64 = Field(default=0, description="0: no limit")

    def to_proto(self) -> pb.DelayedDeliveryPolicies:
        return pb.DelayedDeliveryPolicies(
            active=self.active, tick_time_ms=self.tickTime, max_delivery_delay_ms=self.maxDeliveryDelayInMillis
        )

    @classmethod
    def of(cls, p: pb.DelayedDeliveryPolicies) -> DelayedDeliveryPolicies:
        return cls(active=p.active, tickTime=p.tick_time_ms, maxDeliveryDelayInMillis=p.max_delivery_delay_ms)


class DeadLetterPolicy(PulsarModel):
    """Magnetar's namespace defaults for retry letter and dead letter topics (names may
    use ``{topic}`` and ``{subscription}``); null: the built-in default."""

    maxRedeliverCount: int | None = Field(default=None, ge=1, lt=2**32)
    retryLetterTopic: str | None = None
    deadLetterTopic: str | None = None
    initialSubscriptionName: str | None = None

    def to_proto(self) -> pb.DeadLetterPolicy:
        return pb.DeadLetterPolicy(
            max_redeliver_count=self.maxRedeliverCount or 0, retry_letter_topic=self.retryLetterTopic or "",
            dead_letter_topic=self.deadLetterTopic or "", initial_subscription_name=self.initialSubscriptionName or "",
        )

    @classmethod
    def of(cls, p: pb.DeadLetterPolicy) -> DeadLetterPolicy:
        return cls(
            maxRedeliverCount=p.max_redeliver_count or None, retryLetterTopic=p.retry_letter_topic or None,
            deadLetterTopic=p.dead_letter_topic or None, initialSubscriptionName=p.initial_subscription_name or None,
        )


class PublishRate(PulsarModel):
    """Per topic partition, per second; -1: no limit."""

    publishThrottlingRateInMsg: Int32 = -1
    publishThrottlingRateInByte: Int64 = -1

    def to_proto(self) -> pb.PublishRate:
        return pb.PublishRate(msg_rate=self.publishThrottlingRateInMsg, byte_rate=self.publishThrottlingRateInByte)

    @classmethod
    def of(cls, p: pb.PublishRate) -> PublishRate:
        return cls(publishThrottlingRateInMsg=p.msg_rate, publishThrottlingRateInByte=p.byte_rate)


class DispatchRate(PulsarModel):
    """Pulsar's DispatchRate(Impl): per topic partition, per ``ratePeriodInSecond``; -1: no limit."""

    dispatchThrottlingRateInMsg: Int32 = -1
    dispatchThrottlingRateInByte: Int64 = -1
    relativeToPublishRate: bool = False
    ratePeriodInSecond: Int32 = 1

    def to_proto(self) -> pb.DispatchRate:
        return pb.DispatchRate(
            msg_rate=self.dispatchThrottlingRateInMsg, byte_rate=self.dispatchThrottlingRateInByte,
            relative_to_publish_rate=self.relativeToPublishRate, period_s=self.ratePeriodInSecond,
        )

    @classmethod
    def of(cls, p: pb.DispatchRate) -> DispatchRate:
        return cls(
            dispatchThrottlingRateInMsg=p.msg_rate, dispatchThrottlingRateInByte=p.byte_rate,
            relativeToPublishRate=p.relative_to_publish_rate, ratePeriodInSecond=p.period_s,
        )


class InactiveTopicPolicies(PulsarModel):
    """Pulsar's InactiveTopicPolicies: whether (``deleteWhileInactive``) and when a topic
    without producers and consumers is deleted."""

    inactiveTopicDeleteMode: Literal["delete_when_no_subscriptions", "delete_when_subscriptions_caught_up"] = (
        "delete_when_no_subscriptions")
    maxInactiveDurationSeconds: int = Field(default=60, ge=1, lt=2**31)
    deleteWhileInactive: bool = False

    def to_proto(self) -> pb.InactiveTopicPolicies:
        return pb.InactiveTopicPolicies(
            delete_mode=self.inactiveTopicDeleteMode, max_inactive_duration_seconds=self.maxInactiveDurationSeconds,
            delete_while_inactive=self.deleteWhileInactive,
        )

    @classmethod
    def of(cls, p: pb.InactiveTopicPolicies) -> InactiveTopicPolicies:
        return cls(inactiveTopicDeleteMode=p.delete_mode,  # type: ignore[arg-type]
                   maxInactiveDurationSeconds=p.max_inactive_duration_seconds,
                   deleteWhileInactive=p.delete_while_inactive)


class BundlesData(PulsarModel):
    boundaries: list[str] = Field(default_factory=list)
    numBundles: int = Field(default=0, ge=0, lt=2**32)


AuthActionName = Literal["produce", "consume", "functions", "sources", "sinks", "packages"]


class AuthPolicies(PulsarModel):
    """Pulsar's AuthPolicies: namespace grants (role -> actions), topic grants (topic ->
    role -> actions) and the roles each subscription is limited to."""

    namespace_auth: dict[str, list[AuthActionName]] = Field(default_factory=dict)
    destination_auth: dict[str, dict[str, list[AuthActionName]]] = Field(
        default_factory=dict, description="topic (of this namespace) -> role -> actions on that topic only")
    subscription_auth_roles: dict[str, list[str]] = Field(default_factory=dict)

    def to_proto(self) -> pb.Permissions:
        return pb.Permissions(
            roles={r: pb.NameSet(names=a) for r, a in self.namespace_auth.items()},
            subscriptions={s: pb.NameSet(names=r) for s, r in self.subscription_auth_roles.items()},
            topics={t: pb.TopicGrants(roles={r: pb.NameSet(names=a) for r, a in g.items()})
                    for t, g in self.destination_auth.items()},
        )

    @classmethod
    def of(cls, p: pb.Permissions) -> AuthPolicies:
        return cls(
            namespace_auth={r: sorted(a.names) for r, a in sorted(p.roles.items())},  # type: ignore[misc]
            destination_auth={t: {r: sorted(a.names) for r, a in sorted(g.roles.items())}  # type: ignore[misc]
                              for t, g in sorted(p.topics.items())},
            subscription_auth_roles={s: sorted(r.names) for s, r in sorted(p.subscriptions.items())},
        )


class Policies(PulsarModel):
    """Pulsar's Policies, with the fields Magnetar has (others are ignored on create);
    null: not set, the broker's default applies. The rate maps are keyed by cluster:
    the entry of the brokers' own cluster is the namespace's rate, the others are
    ignored (Magnetar does not replicate)."""

    retention_policies: RetentionPolicies | None = None
    message_ttl_in_seconds: Int32 | None = None
    backlog_quota_map: dict[QuotaTypeName, BacklogQuota] = Field(default_factory=dict)
    deduplicationEnabled: bool | None = None
    delayed_delivery_policies: DelayedDeliveryPolicies | None = None
    bundles: BundlesData | None = Field(
        default=None, description="create: the boundaries, or numBundles equal ranges (1 to the brokers' "
        "load_balancer_namespace_maximum_bundles); read: as stored (split-bundle changes them)")
    magnetar_dead_letter_policy: DeadLetterPolicy | None = Field(
        default=None, description="Magnetar's extension: the namespace's retry/dead-letter defaults"
    )
    auth_policies: AuthPolicies | None = None
    inactive_topic_policies: InactiveTopicPolicies | None = None
    replication_clusters: list[str] = Field(default_factory=list, description="stored; Magnetar does not replicate")
    publishMaxMessageRate: dict[str, PublishRate] = Field(default_factory=dict)
    topicDispatchRate: dict[str, DispatchRate] = Field(default_factory=dict)
    clusterDispatchRate: dict[str, DispatchRate] = Field(
        default_factory=dict, description="read when topicDispatchRate has no entry for the cluster")

    def to_proto(self, cluster: str = "") -> pb.NamespacePolicies:
        """Args: cluster: the brokers' own cluster (whose rate map entries apply)."""
        out = pb.NamespacePolicies(replication_clusters=self.replication_clusters)
        if self.inactive_topic_policies is not None:
            out.inactive_topic_policies.CopyFrom(self.inactive_topic_policies.to_proto())
        if cluster in self.publishMaxMessageRate:
            out.publish_rate.CopyFrom(self.publishMaxMessageRate[cluster].to_proto())
        dispatch = self.topicDispatchRate.get(cluster) or self.clusterDispatchRate.get(cluster)
        if dispatch is not None:
            out.dispatch_rate.CopyFrom(dispatch.to_proto())
        if self.retention_policies is not None:
            out.retention.CopyFrom(self.retention_policies.to_proto())
        if self.message_ttl_in_seconds is not None:
            out.message_ttl_seconds = self.message_ttl_in_seconds
        for name, quota in self.backlog_quota_map.items():
            target = out.destination_storage_quota if name == "destination_storage" else out.message_age_quota
            target.CopyFrom(quota.to_proto())
        if self.deduplicationEnabled is not None:
            out.deduplication = self.deduplicationEnabled
        if self.delayed_delivery_policies is not None:
            out.delayed_delivery.CopyFrom(self.delayed_delivery_policies.to_proto())
        if self.magnetar_dead_letter_policy is not None:
            out.dead_letter.CopyFrom(self.magnetar_dead_letter_policy.to_proto())
        if self.bundles is not None:
            out.bundles = self.bundles.numBundles
            out.bundle_boundaries.extend(parse_boundary(b) for b in self.bundles.boundaries)
        return out

    @classmethod
    def of(cls, p: pb.NamespacePolicies, cluster: str = "", permissions: pb.Permissions | None = None) -> Policies:
        """Args: cluster: the key of the rate maps (none without it); permissions: the
        namespace's (no auth_policies without them)."""
        out = cls._of(p)
        out.replication_clusters = list(p.replication_clusters)
        if p.HasField("inactive_topic_policies"):
            out.inactive_topic_policies = InactiveTopicPolicies.of(p.inactive_topic_policies)
        if cluster and p.HasField("publish_rate"):
            out.publishMaxMessageRate = {cluster: PublishRate.of(p.publish_rate)}
        if cluster and p.HasField("dispatch_rate"):
            out.topicDispatchRate = {cluster: DispatchRate.of(p.dispatch_rate)}
        if permissions is not None:
            out.auth_policies = AuthPolicies.of(permissions)
        return out

    @classmethod
    def _of(cls, p: pb.NamespacePolicies) -> Policies:
        quotas: dict[QuotaTypeName, BacklogQuota] = {}
        if p.HasField("destination_storage_quota"):
            quotas["destination_storage"] = BacklogQuota.of(p.destination_storage_quota)
        if p.HasField("message_age_quota"):
            quotas["message_age"] = BacklogQuota.of(p.message_age_quota)
        return cls(
            retention_policies=RetentionPolicies.of(p.retention) if p.HasField("retention") else None,
            message_ttl_in_seconds=p.message_ttl_seconds if p.HasField("message_ttl_seconds") else None,
            backlog_quota_map=quotas,
            deduplicationEnabled=p.deduplication if p.HasField("deduplication") else None,
            delayed_delivery_policies=DelayedDeliveryPolicies.of(p.delayed_delivery)
            if p.HasField("delayed_delivery") else None,
            bundles=BundlesData(
                boundaries=[f"0x{b:08x}" for b in (p.bundle_boundaries or bundle_boundaries(p.bundles))],
                numBundles=p.bundles or len(p.bundle_boundaries) - 1,
            ) if p.bundles or p.bundle_boundaries else None,
            magnetar_dead_letter_policy=DeadLetterPolicy.of(p.dead_letter) if p.HasField("dead_letter") else None,
        )


class PersistencePolicies(PulsarModel):
    """Pulsar's PersistencePolicies: the quorums of the namespace's new ledgers
    (``managedLedgerStorageClassName`` is accepted and not kept: one storage here)."""

    bookkeeperEnsemble: Int32 = 2
    bookkeeperWriteQuorum: Int32 = 2
    bookkeeperAckQuorum: Int32 = 2
    managedLedgerMaxMarkDeleteRate: Annotated[float, Field(allow_inf_nan=False)] = 0.0
    managedLedgerStorageClassName: str | None = None

    def to_proto(self) -> pb.PersistencePolicies:
        return pb.PersistencePolicies(
            bookkeeper_ensemble=self.bookkeeperEnsemble, bookkeeper_write_quorum=self.bookkeeperWriteQuorum,
            bookkeeper_ack_quorum=self.bookkeeperAckQuorum,
            managed_ledger_max_mark_delete_rate=self.managedLedgerMaxMarkDeleteRate)

    @classmethod
    def of(cls, p: pb.PersistencePolicies) -> PersistencePolicies:
        return cls(bookkeeperEnsemble=p.bookkeeper_ensemble, bookkeeperWriteQuorum=p.bookkeeper_write_quorum,
                   bookkeeperAckQuorum=p.bookkeeper_ack_quorum,
                   managedLedgerMaxMarkDeleteRate=p.managed_ledger_max_mark_delete_rate)


class AutoTopicCreationOverride(PulsarModel):
    """Pulsar's AutoTopicCreationOverride (``topicType``: ``partitioned`` or
    ``non-partitioned``; ``defaultNumPartitions`` for partitioned only)."""

    allowAutoTopicCreation: bool
    topicType: str | None = None
    defaultNumPartitions: Int32 | None = None

    def to_proto(self) -> pb.AutoTopicCreationOverride:
        return pb.AutoTopicCreationOverride(
            allow_auto_topic_creation=self.allowAutoTopicCreation, topic_type=self.topicType or "",
            default_num_partitions=self.defaultNumPartitions)

    @classmethod
    def of(cls, p: pb.AutoTopicCreationOverride) -> AutoTopicCreationOverride:
        return cls(allowAutoTopicCreation=p.allow_auto_topic_creation, topicType=p.topic_type or None,
                   defaultNumPartitions=p.default_num_partitions if p.HasField("default_num_partitions") else None)
