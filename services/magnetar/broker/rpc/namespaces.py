"""The broker's namespace policy RPCs (a mixin of ``BrokerServicer``): wire ↔
:mod:`magnetar.broker.namespace_policies`. Which field carries which policy, and its
``POLICY_*`` kind, come from the policy catalogue (:mod:`magnetar.common.policies`);
:data:`CARRIED` turns each carrier into the core's value."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from magnetar.broker.deadletter import DeadLetterDefaults
from magnetar.broker.namespace_policies import (
    AutoTopicCreation,
    BacklogQuota,
    DelayedDelivery,
    DispatchRate,
    InactiveTopicPolicies,
    NamespacePolicies,
    PersistencePolicies,
    PolicyKind,
    PublishRate,
    QuotaPolicy,
    QuotaType,
)
from magnetar.broker.retention import RetentionPolicy
from magnetar.broker.schema.compatibility import SchemaCompatibilityStrategy
from magnetar.common.errors import InvalidArgument
from magnetar.common.grpcutil import rpc_errors
from magnetar.common.policies import CATALOGUE
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

_QUOTA_TYPES: dict[int, QuotaType] = {pb.DESTINATION_STORAGE: QuotaType.DESTINATION_STORAGE, pb.MESSAGE_AGE: QuotaType.MESSAGE_AGE}
_QUOTA_POLICIES: dict[int, QuotaPolicy] = {
    pb.PRODUCER_REQUEST_HOLD: QuotaPolicy.PRODUCER_REQUEST_HOLD,
    pb.PRODUCER_EXCEPTION: QuotaPolicy.PRODUCER_EXCEPTION,
    pb.CONSUMER_BACKLOG_EVICTION: QuotaPolicy.CONSUMER_BACKLOG_EVICTION,
}
_QUOTA_POLICY_CODES: dict[QuotaPolicy, pb.BacklogQuotaPolicy] = {
    QuotaPolicy.PRODUCER_REQUEST_HOLD: pb.PRODUCER_REQUEST_HOLD,
    QuotaPolicy.PRODUCER_EXCEPTION: pb.PRODUCER_EXCEPTION,
    QuotaPolicy.CONSUMER_BACKLOG_EVICTION: pb.CONSUMER_BACKLOG_EVICTION,
}
# -- wire <-> domain ---------------------------------------------------------------------
def _quota_type(code: int) -> QuotaType:
    if code not in _QUOTA_TYPES:
        raise InvalidArgument(f"unknown backlog quota type {code}")
    return _QUOTA_TYPES[code]


def quota_from_proto(quota: pb.BacklogQuota) -> BacklogQuota:
    if quota.policy not in _QUOTA_POLICIES:
        raise InvalidArgument(f"unknown backlog quota policy {quota.policy}")
    return BacklogQuota(quota.limit_size, quota.limit_time, _QUOTA_POLICIES[quota.policy])


def quota_to_proto(quota: BacklogQuota) -> pb.BacklogQuota:
    return pb.BacklogQuota(
        limit_size=quota.limit_size, limit_time=quota.limit_time, policy=_QUOTA_POLICY_CODES[quota.policy]
    )


def dead_letter_from_proto(p: pb.DeadLetterPolicy) -> DeadLetterDefaults:
    """Empty/0 fields: not set."""
    return DeadLetterDefaults(
        max_redeliver_count=p.max_redeliver_count or None, retry_letter_topic=p.retry_letter_topic or None,
        dead_letter_topic=p.dead_letter_topic or None, initial_subscription_name=p.initial_subscription_name or None,
    )


def dead_letter_to_proto(d: DeadLetterDefaults | None) -> pb.DeadLetterPolicy:
    d = d or DeadLetterDefaults()
    return pb.DeadLetterPolicy(
        max_redeliver_count=d.max_redeliver_count or 0, retry_letter_topic=d.retry_letter_topic or "",
        dead_letter_topic=d.dead_letter_topic or "", initial_subscription_name=d.initial_subscription_name or "",
    )


def _delayed_from_proto(p: pb.DelayedDeliveryPolicies) -> DelayedDelivery:
    return DelayedDelivery(p.active, p.tick_time_ms, p.max_delivery_delay_ms)


def publish_rate_from_proto(p: pb.PublishRate) -> PublishRate:
    return PublishRate(p.msg_rate, p.byte_rate)


def dispatch_rate_from_proto(p: pb.DispatchRate) -> DispatchRate:
    return DispatchRate(p.msg_rate, p.byte_rate, p.relative_to_publish_rate, p.period_s)


def persistence_from_proto(p: pb.PersistencePolicies) -> PersistencePolicies:
    return PersistencePolicies(
        p.bookkeeper_ensemble, p.bookkeeper_write_quorum, p.bookkeeper_ack_quorum, p.managed_ledger_max_mark_delete_rate)


def persistence_to_proto(p: PersistencePolicies) -> pb.PersistencePolicies:
    return pb.PersistencePolicies(
        bookkeeper_ensemble=p.bookkeeper_ensemble, bookkeeper_write_quorum=p.bookkeeper_write_quorum,
        bookkeeper_ack_quorum=p.bookkeeper_ack_quorum,
        managed_ledger_max_mark_delete_rate=p.managed_ledger_max_mark_delete_rate)


def auto_topic_creation_from_proto(p: pb.AutoTopicCreationOverride) -> AutoTopicCreation:
    return AutoTopicCreation(
        p.allow_auto_topic_creation, p.topic_type,
        p.default_num_partitions if p.HasField("default_num_partitions") else None)


def auto_topic_creation_to_proto(a: AutoTopicCreation) -> pb.AutoTopicCreationOverride:
    return pb.AutoTopicCreationOverride(
        allow_auto_topic_creation=a.allow_auto_topic_creation, topic_type=a.topic_type,
        default_num_partitions=a.default_num_partitions)


def policies_from_proto(p: pb.NamespacePolicies) -> NamespacePolicies:
    """The policies a request sets (its read-only ``bundles`` is not one)."""
    quotas = {}
    if p.HasField("destination_storage_quota"):
        quotas[QuotaType.DESTINATION_STORAGE] = quota_from_proto(p.destination_storage_quota)
    if p.HasField("message_age_quota"):
        quotas[QuotaType.MESSAGE_AGE] = quota_from_proto(p.message_age_quota)
    dead_letter = dead_letter_from_proto(p.dead_letter)
    return NamespacePolicies(
        retention=RetentionPolicy(p.retention.retention_time_minutes, p.retention.retention_size_mb)
        if p.HasField("retention") else None,
        message_ttl_s=p.message_ttl_seconds if p.HasField("message_ttl_seconds") else None,
        backlog_quotas=quotas,
        deduplication=p.deduplication if p.HasField("deduplication") else None,
        delayed_delivery=_delayed_from_proto(p.delayed_delivery) if p.HasField("delayed_delivery") else None,
        dead_letter=dead_letter if dead_letter.to_document() else None,
        publish_rate=publish_rate_from_proto(p.publish_rate) if p.HasField("publish_rate") else None,
        dispatch_rate=dispatch_rate_from_proto(p.dispatch_rate) if p.HasField("dispatch_rate") else None,
        schema_compatibility_strategy=SchemaCompatibilityStrategy.parse(p.schema_compatibility_strategy)
        if p.HasField("schema_compatibility_strategy") else None,
        is_allow_auto_update_schema=p.is_allow_auto_update_schema if p.HasField("is_allow_auto_update_schema") else None,
        schema_validation_enforced=p.schema_validation_enforced if p.HasField("schema_validation_enforced") else None,
        persistence=persistence_from_proto(p.persistence) if p.HasField("persistence") else None,
        compaction_threshold=p.compaction_threshold if p.HasField("compaction_threshold") else None,
        auto_topic_creation=auto_topic_creation_from_proto(p.auto_topic_creation)
        if p.HasField("auto_topic_creation") else None,
        max_producers=p.max_producers_per_topic if p.HasField("max_producers_per_topic") else None,
        max_consumers=p.max_consumers_per_topic if p.HasField("max_consumers_per_topic") else None,
        inactive_topic_policies=inactive_topic_from_proto(p.inactive_topic_policies)
        if p.HasField("inactive_topic_policies") else None,
    )


def policies_to_proto(policies: NamespacePolicies, bundles: int) -> pb.NamespacePolicies:
    out = pb.NamespacePolicies(bundles=bundles)
    if policies.retention is not None:
        out.retention.CopyFrom(pb.RetentionPolicies(
            retention_time_minutes=policies.retention.retention_time_minutes,
            retention_size_mb=policies.retention.retention_size_mb,
        ))
    if policies.message_ttl_s is not None:
        out.message_ttl_seconds = policies.message_ttl_s
    for kind, field in ((QuotaType.DESTINATION_STORAGE, out.destination_storage_quota),
                        (QuotaType.MESSAGE_AGE, out.message_age_quota)):
        quota = policies.quota(kind)
        if quota is not None:
            field.CopyFrom(quota_to_proto(quota))
    if policies.deduplication is not None:
        out.deduplication = policies.deduplication
    delayed = policies.delayed_delivery
    if delayed is not None:
        out.delayed_delivery.CopyFrom(pb.DelayedDeliveryPolicies(
            active=delayed.active, tick_time_ms=delayed.tick_time_ms, max_delivery_delay_ms=delayed.max_delivery_delay_ms,
        ))
    if policies.dead_letter is not None:
        out.dead_letter.CopyFrom(dead_letter_to_proto(policies.dead_letter))
    if policies.publish_rate is not None:
        out.publish_rate.CopyFrom(pb.PublishRate(msg_rate=policies.publish_rate.msg_rate, byte_rate=policies.publish_rate.byte_rate))
    dispatch = policies.dispatch_rate
    if dispatch is not None:
        out.dispatch_rate.CopyFrom(pb.DispatchRate(
            msg_rate=dispatch.msg_rate, byte_rate=dispatch.byte_rate,
            relative_to_publish_rate=dispatch.relative_to_publish_rate, period_s=dispatch.period_s,
        ))
    if policies.schema_compatibility_strategy is not None:
        out.schema_compatibility_strategy = policies.schema_compatibility_strategy.value
    if policies.is_allow_auto_update_schema is not None:
        out.is_allow_auto_update_schema = policies.is_allow_auto_update_schema
    if policies.schema_validation_enforced is not None:
        out.schema_validation_enforced = policies.schema_validation_enforced
    if policies.persistence is not None:
        out.persistence.CopyFrom(persistence_to_proto(policies.persistence))
    if policies.compaction_threshold is not None:
        out.compaction_threshold = policies.compaction_threshold
    if policies.auto_topic_creation is not None:
        out.auto_topic_creation.CopyFrom(auto_topic_creation_to_proto(policies.auto_topic_creation))
    if policies.max_producers is not None:
        out.max_producers_per_topic = policies.max_producers
    if policies.max_consumers is not None:
        out.max_consumers_per_topic = policies.max_consumers
    inactive = policies.inactive_topic_policies
    if inactive is not None:
        out.inactive_topic_policies.CopyFrom(pb.InactiveTopicPolicies(
            delete_mode=str(inactive.delete_mode), max_inactive_duration_seconds=inactive.max_inactive_duration_s,
            delete_while_inactive=inactive.delete_while_inactive,
        ))
    return out


def inactive_topic_from_proto(p: pb.InactiveTopicPolicies) -> InactiveTopicPolicies:
    """Checked by the core's rule (an unknown mode is refused there)."""
    return InactiveTopicPolicies(p.delete_mode, p.max_inactive_duration_seconds, p.delete_while_inactive)  # type: ignore[arg-type]


