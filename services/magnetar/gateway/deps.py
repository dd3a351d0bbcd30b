"""What routes take with ``Depends``: the context, checked path names, and the
superuser check of what the gateway serves itself."""

from __future__ import annotations

import logging
import re
from typing import Annotated

from fastapi import Depends, Path, Request

from magnetar.common.errors import InvalidArgument
from magnetar.common.names import NamespaceName, TopicName
from magnetar.gateway.auth import caller_role
from magnetar.gateway.context import GatewayContext
from magnetar.gateway.errors import HttpError

log = logging.getLogger(__name__)
_NAME = re.compile(r"^[-=:.\w]+$")


async def context(request: Request) -> GatewayContext:
    ctx: GatewayContext = request.app.state.context
    return ctx


Context = Annotated[GatewayContext, Depends(context)]


async def require_superuser(request: Request) -> None:
    """With authentication on, only the gateway's ``superuser_roles`` pass: for what it
    serves without asking a broker (bookies, ledgers, the auditor, ZooKeeper's view of
    the cluster), which no broker would authorize.

    Raises: HttpError 403.
    """
    ctx: GatewayContext = request.app.state.context
    if ctx.authenticator is None:
        return
    role = caller_role.get()
    if role not in ctx.config.superuser_roles:
        log.warning("gateway refused %s %s to role %r: a superuser role is required", request.method,
                    request.url.path, role)
        raise HttpError(403, f"role {role!r} may not use {request.url.path}: a superuser role is required")


SuperUser = Depends(require_superuser)


async def tenant_name(tenant: Annotated[str, Path(description="tenant name")]) -> str:
    """Raises: HttpError 412 ``Tenant name is not valid`` (Pulsar's NamedEntity rule)."""
    if not _NAME.match(tenant):
        raise HttpError(412, "Tenant name is not valid")
    return tenant


async def namespace_name(
    tenant: Annotated[str, Path(description="tenant name")],
    namespace: Annotated[str, Path(description="namespace name")],
) -> str:
    """``tenant/namespace``. Raises: HttpError 412 ``Namespace name is not valid``."""
    try:
        return str(NamespaceName(tenant, namespace))
    except InvalidArgument as exc:
        raise HttpError(412, f"Namespace name is not valid: {exc.message}") from None


async def property_namespace_name(
    property: Annotated[str, Path(description="tenant name (Pulsar names it 'property' on this route)")],  # noqa: A002
    namespace: Annotated[str, Path(description="namespace name")],
) -> str:
    """As :func:`namespace_name`, for Pulsar's routes that call the tenant ``{property}``."""
    return await namespace_name(property, namespace)


async def topic_name(
    tenant: Annotated[str, Path(description="tenant name")],
    namespace: Annotated[str, Path(description="namespace name")],
    topic: Annotated[str, Path(description="topic name (a partition: name-partition-N)")],
) -> str:
    """``persistent://tenant/namespace/topic``. Raises: HttpError 412 ``Topic name is not valid``."""
    try:
        return str(TopicName(tenant=tenant, namespace=namespace, local_name=topic))
    except InvalidArgument as exc:
        raise HttpError(412, f"Topic name is not valid: {exc.message}") from None


Tenant = Annotated[str, Depends(tenant_name)]
Namespace = Annotated[str, Depends(namespace_name)]
PropertyNamespace = Annotated[str, Depends(property_namespace_name)]
Topic = Annotated[str, Depends(topic_name)]
