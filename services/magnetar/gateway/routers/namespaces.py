"""``/admin/v2/namespaces``: list, create, delete, policies, topics (Pulsar's Namespaces
API), and the policy sub-resources (retention, messageTTL, backlogQuota(Map), ...), made
from the policy catalogue (:mod:`magnetar.common.policies`) by
:mod:`magnetar.gateway.policy_routes`.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Path, Query, Response

from magnetar.common.names import TopicName
from magnetar.gateway.deps import Context, Namespace, Tenant
from magnetar.gateway.errors import HttpError, responses
from magnetar.gateway.policy_models import Policies
from magnetar.gateway.policy_routes import add_policy_routes
from magnetar.proto.v1 import broker_pb2 as pb

router = APIRouter(prefix="/admin/v2/namespaces", tags=["namespaces"])
NO_CONTENT = Response(status_code=204)


async def _policies(ctx: Context, namespace: str) -> pb.NamespacePolicies:
    return await ctx.admin.namespace_policies(namespace)


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
    """The body's policies, grants and replication clusters are checked by the broker
    before anything is written: one refused, nothing is created."""
    if body is None:
        await ctx.admin.create_namespace(namespace)
        return NO_CONTENT
    auth = body.auth_policies
    await ctx.admin.create_namespace(
        namespace, body.to_proto(ctx.config.cluster_name), auth.to_proto() if auth is not None else None)
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
    policies = await _policies(ctx, namespace)
    return Policies.of(policies, ctx.config.cluster_name, await ctx.admin.get_permissions(namespace))


@router.get("/{tenant}/{namespace}/topics", summary="List a namespace's topics (partitions by name)",
            operation_id="Namespaces_getTopics", responses=responses(404, 412))
async def get_topics(
    namespace: Namespace, ctx: Context,
    mode: Literal["PERSISTENT", "NON_PERSISTENT", "ALL"] = "PERSISTENT",
    includeSystemTopic: Annotated[bool, Query(description="accepted; there are no system topics")] = False,  # noqa: N803
) -> list[str]:
    names = await ctx.admin.topics(namespace)
    # Non-persistent topics: those loaded now (they exist nowhere else).
    loaded = await ctx.admin.non_persistent_topics(namespace) if mode != "PERSISTENT" else []
    if mode == "NON_PERSISTENT":
        return loaded
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
    return out + loaded


# -- operations on every topic (Pulsar's namespaces clear-backlog / unsubscribe) --------
Authoritative = Annotated[bool, Query(description="accepted: each bundle's owner is asked either way")]
Subscription = Annotated[str, Path(min_length=1, description="the subscription")]


@router.post("/{tenant}/{namespace}/clearBacklog", status_code=204,
             summary="Clear the backlog of every subscription on every topic of the namespace",
             operation_id="Namespaces_clearNamespaceBacklog", responses=responses(403, 404, 412))
async def clear_namespace_backlog(namespace: Namespace, ctx: Context, authoritative: Authoritative = False) -> Response:
    await ctx.admin.clear_namespace_backlog(namespace)
    return NO_CONTENT


@router.post("/{tenant}/{namespace}/clearBacklog/{subscription}", status_code=204,
             summary="Clear the backlog of one subscription on every topic of the namespace that has it",
             operation_id="Namespaces_clearNamespaceBacklogForSubscription", responses=responses(400, 403, 404, 412))
async def clear_namespace_backlog_for_subscription(
    namespace: Namespace, subscription: Subscription, ctx: Context, authoritative: Authoritative = False,
) -> Response:
    await ctx.admin.clear_namespace_backlog(namespace, subscription)
    return NO_CONTENT


@router.post("/{tenant}/{namespace}/unsubscribe/{subscription}", status_code=204,
             summary="Delete a subscription on every topic of the namespace that has it "
                     "(412, nothing deleted, while consumers are connected to it)",
             operation_id="Namespaces_unsubscribeNamespace", responses=responses(400, 403, 404, 412))
async def unsubscribe_namespace(
    namespace: Namespace, subscription: Subscription, ctx: Context, authoritative: Authoritative = False,
) -> Response:
    await ctx.admin.unsubscribe_namespace(namespace, subscription)
    return NO_CONTENT


# -- the policies (made from the catalogue) -------------------------------------------
add_policy_routes(router)
