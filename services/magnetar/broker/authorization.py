"""Who may do what: Pulsar's authorization model, as a pure decision over roles.

- A **superuser** (``superuser_roles``) may do anything.
- A tenant's **admin roles** (its TenantInfo ``adminRoles``) administer the tenant: its
  namespaces, their policies and permissions, its topics and subscriptions; and they may
  produce and consume on them.
- **Namespace permissions** grant a role ``produce`` and/or ``consume`` on every topic of
  the namespace (``functions``, ``sources``, ``sinks``, ``packages`` are accepted and have
  no effect here).
- **Topic permissions** grant a role ``produce`` and/or ``consume`` on one topic (a
  partitioned topic: all its partitions), added to what its namespace grants it
  (Pulsar's destination_auth).
- **Subscription permissions** (optional): a subscription listed there may be consumed
  only by the roles listed for it (and only if they also have ``consume``).
- **Retry and dead-letter topics**: a role that may consume a subscription may produce to
  that subscription's retry letter and dead letter topics (``reconsume_later`` and the
  broker's moves need no separate produce grant).
- Bounds (Magnetar's; Pulsar sets none, but the permissions live in the namespace's
  policies znode, and ZooKeeper holds every version of it in memory for a while): a role
  name is at most :data:`MAX_ROLE_LENGTH` characters, a subscription name as
  :func:`magnetar.common.names.check_subscription_name` says, and a namespace's
  permissions at most :data:`MAX_PERMISSIONS_BYTES` of JSON; a grant past them is refused.
- Anyone else, and a role of another tenant, is refused. Without a role (anonymous) only
  what authentication leaves open is allowed: when authorization is on, nothing.

The doors (broker gRPC, gateway REST and WebSocket) ask :func:`authorize` with the
caller's role; the decision is pure, so it is the same at every door.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from magnetar.common.errors import InvalidArgument
from magnetar.common.names import TopicName, check_subscription_name


class Action(enum.Enum):
    LOOKUP = "lookup"
    """Find a topic, read its stats, list a namespace's topics: a role that may produce
    or consume there (Pulsar's canLookup)."""
    PRODUCE = "produce"
    CONSUME = "consume"
    ADMIN_TOPIC = "admin-topic"
    """Create, delete, unload topics; subscription admin (skip, reset, delete)."""
    ADMIN_NAMESPACE = "admin-namespace"
    """Create or delete namespaces, set policies, grant and revoke permissions."""
    ADMIN_TENANT = "admin-tenant"
    """Create, update or delete tenants: superusers only (as Pulsar)."""


GRANTABLE = frozenset({"produce", "consume", "functions", "sources", "sinks", "packages"})
MAX_ROLE_LENGTH = 1024
"""Longest role name a grant takes, in characters."""
MAX_PERMISSIONS_BYTES = 256 * 1024
"""Most JSON bytes of one namespace's permissions (about a thousand roles with long names)."""


def check_role(role: str) -> str:
    """Raises: ValueError: an empty role, or one over :data:`MAX_ROLE_LENGTH` characters."""
    if not role:
        raise ValueError("name the role to grant permissions to")
    if len(role) > MAX_ROLE_LENGTH:
        raise ValueError(f"the role {role[:40]!r}… is {len(role):,} characters long, more than {MAX_ROLE_LENGTH:,}")
    return role


def _grantable(actions: Iterable[str]) -> frozenset[str]:
    """Raises: ValueError: an action that cannot be granted."""
    wanted = frozenset(actions)
    unknown = wanted - GRANTABLE
    if unknown:
        raise ValueError(f"unknown actions {sorted(unknown)}: grant any of {sorted(GRANTABLE)}")
    return wanted


def topic_key(topic: str) -> str:
    """The name a topic's grants are kept under: a partition's partitioned topic."""
    return str(TopicName.parse(topic).partitioned_topic_name)


@dataclass(frozen=True)
class NamespaceAuth:
    """A namespace's permissions (Pulsar's AuthPolicies, namespace part)."""

    roles: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """role -> granted actions (``produce``, ``consume``, …)."""
    subscriptions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """subscription -> the roles that may consume it (absent: any role with ``consume``)."""
    topics: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)
    """topic (a partitioned topic's name for all its partitions) -> role -> granted
    actions on that topic only (Pulsar's destination_auth)."""

    @classmethod
    def from_doc(cls, doc: Mapping[str, object] | None) -> NamespaceAuth:
        doc = doc or {}
        roles, subs = doc.get("namespace_auth"), doc.get("subscription_auth_roles")
        roles = roles if isinstance(roles, Mapping) else {}  # absent (or garbled): no grants
        subs = subs if isinstance(subs, Mapping) else {}
        topics = doc.get("destination_auth")
        topics = topics if isinstance(topics, Mapping) else {}
        return cls(
            {str(r): frozenset(map(str, a)) for r, a in roles.items()},
            {str(s): frozenset(map(str, r)) for s, r in subs.items()},
            {str(t): {str(r): frozenset(map(str, a)) for r, a in g.items()}
             for t, g in topics.items() if isinstance(g, Mapping)},
        )

    @classmethod
    def of_grants(
        cls, roles: Mapping[str, Iterable[str]], subscriptions: Mapping[str, Iterable[str]] | None = None,
        topics: Mapping[str, Mapping[str, Iterable[str]]] | None = None, *, namespace: str | None = None,
    ) -> NamespaceAuth:
        """The permissions that granting each role its actions, each subscription its
        roles and each topic's roles their actions would make (a Policies body's
        auth_policies); with ``namespace``, each topic must be one of its.

        Raises: InvalidArgument: as :meth:`granted`, :meth:`subscription_granted` and
        :meth:`topic_granted`; a topic of another namespace."""
        auth = cls()
        try:
            for role, actions in roles.items():
                auth = auth.granted(role, actions)
            for subscription, allowed in (subscriptions or {}).items():
                auth = auth.subscription_granted(subscription, allowed)
            for topic, grants in (topics or {}).items():
                if namespace is not None and str(TopicName.parse(topic).namespace) != namespace:
                    raise ValueError(f"the topic {topic} of a grant is not in namespace {namespace}")
                for role, actions in grants.items():
                    auth = auth.topic_granted(topic, role, actions)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        return auth

    def to_doc(self) -> dict[str, Any]:
        return {
            "namespace_auth": {r: sorted(a) for r, a in sorted(self.roles.items())},
            "subscription_auth_roles": {s: sorted(r) for s, r in sorted(self.subscriptions.items())},
            "destination_auth": {t: {r: sorted(a) for r, a in sorted(g.items())} for t, g in sorted(self.topics.items())},
        }

    def on_topic(self, role: str, topic: str | None) -> frozenset[str]:
        """The actions ``role`` has on ``topic``: its namespace grant and its grant on the
        topic (on a partition: on its partitioned topic), as Pulsar's canProduce/canConsume."""
        granted = self.roles.get(role, frozenset())
        if topic and self.topics:
            granted = granted | self.topics.get(topic_key(topic), {}).get(role, frozenset())
        return granted

    def topic_granted(self, topic: str, role: str, actions: Iterable[str]) -> NamespaceAuth:
        """With ``role`` granted exactly ``actions`` on ``topic``.

        Raises: ValueError: as :meth:`granted`."""
        check_role(role)
        wanted = _grantable(actions)
        key = topic_key(topic)
        topics = {**self.topics, key: {**self.topics.get(key, {}), role: wanted}}
        return NamespaceAuth(self.roles, self.subscriptions, topics).bounded()

    def topic_revoked(self, topic: str, role: str) -> NamespaceAuth:
        """Without ``role``'s grant on ``topic`` (an emptied topic entry is removed)."""
        key = topic_key(topic)
        left = {r: a for r, a in self.topics.get(key, {}).items() if r != role}
        topics = {t: g for t, g in self.topics.items() if t != key}
        if left:
            topics[key] = left
        return NamespaceAuth(self.roles, self.subscriptions, topics)

    def granted(self, role: str, actions: Iterable[str]) -> NamespaceAuth:
        """With ``role`` granted exactly ``actions``.

        Raises: ValueError: an unknown action, a bad role, permissions over the bound."""
        check_role(role)
        return NamespaceAuth({**self.roles, role: _grantable(actions)}, self.subscriptions, self.topics).bounded()

    def revoked(self, role: str) -> NamespaceAuth:
        return NamespaceAuth({r: a for r, a in self.roles.items() if r != role}, self.subscriptions, self.topics)

    def subscription_granted(self, subscription: str, roles: Iterable[str]) -> NamespaceAuth:
        """With ``roles`` added to those that may consume ``subscription``.

        Raises: ValueError: no subscription or no role named, a bad name, permissions
        over the bound."""
        added = frozenset(check_role(r) for r in roles if r)
        if not subscription or not added:
            raise ValueError("name a subscription and at least one role")
        try:
            check_subscription_name(subscription)
        except InvalidArgument as exc:
            raise ValueError(exc.message) from None
        now = self.subscriptions.get(subscription, frozenset())
        return NamespaceAuth(self.roles, {**self.subscriptions, subscription: now | added}, self.topics).bounded()

    def bounded(self) -> NamespaceAuth:
        """Self. Raises: ValueError: over :data:`MAX_PERMISSIONS_BYTES` of JSON."""
        size = len(json.dumps(self.to_doc(), separators=(",", ":")).encode())
        if size > MAX_PERMISSIONS_BYTES:
            raise ValueError(
                f"the namespace's permissions would take {size:,} bytes, more than {MAX_PERMISSIONS_BYTES:,}: "
                "revoke roles that no longer need them, or use shorter role names"
            )
        return self

    def subscription_revoked(self, subscription: str, role: str) -> NamespaceAuth:
        """Without ``role`` on ``subscription``'s list (an emptied list is removed: any
        role with ``consume`` may consume the subscription again, as in Pulsar)."""
        left = self.subscriptions.get(subscription, frozenset()) - {role}
        subs = {s: r for s, r in self.subscriptions.items() if s != subscription}
        if left:
            subs[subscription] = left
        return NamespaceAuth(self.roles, subs, self.topics)


