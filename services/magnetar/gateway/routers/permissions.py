"""A namespace's permissions (Pulsar's Namespaces API): ``/admin/v2/namespaces/{t}/{ns}/
permissions`` (each role's actions), ``permissions/{role}`` (grant, revoke),
``permissions/subscription`` (each subscription's roles), ``permissions/subscription/
{subscription}`` (grant) and ``permissions/{subscription}/{role}`` (revoke).

The broker keeps and checks them; the gateway only carries the calls, with the caller's
token, so the caller must be allowed to administer the namespace (a superuser or one of
the tenant's admin roles) when the brokers have authorization on.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Response

from magnetar.gateway.deps import Context, Namespace
from magnetar.gateway.errors import responses

router = APIRouter(prefix="/admin/v2/namespaces", tags=["namespaces"])
NO_CONTENT = Response(status_code=204)
ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")
Role = Annotated[str, Path(description="the client role")]
SubscriptionName = Annotated[str, Path(description="the subscription name")]
Actions = Annotated[list[str] | None, Body(description=f"the actions: {', '.join(ACTIONS)}",
                                           json_schema_extra={"items": {"enum": list(ACTIONS)}})]
"""A grant's body (absent: no actions)."""


@router.get("/{tenant}/{namespace}/permissions", summary="Retrieve the permissions for a namespace.",
            description="Each role and the actions granted to it: {role: [action, ...]}.",
            operation_id="Namespaces_getPermissions", responses=responses(404, 412))
async def get_permissions(namespace: Namespace, ctx: Context) -> dict[str, list[str]]:
    return await ctx.admin.permissions(namespace)


@router.get("/{tenant}/{namespace}/permissions/subscription", summary="Retrieve the permissions for a subscription.",
            description="Each subscription limited to some roles, and those roles: {subscription: [role, ...]}.",
            operation_id="Namespaces_getPermissionOnSubscription", responses=responses(404, 412))
async def get_permission_on_subscription(namespace: Namespace, ctx: Context) -> dict[str, list[str]]:
    return await ctx.admin.subscription_permissions(namespace)


@router.post("/{tenant}/{namespace}/permissions/{role}", status_code=204,
             summary="Grant a new permission to a role on a namespace.",
             description="The role gets exactly these actions (what it had before is replaced).",
             operation_id="Namespaces_grantPermissionOnNamespace", responses=responses(400, 404, 412))
async def grant_permission_on_namespace(
    namespace: Namespace, role: Role, ctx: Context,
    body: Actions = None,
) -> Response:
    await ctx.admin.grant_permission(namespace, role, body or [])
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}/permissions/{role}", status_code=204,
               summary="Revoke all permissions to a role on a namespace.",
               operation_id="Namespaces_revokePermissionsOnNamespace", responses=responses(404, 412))
async def revoke_permissions_on_namespace(namespace: Namespace, role: Role, ctx: Context) -> Response:
    await ctx.admin.revoke_permission(namespace, role)
    return NO_CONTENT


@router.post("/{tenant}/{namespace}/permissions/subscription/{subscription}", status_code=204,
             summary="Grant a new permission to roles for a subscription.",
             description="Adds the roles to those that may consume the subscription (they still need consume).",
             operation_id="Namespaces_grantPermissionOnSubscription", responses=responses(400, 404, 412))
async def grant_permission_on_subscription(
    namespace: Namespace, subscription: SubscriptionName, ctx: Context,
    body: Annotated[list[str], Body(description="the roles to add")],
) -> Response:
    await ctx.admin.grant_subscription_permission(namespace, subscription, body)
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}/permissions/{subscription}/{role}", status_code=204,
               summary="Revoke subscription admin-permission from role.",
               operation_id="Namespaces_revokePermissionOnSubscription", responses=responses(404, 412))
async def revoke_permission_on_subscription(
    namespace: Namespace, subscription: SubscriptionName, role: Role, ctx: Context,
) -> Response:
    await ctx.admin.revoke_subscription_permission(namespace, subscription, role)
    return NO_CONTENT
