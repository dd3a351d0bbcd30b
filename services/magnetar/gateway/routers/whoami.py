"""``GET /admin/v2/whoami`` (Magnetar's own): the caller's role, and which operations it
may do on a topic and subscription or a namespace (:mod:`magnetar.gateway.caller_permissions`),
so the web console offers only those. The brokers still decide every call."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from magnetar.common.errors import InvalidArgument
from magnetar.common.names import NamespaceName, TopicName
from magnetar.gateway.auth import caller_role
from magnetar.gateway.caller_permissions import Scope, allowed_operations
from magnetar.gateway.deps import Context
from magnetar.gateway.errors import responses
from magnetar.gateway.models import PulsarModel

router = APIRouter(prefix="/admin/v2", tags=["whoami"])


class WhoAmI(PulsarModel):
    role: str | None
    """The caller's role (None: authentication is off)."""
    authenticationEnabled: bool
    superuser: bool
    """One of the gateway's superuser roles (with authentication off: true)."""
    topic: str | None
    subscription: str | None
    namespace: str | None
    operations: dict[str, bool]
    """operationId -> whether the role may do it on the topic/subscription or namespace asked about."""


@router.get("/whoami", summary="The caller's role and the operations it may do on a topic, subscription or namespace",
            operation_id="Magnetar_whoami", responses=responses(400))
async def whoami(
    ctx: Context,
    topic: Annotated[str | None, Query(description="a topic (persistent://t/ns/name, or t/ns/name)")] = None,
    subscription: Annotated[str | None, Query(description="a subscription of the topic")] = None,
    namespace: Annotated[str | None, Query(description="tenant/namespace (default: the topic's)")] = None,
) -> WhoAmI:
    if subscription and not topic:
        raise InvalidArgument("subscription goes with topic")
    full = str(TopicName.parse(topic)) if topic else None
    ns = str(NamespaceName.parse(namespace)) if namespace else (str(TopicName.parse(full).namespace) if full else None)
    role = caller_role.get()
    on = ctx.authenticator is not None
    operations = await allowed_operations(
        role, Scope(topic=full, subscription=subscription or None, namespace=ns), documents=ctx.tenants,
        superusers=ctx.config.superuser_roles, authentication=on,
    )
    return WhoAmI(
        role=role, authenticationEnabled=on, superuser=not on or role in ctx.config.superuser_roles,
        topic=full, subscription=subscription or None, namespace=ns, operations=operations,
    )
