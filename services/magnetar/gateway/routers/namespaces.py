"""``/admin/v2/namespaces``: list, create, delete, policies, topics, and the policy
sub-resources retention, messageTTL, backlogQuota(Map), deduplication, delayedDelivery,
schemaCompatibilityStrategy, isAllowAutoUpdateSchema, schemaValidationEnforced,
publishRate, dispatchRate and Magnetar's deadLetterPolicy (Pulsar's Namespaces API).

``publishRate`` keeps Pulsar's quirk: its route names the tenant ``{property}`` (Pulsar's
operation is hidden from its swagger; the URL is the same).

A policy that is not set reads as 204 with no body (Pulsar answers a null policy so);
``deadLetterPolicy`` always answers its four fields, null when not set, as ``magnetar
admin namespaces get-dead-letter-policy`` prints them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Response

from magnetar.common.names import TopicName
from magnetar.gateway.deps import Context, Namespace, PropertyNamespace, Tenant
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.policy_models import (
    QUOTA_TYPES,
    BacklogQuota,
    DeadLetterPolicy,
    DelayedDeliveryPolicies,
    DispatchRate,
    Int32,
    Policies,
    PublishRate,
    QuotaTypeName,
    RetentionPolicies,
)
from magnetar.proto.v1 import broker_pb2 as pb

router = APIRouter(prefix="/admin/v2/namespaces", tags=["namespaces"])
NO_CONTENT = Response(status_code=204)
NOT_SET: dict[int | str, dict[str, Any]] = {
    204: {"description": "The namespace does not set it (the broker's default applies)"},
}
QuotaTypeQuery = Annotated[
    QuotaTypeName | None, Query(description="which quota (absent: destination_storage)"),
]


async def _policies(ctx: Context, namespace: str) -> pb.NamespacePolicies:
    return await ctx.admin.namespace_policies(namespace)


async def _get(ctx: Context, namespace: str, field: str, shown: Callable[[Any], Any] = lambda v: v) -> Any:
    """The policy ``field`` as ``shown(value)``; 204 when the namespace does not set it."""
    p = await _policies(ctx, namespace)
    return shown(getattr(p, field)) if p.HasField(field) else NO_CONTENT


async def _set(ctx: Context, namespace: str, quota_type: QuotaTypeName | None = None, **policy: Any) -> Response:
    await ctx.admin.set_namespace_policy(namespace, QUOTA_TYPES[quota_type or "destination_storage"], **policy)
    return NO_CONTENT


async def _remove(
    ctx: Context, namespace: str, policy: pb.NamespacePolicyKind, quota_type: QuotaTypeName | None = None,
) -> Response:
    await ctx.admin.remove_namespace_policy(namespace, policy, QUOTA_TYPES[quota_type or "destination_storage"])
    return NO_CONTENT


# -- namespaces -------------------------------------------------------------------------
@router.get("/{tenant}", summary="List a tenant's namespaces (tenant/namespace)",
            operation_id="Namespaces_getTenantNamespaces", responses=responses(404, 412))
async def get_tenant_namespaces(tenant: Tenant, ctx: Context) -> list[str]:
    return sorted(await ctx.admin.namespaces(tenant))


@router.put("/{tenant}/{namespace}", status_code=204, summary="Create a namespace, optionally with policies",
            operation_id="Namespaces_createNamespace", responses=responses(400, 404, 409, 412))
async def create_namespace(
    namespace: Namespace, ctx: Context, body: Annotated[Policies | None, Body()] = None,
) -> Response:
    await ctx.admin.create_namespace(namespace, body.to_proto() if body is not None else None)
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}", status_code=204, summary="Delete a namespace (it must have no topics)",
               operation_id="Namespaces_deleteNamespace", responses=responses(404, 405, 409, 412))
async def delete_namespace(
    namespace: Namespace, ctx: Context,
    force: Annotated[bool, Query(description="refused: forced deletion is not allowed")] = False,
    authoritative: Annotated[bool, Query(description="accepted and ignored")] = False,
) -> Response:
    if force:
        raise HttpError(405, "Broker doesn't allow forced deletion of namespaces")
    await ctx.admin.delete_namespace(namespace)
    return NO_CONTENT


@router.get("/{tenant}/{namespace}", summary="Get a namespace's policies", operation_id="Namespaces_getPolicies",
            responses=responses(404, 412))
async def get_policies(namespace: Namespace, ctx: Context) -> Policies:
    return Policies.of(await _policies(ctx, namespace))


@router.get("/{tenant}/{namespace}/topics", summary="List a namespace's topics (partitions by name)",
            operation_id="Namespaces_getTopics", responses=responses(404, 412))
async def get_topics(
    namespace: Namespace, ctx: Context,
    mode: Literal["PERSISTENT", "NON_PERSISTENT", "ALL"] = "PERSISTENT",
    includeSystemTopic: Annotated[bool, Query(description="accepted; there are no system topics")] = False,  # noqa: N803
) -> list[str]:
    names = await ctx.admin.topics(namespace)
    if mode == "NON_PERSISTENT":
        return []
    tenant, local = namespace.split("/")
    partitioned = set(await ctx.tenants.list_partitioned_topics(tenant, local))
    counts = await asyncio.gather(*(
        ctx.tenants.get_partitions(tenant, local, TopicName.parse(n).local_name) for n in names if n in partitioned
    ))
    out: list[str] = []
    partition_counts = iter(counts)
    for name in names:
        if name in partitioned:
            topic = TopicName.parse(name)
            out.extend(str(topic.partition(i)) for i in range(next(partition_counts)))
        else:
            out.append(name)
    return out


# -- retention --------------------------------------------------------------------------
@router.get("/{tenant}/{namespace}/retention", summary="Get the namespace's retention",
            operation_id="Namespaces_getRetention", response_model=RetentionPolicies,
            responses={**responses(404, 412), **NOT_SET})
async def get_retention(namespace: Namespace, ctx: Context) -> Any:
    return await _get(ctx, namespace, "retention", RetentionPolicies.of)


@router.post("/{tenant}/{namespace}/retention", status_code=204, summary="Set the namespace's retention",
             operation_id="Namespaces_setRetention", responses=responses(400, 404, 409, 412))
async def set_retention(namespace: Namespace, body: RetentionPolicies, ctx: Context) -> Response:
    return await _set(ctx, namespace, retention=body.to_proto())


@router.delete("/{tenant}/{namespace}/retention", status_code=204, summary="Remove the namespace's retention",
               operation_id="Namespaces_removeRetention", responses=responses(404, 409, 412))
async def remove_retention(namespace: Namespace, ctx: Context) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_RETENTION)


# -- message TTL ------------------------------------------------------------------------
@router.get("/{tenant}/{namespace}/messageTTL", summary="Get the message TTL in seconds",
            operation_id="Namespaces_getNamespaceMessageTTL", response_model=int,
            responses={**responses(404, 412), **NOT_SET})
async def get_message_ttl(namespace: Namespace, ctx: Context) -> Any:
    return await _get(ctx, namespace, "message_ttl_seconds")


@router.post("/{tenant}/{namespace}/messageTTL", status_code=204,
             summary="Set the message TTL in seconds (older messages are acknowledged on every subscription)",
             operation_id="Namespaces_setNamespaceMessageTTL", responses=responses(400, 404, 412))
async def set_message_ttl(
    namespace: Namespace, ctx: Context, body: Annotated[Int32, Body(description="seconds; 0: never expire")],
) -> Response:
    return await _set(ctx, namespace, message_ttl_seconds=body)


@router.delete("/{tenant}/{namespace}/messageTTL", status_code=204, summary="Remove the message TTL",
               operation_id="Namespaces_removeNamespaceMessageTTL", responses=responses(404, 412))
async def remove_message_ttl(namespace: Namespace, ctx: Context) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_MESSAGE_TTL)


# -- backlog quotas ---------------------------------------------------------------------
@router.get("/{tenant}/{namespace}/backlogQuotaMap", summary="Get the backlog quotas by type",
            operation_id="Namespaces_getBacklogQuotaMap", responses=responses(404, 412))
async def get_backlog_quota_map(namespace: Namespace, ctx: Context) -> dict[QuotaTypeName, BacklogQuota]:
    return Policies.of(await _policies(ctx, namespace)).backlog_quota_map


@router.post("/{tenant}/{namespace}/backlogQuota", status_code=204, summary="Set a backlog quota",
             operation_id="Namespaces_setBacklogQuota", responses=responses(400, 404, 409, 412))
async def set_backlog_quota(
    namespace: Namespace, body: BacklogQuota, ctx: Context, backlogQuotaType: QuotaTypeQuery = None,  # noqa: N803
) -> Response:
    return await _set(ctx, namespace, backlogQuotaType, backlog_quota=body.to_proto())


@router.delete("/{tenant}/{namespace}/backlogQuota", status_code=204, summary="Remove a backlog quota",
               operation_id="Namespaces_removeBacklogQuota", responses=responses(400, 404, 409, 412))
async def remove_backlog_quota(
    namespace: Namespace, ctx: Context, backlogQuotaType: QuotaTypeQuery = None,  # noqa: N803
) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_BACKLOG_QUOTA, backlogQuotaType)


# -- deduplication ----------------------------------------------------------------------
@router.get("/{tenant}/{namespace}/deduplication", summary="Get whether the namespace deduplicates messages",
            operation_id="Namespaces_getDeduplication", response_model=bool,
            responses={**responses(404, 412), **NOT_SET})
async def get_deduplication(namespace: Namespace, ctx: Context) -> Any:
    return await _get(ctx, namespace, "deduplication")


@router.post("/{tenant}/{namespace}/deduplication", status_code=204,
             summary="Switch message deduplication on or off for the namespace's topics",
             operation_id="Namespaces_modifyDeduplication", responses=responses(400, 404, 412))
async def modify_deduplication(namespace: Namespace, ctx: Context, body: Annotated[bool, Body(strict=True)]) -> Response:
    return await _set(ctx, namespace, deduplication=body)


@router.delete("/{tenant}/{namespace}/deduplication", status_code=204,
               summary="Remove the namespace's deduplication setting (the broker's applies)",
               operation_id="Namespaces_removeDeduplication", responses=responses(404, 412))
async def remove_deduplication(namespace: Namespace, ctx: Context) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_DEDUPLICATION)


# -- delayed delivery -------------------------------------------------------------------
@router.get("/{tenant}/{namespace}/delayedDelivery", summary="Get the delayed delivery policy",
            operation_id="Namespaces_getDelayedDeliveryPolicies", response_model=DelayedDeliveryPolicies,
            responses={**responses(404, 412), **NOT_SET})
async def get_delayed_delivery(namespace: Namespace, ctx: Context) -> Any:
    return await _get(ctx, namespace, "delayed_delivery", DelayedDeliveryPolicies.of)


@router.post("/{tenant}/{namespace}/delayedDelivery", status_code=204,
             summary="Set the delayed delivery policy (active false: delayed messages go out at once)",
             operation_id="Namespaces_setDelayedDeliveryPolicies", responses=responses(400, 404, 412))
async def set_delayed_delivery(namespace: Namespace, body: DelayedDeliveryPolicies, ctx: Context) -> Response:
    return await _set(ctx, namespace, delayed_delivery=body.to_proto())


@router.delete("/{tenant}/{namespace}/delayedDelivery", status_code=204, summary="Remove the delayed delivery policy",
               operation_id="Namespaces_removeDelayedDeliveryPolicies", responses=responses(404, 412))
async def remove_delayed_delivery(namespace: Namespace, ctx: Context) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_DELAYED_DELIVERY)


# -- publish and dispatch rates --------------------------------------------------------
@router.get("/{property}/{namespace}/publishRate", summary="Get the publish rate limit per topic partition",
            operation_id="Namespaces_getPublishRate", response_model=PublishRate,
            responses={**responses(404, 412), **NOT_SET})
async def get_publish_rate(namespace: PropertyNamespace, ctx: Context) -> Any:
    return await _get(ctx, namespace, "publish_rate", PublishRate.of)


@router.post("/{property}/{namespace}/publishRate", status_code=204,
             summary="Set the publish rate limit per topic partition (producers over it are paused, not failed)",
             operation_id="Namespaces_setPublishRate", responses=responses(400, 404, 412))
async def set_publish_rate(namespace: PropertyNamespace, ctx: Context,
                           body: Annotated[PublishRate | None, Body()] = None) -> Response:
    return await _set(ctx, namespace, publish_rate=(body or PublishRate()).to_proto())


@router.delete("/{property}/{namespace}/publishRate", status_code=204, summary="Remove the publish rate limit",
               operation_id="Namespaces_removePublishRate", responses=responses(404, 412))
async def remove_publish_rate(namespace: PropertyNamespace, ctx: Context) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_PUBLISH_RATE)


@router.get("/{tenant}/{namespace}/dispatchRate", summary="Get the dispatch rate limit per topic partition",
            operation_id="Namespaces_getDispatchRate", response_model=DispatchRate,
            responses={**responses(404, 412), **NOT_SET})
async def get_dispatch_rate(namespace: Namespace, ctx: Context) -> Any:
    return await _get(ctx, namespace, "dispatch_rate", DispatchRate.of)


@router.post("/{tenant}/{namespace}/dispatchRate", status_code=204,
             summary="Set the dispatch rate limit per topic partition (its subscriptions share it)",
             operation_id="Namespaces_setDispatchRate", responses=responses(400, 404, 412))
async def set_dispatch_rate(namespace: Namespace, ctx: Context,
                            body: Annotated[DispatchRate | None, Body()] = None) -> Response:
    return await _set(ctx, namespace, dispatch_rate=(body or DispatchRate()).to_proto())


@router.delete("/{tenant}/{namespace}/dispatchRate", status_code=204, summary="Remove the dispatch rate limit",
               operation_id="Namespaces_deleteDispatchRate", responses=responses(404, 412))
async def delete_dispatch_rate(namespace: Namespace, ctx: Context) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_DISPATCH_RATE)


# -- dead-letter defaults (Magnetar) ----------------------------------------------------
@router.get("/{tenant}/{namespace}/deadLetterPolicy", summary="Get the retry/dead-letter defaults (Magnetar)",
            operation_id="Namespaces_getDeadLetterPolicy", responses=responses(404, 412))
async def get_dead_letter_policy(namespace: Namespace, ctx: Context) -> DeadLetterPolicy:
    return DeadLetterPolicy.of((await _policies(ctx, namespace)).dead_letter)


@router.post("/{tenant}/{namespace}/deadLetterPolicy", status_code=204,
             summary="Set the retry/dead-letter defaults (Magnetar; all null: removed)",
             operation_id="Namespaces_setDeadLetterPolicy", responses=responses(400, 404, 412))
async def set_dead_letter_policy(namespace: Namespace, body: DeadLetterPolicy, ctx: Context) -> Response:
    return await _set(ctx, namespace, dead_letter=body.to_proto())


@router.delete("/{tenant}/{namespace}/deadLetterPolicy", status_code=204,
               summary="Remove the retry/dead-letter defaults (Magnetar)",
               operation_id="Namespaces_removeDeadLetterPolicy", responses=responses(404, 412))
async def remove_dead_letter_policy(namespace: Namespace, ctx: Context) -> Response:
    return await _remove(ctx, namespace, pb.POLICY_DEAD_LETTER)


# -- schema policies --------------------------------------------------------------------
# Each always answers a value, as Pulsar's: what the namespace sets, or the default
# (UNDEFINED: the broker's schema_compatibility_strategy applies; auto-update true;
# enforcement false), as AdminClient reads them.
StrategyName = Literal[
    "UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
    "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE",
]


@router.get("/{tenant}/{namespace}/schemaCompatibilityStrategy",
            summary="Get the schema compatibility strategy (UNDEFINED: the broker's default applies)",
            operation_id="Namespaces_getSchemaCompatibilityStrategy", responses=responses(404, 412))
async def get_schema_compatibility_strategy(namespace: Namespace, ctx: Context) -> str:
    return await ctx.admin.schema_compatibility_strategy(namespace)


@router.put("/{tenant}/{namespace}/schemaCompatibilityStrategy", status_code=204,
            summary="Set the schema compatibility strategy of the namespace's topics",
            operation_id="Namespaces_setSchemaCompatibilityStrategy", responses=responses(400, 404, 412))
async def set_schema_compatibility_strategy(
    namespace: Namespace, ctx: Context, body: Annotated[StrategyName, Body(description='e.g. "FULL"')],
) -> Response:
    return await _set(ctx, namespace, schema_compatibility_strategy=body)


@router.get("/{tenant}/{namespace}/isAllowAutoUpdateSchema",
            summary="Get whether producers may register new schema versions (default true)",
            operation_id="Namespaces_getIsAllowAutoUpdateSchema", responses=responses(404, 412))
async def get_is_allow_auto_update_schema(namespace: Namespace, ctx: Context) -> bool:
    return await ctx.admin.is_allow_auto_update_schema(namespace)


@router.post("/{tenant}/{namespace}/isAllowAutoUpdateSchema", status_code=204,
             summary="Let producers register new schema versions, or only use those uploaded",
             operation_id="Namespaces_setIsAllowAutoUpdateSchema", responses=responses(400, 404, 412))
async def set_is_allow_auto_update_schema(
    namespace: Namespace, ctx: Context, body: Annotated[bool, Body(strict=True)],
) -> Response:
    return await _set(ctx, namespace, is_allow_auto_update_schema=body)


@router.get("/{tenant}/{namespace}/schemaValidationEnforced",
            summary="Get whether producers without a schema are refused on topics with one (default false)",
            operation_id="Namespaces_getSchemaValidtionEnforced", responses=responses(404, 412))
async def get_schema_validation_enforced(
    namespace: Namespace, ctx: Context,
    applied: Annotated[bool, Query(description="accepted: the namespace's value or the default either way")] = False,
) -> bool:
    return await ctx.admin.schema_validation_enforced(namespace)


@router.post("/{tenant}/{namespace}/schemaValidationEnforced", status_code=204,
             summary="Refuse producers without a schema on topics that have one",
             operation_id="Namespaces_setSchemaValidationEnforced", responses=responses(400, 404, 412))
async def set_schema_validation_enforced(
    namespace: Namespace, ctx: Context, body: Annotated[bool, Body(strict=True)],
) -> Response:
    return await _set(ctx, namespace, schema_validation_enforced=body)