@dataclass(frozen=True)
class Request:
    """One thing a role wants to do."""

    action: Action
    topic: str | None = None
    """The topic (full name) for produce, consume and topic admin."""
    subscription: str | None = None
    """The subscription consumed (consume), if any."""
    letters: Mapping[str, str] = field(default_factory=dict)
    """For produce: the retry letter and dead letter topics of the subscriptions the role
    consumes (as their dead-letter policies resolve them) -> that subscription."""
    namespace: str | None = None
    """``tenant/namespace`` of a namespace-level request (no topic)."""
    tenant: str | None = None
    """The tenant of a tenant-level request (no topic, no namespace)."""

    def what(self) -> str:
        """The action and its object, for refusals and logs."""
        target = self.topic or self.namespace or self.tenant
        sub = f" (subscription {self.subscription})" if self.subscription else ""
        return f"{self.action.value} on {target}{sub}" if target else self.action.value


def authorize(
    role: str | None, request: Request, *, superusers: Iterable[str], tenant_admins: Iterable[str],
    namespace: NamespaceAuth,
) -> bool:
    """True when ``role`` may do ``request`` (see the module docstring). ``tenant_admins``
    and ``namespace`` are those of the tenant and namespace the request is about."""
    if role is None:
        return False
    if role in set(superusers):
        return True
    if request.action is Action.ADMIN_TENANT:
        return False
    if role in set(tenant_admins):
        return True
    if request.action in (Action.ADMIN_NAMESPACE, Action.ADMIN_TOPIC):
        return False
    granted = namespace.on_topic(role, request.topic)
    if request.action is Action.LOOKUP:
        return bool(granted & {"produce", "consume"})
    if request.action is Action.CONSUME:
        if "consume" not in granted:
            return False
        allowed = namespace.subscriptions.get(request.subscription or "")
        return allowed is None or role in allowed
    if "produce" in granted:
        return True
    # A consumer's retry and dead-letter copies: allowed on its own subscription's letters.
    sub = request.letters.get(request.topic or "")
    if "consume" in granted and sub is not None:
        allowed = namespace.subscriptions.get(sub)
        return allowed is None or role in allowed
    return False