def _retention_from_proto(r: pb.RetentionPolicies) -> RetentionPolicy:
    return RetentionPolicy(r.retention_time_minutes, r.retention_size_mb)


def _same(value: object) -> object:
    return value


CARRIED: dict[str, Callable[[Any], object]] = {
    "retention": _retention_from_proto,
    "messageTTL": _same,
    "backlogQuota": quota_from_proto,
    "deduplication": _same,
    "delayedDelivery": _delayed_from_proto,
    "deadLetterPolicy": dead_letter_from_proto,
    "publishRate": publish_rate_from_proto,
    "dispatchRate": dispatch_rate_from_proto,
    "schemaCompatibilityStrategy": _same,
    "isAllowAutoUpdateSchema": _same,
    "schemaValidationEnforced": _same,
    "persistence": persistence_from_proto,
    "compactionThreshold": _same,
    "autoTopicCreation": auto_topic_creation_from_proto,
    "maxProducersPerTopic": _same,
    "maxConsumersPerTopic": _same,
    "inactiveTopicPolicies": inactive_topic_from_proto,
}
"""Each catalogue entry's carrier (its field of SetNamespacePolicyRequest, named by
:data:`magnetar.common.policies.CATALOGUE`) as the broker core's value."""
_BY_CARRIER = {spec.carrier: spec for spec in CATALOGUE}
_KINDS = {pb.NamespacePolicyKind.Value(f"POLICY_{spec.kind}"): PolicyKind[spec.kind] for spec in CATALOGUE}


