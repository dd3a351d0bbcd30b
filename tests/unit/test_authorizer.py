"""The broker's Authorizer over an in-memory document store: decisions from tenants'
admin roles and namespaces' grants, the cache's time to live, and permission changes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from magnetar.broker.authorization import Action, Request
from magnetar.broker.authorizer import Authorizer
from magnetar.common.errors import (
    AuthorizationError,
    InvalidArgument,
    NamespaceNotFound,
    TenantNotFound,
)

T = "persistent://acme/orders/in"


class Docs:
    """Tenants and namespaces' documents, counting reads."""

    def __init__(self) -> None:
        self.tenants: dict[str, dict[str, Any]] = {"acme": {"admin_roles": ["acme-admin"]}, "other": {}}
        self.namespaces: dict[str, dict[str, Any]] = {"acme/orders": {"retention": 1}, "other/ns": {}}
        self.reads = 0

    async def get_tenant(self, name: str) -> dict[str, Any]:
        self.reads += 1
        if name not in self.tenants:
            raise TenantNotFound(name)
        return dict(self.tenants[name])

    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]:
        self.reads += 1
        key = f"{tenant}/{namespace}"
        if key not in self.namespaces:
            raise NamespaceNotFound(key)
        return dict(self.namespaces[key])

    async def update_policies(
        self, tenant: str, namespace: str, fn: Callable[[dict[str, Any]], Mapping[str, Any]]
    ) -> dict[str, Any]:
        doc = await self.get_policies(tenant, namespace)
        self.namespaces[f"{tenant}/{namespace}"] = dict(fn(doc))
        return self.namespaces[f"{tenant}/{namespace}"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def docs() -> Docs:
    return Docs()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def authorizer(docs: Docs, clock: Clock) -> Authorizer:
    return Authorizer(docs, ["root"], ttl_s=2.0, clock=clock)


async def test_superusers_pass_without_reading_anything(authorizer: Authorizer, docs: Docs) -> None:
    assert await authorizer.allowed("root", Request(Action.ADMIN_TENANT, tenant="acme"))
    assert await authorizer.allowed("root", Request(Action.PRODUCE, "persistent://nowhere/ns/t"))
    assert docs.reads == 0


async def test_grants_decide_and_the_grant_is_stored_in_the_namespace_document(authorizer: Authorizer, docs: Docs) -> None:
    assert not await authorizer.allowed("app", Request(Action.PRODUCE, T))
    await authorizer.grant("acme/orders", "app", ["produce"])
    assert docs.namespaces["acme/orders"]["namespace_auth"] == {"app": ["produce"]}
    assert docs.namespaces["acme/orders"]["retention"] == 1  # other keys kept
    assert await authorizer.allowed("app", Request(Action.PRODUCE, T))  # forgotten at once here
    assert await authorizer.allowed("app", Request(Action.LOOKUP, T))
    assert not await authorizer.allowed("app", Request(Action.CONSUME, T, "s"))
    assert not await authorizer.allowed("app", Request(Action.PRODUCE, "persistent://other/ns/t"))
    with pytest.raises(AuthorizationError, match="role 'app' is not authorized to consume on persistent://acme/orders/in"):
        await authorizer.check("app", Request(Action.CONSUME, T, "s"))


async def test_a_change_made_elsewhere_is_seen_after_the_ttl(authorizer: Authorizer, docs: Docs, clock: Clock) -> None:
    await authorizer.grant("acme/orders", "app", ["consume"])
    assert await authorizer.allowed("app", Request(Action.CONSUME, T, "s"))
    docs.namespaces["acme/orders"]["namespace_auth"] = {}  # revoked through another broker
    clock.now += 1.9
    assert await authorizer.allowed("app", Request(Action.CONSUME, T, "s"))  # cached
    clock.now += 0.2
    assert not await authorizer.allowed("app", Request(Action.CONSUME, T, "s"))


async def test_tenant_admins_and_missing_tenants(authorizer: Authorizer) -> None:
    assert await authorizer.allowed("acme-admin", Request(Action.ADMIN_NAMESPACE, namespace="acme/new"))
    assert await authorizer.allowed("acme-admin", Request(Action.ADMIN_TOPIC, T))
    assert not await authorizer.allowed("acme-admin", Request(Action.ADMIN_TENANT, tenant="acme"))
    assert not await authorizer.allowed("acme-admin", Request(Action.ADMIN_NAMESPACE, namespace="other/ns"))
    assert not await authorizer.allowed("acme-admin", Request(Action.ADMIN_NAMESPACE, namespace="ghost/ns"))
    assert not await authorizer.allowed(None, Request(Action.LOOKUP, T))


async def test_subscription_lists_and_bad_changes(authorizer: Authorizer, docs: Docs) -> None:
    await authorizer.grant("acme/orders", "a", ["consume"])
    await authorizer.grant("acme/orders", "b", ["consume"])
    await authorizer.grant_subscription("acme/orders", "audit", ["a"])
    assert await authorizer.allowed("a", Request(Action.CONSUME, T, "audit"))
    assert not await authorizer.allowed("b", Request(Action.CONSUME, T, "audit"))
    assert await authorizer.allowed("b", Request(Action.CONSUME, T, "other"))
    await authorizer.revoke_subscription("acme/orders", "audit", "a")
    assert "audit" not in (await authorizer.permissions("acme/orders")).subscriptions  # empty list: open again
    before = dict(docs.namespaces["acme/orders"])
    with pytest.raises(InvalidArgument, match="unknown actions"):
        await authorizer.grant("acme/orders", "a", ["produce", "steal"])
    with pytest.raises(InvalidArgument):
        await authorizer.grant("acme/orders", "", ["produce"])
    with pytest.raises(NamespaceNotFound):
        await authorizer.grant("acme/ghost", "a", ["produce"])
    assert docs.namespaces["acme/orders"] == before
    await authorizer.revoke("acme/orders", "a")
    assert set((await authorizer.permissions("acme/orders")).roles) == {"b"}
