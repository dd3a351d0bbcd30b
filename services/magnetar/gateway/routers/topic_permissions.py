"""A topic's permissions (Pulsar's PersistentTopics API): ``GET /admin/v2/persistent/{t}/
{ns}/{topic}/permissions`` (each role's actions on the topic: its namespace grant and its
topic grant), ``POST .../permissions/{role}`` (grant on this topic only) and ``DELETE
.../permissions/{role}`` (revoke the topic grant; 412 when there is none).

The broker keeps them in the namespace's permissions and checks them
(:mod:`magnetar.broker.authorization`); the caller must administer the tenant.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from magnetar.gateway.deps import Context, Topic
from magnetar.gateway.errors import responses
from magnetar.gateway.routers.permissions import NO_CONTENT, Actions, Role

router = APIRouter(prefix="/admin/v2/persistent", tags=["persistent topic"])


@router.get("/{tenant}/{namespace}/{topic}/permissions", summary="Get permissions on a topic.",
            description="Each role and its actions on the topic (namespace and topic grants): {role: [action, ...]}.",
            operation_id="PersistentTopics_getPermissionsOnTopic", responses=responses(404, 412))
async def get_permissions_on_topic(topic: Topic, ctx: Context) -> dict[str, list[str]]:
    return await ctx.admin.topic_permissions(topic)


@router.post("/{tenant}/{namespace}/{topic}/permissions/{role}", status_code=204,
             summary="Grant a new permission to a role on a single topic.",
             description="The role gets exactly these actions on the topic (a partitioned topic: every partition), "
                         "in addition to its namespace grant.",
             operation_id="PersistentTopics_grantPermissionsOnTopic", responses=responses(400, 404, 412))
async def grant_permissions_on_topic(
    topic: Topic, role: Role, ctx: Context,
    body: Actions = None,
) -> Response:
    await ctx.admin.grant_topic_permission(topic, role, body or [])
    return NO_CONTENT


@router.delete("/{tenant}/{namespace}/{topic}/permissions/{role}", status_code=204,
               summary="Revoke a role's permissions on a topic.",
               description="Its namespace grant stays. 412 when the role has no grant on the topic.",
               operation_id="PersistentTopics_revokePermissionsOnTopic", responses=responses(404, 412))
async def revoke_permissions_on_topic(topic: Topic, role: Role, ctx: Context) -> Response:
    await ctx.admin.revoke_topic_permission(topic, role)
    return NO_CONTENT