def _policy_value(request: pb.SetNamespacePolicyRequest) -> tuple[PolicyKind, object]:
    which = request.WhichOneof("policy")
    spec = _BY_CARRIER.get(which or "")
    if spec is None:
        raise InvalidArgument("give the policy to set")
    return PolicyKind[spec.kind], CARRIED[spec.name](getattr(request, which))


class NamespacePolicyRpcs:
    service: BrokerService

    @rpc_errors
    async def GetNamespacePolicies(self, request: pb.GetNamespacePoliciesRequest, context: grpc.aio.ServicerContext) -> pb.NamespacePolicies:
        policies = await self.service.namespace_policies.get(request.namespace)
        bundles = await self.service.bundles_data(request.namespace)
        out = policies_to_proto(policies, bundles.count)
        out.bundle_boundaries.extend(bundles.boundaries)
        out.replication_clusters.extend(await self.service.replication_clusters(request.namespace))
        return out

    @rpc_errors
    async def SetNamespacePolicy(self, request: pb.SetNamespacePolicyRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        kind, value = _policy_value(request)
        quota_type = _quota_type(request.backlog_quota_type)
        await self.service.namespace_policies.set(request.namespace, kind, value, quota_type)
        return pb.AdminResponse()

    @rpc_errors
    async def RemoveNamespacePolicy(self, request: pb.RemoveNamespacePolicyRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        kind = _KINDS.get(request.policy)
        if kind is None:
            raise InvalidArgument(f"name the policy to remove (got {request.policy})")
        await self.service.namespace_policies.remove(request.namespace, kind, _quota_type(request.backlog_quota_type))
        return pb.AdminResponse()

    # -- the topic level (the same carriers) --------------------------------------------
    @rpc_errors
    async def GetTopicPolicies(self, request: pb.GetTopicPoliciesRequest, context: grpc.aio.ServicerContext) -> pb.NamespacePolicies:
        policies = self.service.topic_policies
        got = await (policies.applied(request.topic) if request.applied else policies.get(request.topic))
        return policies_to_proto(got, 0)

    @rpc_errors
    async def SetTopicPolicy(self, request: pb.SetTopicPolicyRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        kind, value = _policy_value(request.policy)
        await self.service.set_topic_policy(request.topic, kind, value, _quota_type(request.policy.backlog_quota_type))
        return pb.AdminResponse()

    @rpc_errors
    async def RemoveTopicPolicy(self, request: pb.RemoveTopicPolicyRequest, context: grpc.aio.ServicerContext) -> pb.AdminResponse:
        kind = _KINDS.get(request.policy.policy)
        if kind is None:
            raise InvalidArgument(f"name the policy to remove (got {request.policy.policy})")
        await self.service.remove_topic_policy(request.topic, kind, _quota_type(request.policy.backlog_quota_type))
        return pb.AdminResponse()
