"""The broker's authorization service: the pure decision of
:mod:`magnetar.broker.authorization` over the tenants' admin roles and the namespaces'
permissions, read from the metadata store and cached; and the permission changes.

Cache and revocation (issue 16: "a revoked role loses access within 5 s, open streams
included"): a tenant's admin roles and a namespace's permissions are kept for
``ttl_s`` (``authorization_cache_ttl_s``, default 2 s) and then read again; a change
made through this broker drops its entry at once. Open produce and consume streams ask
again every ``recheck_interval_s`` (a decision on cached data costs no ZooKeeper read),
so a revocation made through any broker ends an open stream within ``ttl_s +
recheck_interval_s``. The cache is per broker rather than per connection: every stream
of a role sees the same decision.

A refusal is :class:`AuthorizationError` naming the role and the action; it is logged
once per refused call or stream (never the token).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from magnetar.broker.authorization import (
    Action,
    NamespaceAuth,
    Request,
    authorize,
    check_role,
    topic_key,
)
from magnetar.broker.tenant_info import TenantInfo
from magnetar.common.errors import (
    AuthorizationError,
    InvalidArgument,
    NamespaceNotFound,
    PreconditionFailed,
    TenantNotFound,
)
from magnetar.common.names import NamespaceName, TopicName

log = logging.getLogger(__name__)


class AuthDocuments(Protocol):
    """Where tenants' and namespaces' documents are (``ZkTenantStore``)."""

    async def get_tenant(self, name: str) -> dict[str, Any]: ...

    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]: ...

    async def update_policies(
        self, tenant: str, namespace: str, fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]: ...


def scope(request: Request) -> tuple[str, str | None]:
    """The tenant and ``tenant/namespace`` (None for a tenant-level request) a request is
    about. Raises: InvalidArgument: a malformed name."""
    if request.topic is not None:
        name = TopicName.parse(request.topic)
        return name.tenant, str(name.namespace)
    if request.namespace is not None:
        ns = NamespaceName.parse(request.namespace)
        return ns.tenant, str(ns)
    if request.tenant:
        return request.tenant, None
    return "", None


class Authorizer:
    """Decides requests of roles (see the module docstring).

    Args:
        store: the tenant and namespace documents.
        superusers: roles that may do everything.
        ttl_s: how long a tenant's or namespace's permissions are used before being read again.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self, store: AuthDocuments, superusers: Iterable[str], ttl_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self.superusers = frozenset(superusers)
        self.ttl_s = ttl_s
        self._clock = clock
        self._tenants: dict[str, tuple[float, frozenset[str]]] = {}
        self._namespaces: dict[str, tuple[float, NamespaceAuth]] = {}

    @property
    def recheck_interval_s(self) -> float:
        """How often an open stream asks again (see the module docstring)."""
        return min(1.0, self.ttl_s)

    # -- deciding -------------------------------------------------------------------
    async def allowed(self, role: str | None, request: Request) -> bool:
        if role is not None and role in self.superusers:
            return True  # no metadata read: the services' own calls stay cheap
        if role is None:
            return False
        tenant, namespace = scope(request)
        admins = await self._tenant_admins(tenant) if tenant else frozenset()
        auth = await self._namespace_auth(namespace) if namespace else NamespaceAuth()
        return authorize(role, request, superusers=self.superusers, tenant_admins=admins, namespace=auth)

    async def check(self, role: str | None, request: Request) -> None:
        """Raises: AuthorizationError (logged once) when ``role`` may not do ``request``."""
        if not await self.allowed(role, request):
            error = AuthorizationError(f"role {role!r} is not authorized to {request.what()}")
            log.warning("refused: role %r may not %s", role, request.what())
            raise error

    async def _tenant_admins(self, tenant: str) -> frozenset[str]:
        now = self._clock()
        hit = self._tenants.get(tenant)
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            admins = frozenset(TenantInfo.from_doc(await self._store.get_tenant(tenant)).admin_roles)
        except (TenantNotFound, InvalidArgument):
            admins = frozenset()  # only superusers act on a tenant that does not exist
        self._tenants[tenant] = (now + self.ttl_s, admins)
        return admins

    async def _namespace_auth(self, namespace: str) -> NamespaceAuth:
        now = self._clock()
        hit = self._namespaces.get(namespace)
        if hit is not None and hit[0] > now:
            return hit[1]
        ns = NamespaceName.parse(namespace)
        try:
            auth = NamespaceAuth.from_doc(await self._store.get_policies(ns.tenant, ns.namespace))
        except (NamespaceNotFound, TenantNotFound):
            auth = NamespaceAuth()  # no grants: tenant admins may still create it
        self._namespaces[namespace] = (now + self.ttl_s, auth)
        return auth

    def forget(self, *, tenant: str | None = None, namespace: str | None = None) -> None:
        """Drop cached entries (a change made through this broker)."""
        if tenant is not None:
            self._tenants.pop(tenant, None)
        if namespace is not None:
            self._namespaces.pop(namespace, None)

    # -- changing a namespace's permissions -------------------------------------------
    async def permissions(self, namespace: str) -> NamespaceAuth:
        """Raises: InvalidArgument (a bad name), NamespaceNotFound."""
        ns = NamespaceName.parse(namespace)
        return NamespaceAuth.from_doc(await self._store.get_policies(ns.tenant, ns.namespace))

    async def grant(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Grant ``role`` exactly ``actions`` on the namespace (replacing what it had).

        Raises: InvalidArgument: no role, an unknown action, permissions over their bound;
        NamespaceNotFound."""
        try:
            check_role(role)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        wanted = list(actions)
        await self._change(namespace, lambda auth: auth.granted(role, wanted))

    async def revoke(self, namespace: str, role: str) -> None:
        """Revoke every permission of ``role`` on the namespace. Raises: NamespaceNotFound."""
        await self._change(namespace, lambda auth: auth.revoked(role))

    async def grant_subscription(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        """Add ``roles`` to those that may consume ``subscription``.

        Raises: InvalidArgument: no subscription or role; NamespaceNotFound."""
        wanted = list(roles)
        await self._change(namespace, lambda auth: auth.subscription_granted(subscription, wanted))

    async def revoke_subscription(self, namespace: str, subscription: str, role: str) -> None:
        """Take ``role`` off ``subscription``'s list. Raises: NamespaceNotFound."""
        await self._change(namespace, lambda auth: auth.subscription_revoked(subscription, role))

    # -- a topic's permissions (Pulsar's destination_auth, in its namespace's document) ---
    async def topic_permissions(self, topic: str) -> dict[str, frozenset[str]]:
        """Each role and its actions on ``topic``: the namespace's grants and the topic's
        (as Pulsar's getPermissionsOnTopic). Raises: InvalidArgument, NamespaceNotFound."""
        auth = await self.permissions(str(TopicName.parse(topic).namespace))
        return {role: auth.on_topic(role, topic) for role in {*auth.roles, *auth.topics.get(topic_key(topic), {})}}

    async def grant_topic(self, topic: str, role: str, actions: Iterable[str]) -> None:
        """Grant ``role`` exactly ``actions`` on ``topic`` (replacing its grant there).

        Raises: InvalidArgument: a bad topic name or role, an unknown action, permissions
        over their bound; NamespaceNotFound."""
        name = TopicName.parse(topic)
        wanted = list(actions)
        await self._change(str(name.namespace), lambda auth: auth.topic_granted(str(name), role, wanted))

    async def revoke_topic(self, topic: str, role: str) -> None:
        """Revoke ``role``'s grant on ``topic`` (its namespace grant stays). Raises:
        InvalidArgument; NamespaceNotFound; PreconditionFailed: the role has no grant on
        the topic (Pulsar's 412)."""
        name = TopicName.parse(topic)

        def revoked(auth: NamespaceAuth) -> NamespaceAuth:
            if role not in auth.topics.get(topic_key(str(name)), {}):
                raise PreconditionFailed(f"Permissions are not set at the topic level: role {role!r} on {name}")
            return auth.topic_revoked(str(name), role)

        await self._change(str(name.namespace), revoked)

    async def _change(self, namespace: str, fn: Callable[[NamespaceAuth], NamespaceAuth]) -> None:
        ns = NamespaceName.parse(namespace)

        def update(doc: dict[str, Any]) -> dict[str, Any]:
            try:
                changed = fn(NamespaceAuth.from_doc(doc))
            except ValueError as exc:
                raise InvalidArgument(str(exc)) from exc
            return doc | changed.to_doc()

        await self._store.update_policies(ns.tenant, ns.namespace, update)
        self.forget(namespace=str(ns))


def admin_request(action: Action, *, topic: str = "", namespace: str = "", tenant: str = "", subscription: str = "") -> Request:
    """A :class:`Request` from wire fields (empty strings: not given)."""
    return Request(
        action, topic=topic or None, subscription=subscription or None, namespace=namespace or None, tenant=tenant or None,
    )
