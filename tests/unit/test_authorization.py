"""Pulsar's authorization model as a pure decision: superusers, tenant admins, namespace
grants, subscription role lists, retry/DLQ letters; anonymous and other roles refused."""

from __future__ import annotations

import pytest

from magnetar.broker.authorization import (
    MAX_PERMISSIONS_BYTES,
    MAX_ROLE_LENGTH,
    Action,
    NamespaceAuth,
    Request,
    authorize,
)

T = "persistent://acme/orders/in"
NS = NamespaceAuth({"writer": frozenset({"produce"}), "reader": frozenset({"consume"}),
                    "both": frozenset({"produce", "consume"})}, {"audit": frozenset({"auditor-role"})})


def may(role: str | None, request: Request, namespace: NamespaceAuth = NS) -> bool:
    return authorize(role, request, superusers=["root"], tenant_admins=["acme-admin"], namespace=namespace)


@pytest.mark.parametrize(("role", "action", "expected"), [
    ("root", Action.ADMIN_TENANT, True), ("acme-admin", Action.ADMIN_TENANT, False),
    ("acme-admin", Action.ADMIN_NAMESPACE, True), ("acme-admin", Action.ADMIN_TOPIC, True),
    ("acme-admin", Action.PRODUCE, True), ("acme-admin", Action.CONSUME, True),
    ("writer", Action.PRODUCE, True), ("writer", Action.CONSUME, False), ("writer", Action.ADMIN_TOPIC, False),
    ("reader", Action.CONSUME, True), ("reader", Action.PRODUCE, False), ("reader", Action.ADMIN_NAMESPACE, False),
    ("both", Action.PRODUCE, True), ("both", Action.CONSUME, True),
    ("stranger", Action.PRODUCE, False), ("stranger", Action.CONSUME, False),
    (None, Action.PRODUCE, False), (None, Action.CONSUME, False), (None, Action.ADMIN_TENANT, False),
])
def test_the_matrix_of_roles_and_actions(role, action, expected):
    assert may(role, Request(action, T, "s")) is expected


def test_a_subscription_role_list_narrows_who_may_consume_it():
    assert not may("reader", Request(Action.CONSUME, T, "audit"))
    auditor = NamespaceAuth({"auditor-role": frozenset({"consume"})}, NS.subscriptions)
    assert may("auditor-role", Request(Action.CONSUME, T, "audit"), auditor)
    assert may("reader", Request(Action.CONSUME, T, "other"))


def test_a_consumer_may_write_its_own_subscriptions_retry_and_dead_letters_only():
    letters = {f"{T}-s-RETRY": "s", f"{T}-s-DLQ": "s"}
    assert may("reader", Request(Action.PRODUCE, f"{T}-s-DLQ", letters=letters))
    assert may("reader", Request(Action.PRODUCE, f"{T}-s-RETRY", letters=letters))
    assert not may("reader", Request(Action.PRODUCE, T, letters=letters))
    assert not may("reader", Request(Action.PRODUCE, f"{T}-x-DLQ", letters=letters))
    audit = {f"{T}-audit-DLQ": "audit"}
    assert not may("reader", Request(Action.PRODUCE, f"{T}-audit-DLQ", letters=audit))  # not on its list


def test_grants_round_trip_and_unknown_actions_are_refused():
    auth = NamespaceAuth().granted("r", ["produce", "functions"])
    assert NamespaceAuth.from_doc(auth.to_doc()) == auth
    assert auth.revoked("r") == NamespaceAuth()
    with pytest.raises(ValueError, match="unknown actions"):
        auth.granted("r", ["delete-everything"])


def test_grants_are_bounded_so_the_policies_document_stays_small():
    """The fuzzer's: tens of thousands of grants of long random roles kept rewriting a
    policies znode near ZooKeeper's 1 MB, and the test ZooKeeper (1 GB heap) ran out of
    memory. Role names, subscription names and the permissions' size are bounded; a
    refused grant leaves the permissions as they were."""
    auth = NamespaceAuth()
    with pytest.raises(ValueError, match="1,025 characters long"):
        auth.granted("r" * (MAX_ROLE_LENGTH + 1), ["produce"])
    with pytest.raises(ValueError, match="name the role"):
        auth.granted("", ["produce"])
    with pytest.raises(ValueError, match="characters long"):
        auth.subscription_granted("sub", ["ok", "x" * 5000])
    with pytest.raises(ValueError, match="invalid subscription name"):
        auth.subscription_granted("a/b", ["ok"])
    assert auth.granted("r" * MAX_ROLE_LENGTH, ["produce"]).roles  # the longest role is fine
    n = 0
    while True:
        role = f"{n:04d}-" + "r" * 995
        try:
            auth = auth.granted(role, ["produce", "consume"])
        except ValueError as exc:
            assert "more than 262,144" in str(exc) and "revoke" in str(exc)
            break
        n += 1
    assert 200 < n < 300 and role not in auth.roles
    assert len(str(auth.to_doc())) < MAX_PERMISSIONS_BYTES + 10_000
    # Revoking one makes room for one again.
    assert role in auth.revoked("0000-" + "r" * 995).granted(role, ["produce"]).roles
    with pytest.raises(ValueError, match="more than 262,144"):
        auth.subscription_granted("s", [role])


def test_a_topic_grant_is_for_that_topic_and_its_partitions_only():
    auth = NamespaceAuth().topic_granted(T, "app", ["consume"]).topic_granted(
        "persistent://acme/orders/parted", "app", ["produce"])
    other = "persistent://acme/orders/other"
    assert may("app", Request(Action.CONSUME, T, "s"), auth) and may("app", Request(Action.LOOKUP, T), auth)
    assert not may("app", Request(Action.PRODUCE, T), auth)
    assert not may("app", Request(Action.CONSUME, other, "s"), auth)
    assert not may("app", Request(Action.LOOKUP, other), auth)
    assert not may("app", Request(Action.LOOKUP, namespace="acme/orders"), auth)  # listing the namespace
    assert may("app", Request(Action.PRODUCE, "persistent://acme/orders/parted-partition-3"), auth)
    assert not may("other-role", Request(Action.CONSUME, T, "s"), auth)
    # Added to the namespace grant; a subscription list still narrows it.
    both = NS.topic_granted(T, "writer", ["consume"])
    assert may("writer", Request(Action.PRODUCE, other), both) and may("writer", Request(Action.CONSUME, T, "s"), both)
    assert not may("writer", Request(Action.CONSUME, T, "audit"), both)


def test_topic_grants_round_trip_and_revoke():
    auth = NS.topic_granted(T, "app", ["consume", "produce"]).topic_granted(T, "ops", ["consume"])
    doc = auth.to_doc()
    assert doc["destination_auth"] == {T: {"app": ["consume", "produce"], "ops": ["consume"]}}
    assert NamespaceAuth.from_doc(doc) == auth
    revoked = auth.topic_revoked(T, "app").topic_revoked(T, "ops")
    assert revoked.topics == {} and revoked.roles == NS.roles and revoked.subscriptions == NS.subscriptions
    with pytest.raises(ValueError, match="unknown actions"):
        NS.topic_granted(T, "app", ["fly"])
    with pytest.raises(ValueError):
        NS.topic_granted(T, "", ["consume"])
    # Grants on the namespace or a subscription keep the topic grants.
    assert auth.granted("x", ["produce"]).revoked("x").subscription_granted("s", ["app"]).topics == auth.topics
