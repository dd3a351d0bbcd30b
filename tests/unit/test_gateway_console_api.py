"""The REST endpoints the web console adds, without a network: ``/admin/v2/whoami`` (what
the calling role may do, decided as the brokers decide, over fake tenant and namespace
documents) and ``/admin/v2/peek`` (many messages of a subscription as JSON, decoded with
the topic's schema), through the real app and token middleware."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from magnetar.common import tokens
from magnetar.common.errors import NamespaceNotFound, SchemaNotFound, TenantNotFound
from magnetar.gateway.app import create_app
from magnetar.gateway.rest_schemas import RestSchema
from magnetar.proto.v1 import broker_pb2 as pb

KEY = tokens.generate_secret_key()
TOPIC = "persistent://acme/orders/created"
SUB_OPS = ("PersistentTopics_resetCursor", "PersistentTopics_skipMessages", "PersistentTopics_skipAllMessages",
           "PersistentTopics_deleteSubscription", "PersistentTopics_createSubscription", "Magnetar_peekMessages",
           "Magnetar_replayDeadLetters", "Magnetar_purgeDeadLetters")


class FakeDocuments:
    """The tenant and namespace documents the brokers authorize with (ZkTenantStore's shape)."""

    def __init__(self) -> None:
        self.tenants = {"acme": {"admin_roles": ["acme-admin"], "allowed_clusters": ["standalone"]}}
        self.policies = {("acme", "orders"): {
            "namespace_auth": {"reader": ["consume"], "writer": ["produce"]},
            "subscription_auth_roles": {"billing": ["billing-app"]},
            "destination_auth": {},
        }}
        self.reads = 0

    async def get_tenant(self, name: str) -> dict[str, Any]:
        self.reads += 1
        if name not in self.tenants:
            raise TenantNotFound(name)
        return self.tenants[name]

    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]:
        self.reads += 1
        if (tenant, namespace) not in self.policies:
            raise NamespaceNotFound(f"{tenant}/{namespace}")
        return self.policies[(tenant, namespace)]


def _context(authentication: bool, admin: Any = None) -> SimpleNamespace:
    return SimpleNamespace(
        authenticator=tokens.TokenAuthenticator("HS256", KEY) if authentication else None,
        config=SimpleNamespace(superuser_roles=["root"]), tenants=FakeDocuments(), admin=admin,
    )


@pytest.fixture
async def secured() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(_context(authentication=True))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        yield client


def _as(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens.create_token(role, KEY)}"}


async def _ops(http: httpx.AsyncClient, role: str, **query: str) -> dict[str, bool]:
    reply = await http.get("/admin/v2/whoami", params=query, headers=_as(role))
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["role"] == role and body["authenticationEnabled"] is True
    return body["operations"]


async def test_whoami_answers_each_operation_as_the_brokers_would_decide_it(secured: httpx.AsyncClient):
    on_sub = {"topic": TOPIC, "subscription": "audit"}
    root = await _ops(secured, "root", **on_sub)
    assert all(root[op] for op in (*SUB_OPS, "Topics_produceOnPersistentTopic", "PersistentTopics_deleteTopic"))
    admin = await _ops(secured, "acme-admin", **on_sub)
    assert all(admin.values()) and len(admin) == len(root)
    reader = await _ops(secured, "reader", **on_sub)
    assert all(reader[op] for op in SUB_OPS)  # consume on the namespace: its subscriptions' operations
    assert not reader["Topics_produceOnPersistentTopic"] and not reader["PersistentTopics_deleteTopic"]
    assert reader["PersistentTopics_getStats"] and not reader["Namespaces_getPolicies"]
    writer = await _ops(secured, "writer", **on_sub)
    assert writer["Topics_produceOnPersistentTopic"] and not any(writer[op] for op in SUB_OPS)
    stranger = await _ops(secured, "stranger", **on_sub)
    assert not any(stranger.values())


async def test_a_subscription_kept_for_other_roles_is_not_offered(secured: httpx.AsyncClient):
    """``billing`` may be consumed by billing-app only: reader has consume but not there."""
    reader = await _ops(secured, "reader", topic=TOPIC, subscription="billing")
    assert not any(reader[op] for op in SUB_OPS) and reader["PersistentTopics_getStats"]


async def test_whoami_without_a_scope_names_the_role_and_no_operation(secured: httpx.AsyncClient):
    reply = (await secured.get("/admin/v2/whoami", headers=_as("root"))).json()
    assert (reply["role"], reply["superuser"], reply["operations"]) == ("root", True, {})
    ns = await _ops(secured, "reader", namespace="acme/orders")
    assert ns == {"Namespaces_getTopics": True, "Namespaces_getPolicies": False, "Magnetar_getDeadLetterTopics": True}
    assert (await secured.get("/admin/v2/whoami")).status_code == 401  # no token: refused, as every API call


async def test_whoami_refuses_bad_input(secured: httpx.AsyncClient):
    lone = await secured.get("/admin/v2/whoami", params={"subscription": "s"}, headers=_as("root"))
    assert lone.status_code == 400 and "subscription goes with topic" in lone.json()["reason"]
    bad = await secured.get("/admin/v2/whoami", params={"topic": "persistent://bad tenant/ns/t"}, headers=_as("root"))
    assert bad.status_code == 412 and "invalid topic name" in bad.json()["reason"]  # Pulsar answers a bad name 412


async def test_without_authentication_everything_is_offered():
    app = create_app(_context(authentication=False))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        body = (await http.get("/admin/v2/whoami", params={"topic": TOPIC, "subscription": "s"})).json()
    assert body["role"] is None and body["superuser"] is True and body["authenticationEnabled"] is False
    assert body["operations"] and all(body["operations"].values())


# -- peek ------------------------------------------------------------------------------
AVRO = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]}, {"name": "raw", "type": "bytes"}]})


def _version(n: int) -> bytes:
    return n.to_bytes(8, "big")


class FakeAdmin:
    def __init__(self, messages: list[pb.PeekMessageResponse], schemas: list[pb.TopicSchema]) -> None:
        self.messages, self.schemas, self.peeks = messages, schemas, []

    async def partitions(self, topic: str) -> int:
        return 0

    async def peek_messages(self, topic: str, subscription: str, position: int, count: int) -> list[pb.PeekMessageResponse]:
        self.peeks.append((topic, subscription, position, count))
        return self.messages[position - 1 : position - 1 + count]

    async def all_schemas(self, topic: str) -> list[pb.TopicSchema]:
        if not self.schemas:
            raise SchemaNotFound(topic)
        return self.schemas


def _message(entry: int, payload: bytes, version: int | None = None, **fields: Any) -> pb.PeekMessageResponse:
    return pb.PeekMessageResponse(
        found=True, message_id=pb.MessageIdData(ledger_id=7, entry_id=entry, partition=-1, batch_index=-1),
        publish_time_ms=1_714_557_600_000 + entry, producer_name="p-1",
        message=pb.SingleMessage(payload=payload, properties={"n": str(entry)}, sequence_id=entry),
        schema_version=_version(version) if version is not None else b"", **fields,
    )


async def test_peek_answers_messages_decoded_with_their_schema_version():
    avro = pb.SchemaInfo(type=4, name="Order", data=AVRO.encode())
    record = RestSchema(avro).encode(json.dumps({"id": 42, "note": {"string": "rush"}, "raw": "\u00ff"}))
    messages = [
        _message(0, json.dumps({"a": [1, 2]}).encode(), 0),
        _message(1, record, 1),
        _message(2, b"\x00\x00\x01\x00", 2),
        _message(3, b"not json", 0),
        _message(4, b"\x01\x02", None),
        _message(5, b"x", 9),
    ]
    admin = FakeAdmin(messages, [pb.TopicSchema(version=0, schema=pb.SchemaInfo(type=2, data=b"{}")),
                                 pb.TopicSchema(version=1, schema=avro),
                                 pb.TopicSchema(version=2, schema=pb.SchemaInfo(type=8))])
    app = create_app(_context(authentication=False, admin=admin))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        reply = await http.get("/admin/v2/peek/acme/orders/created/subscription/audit", params={"count": 6})
        assert reply.status_code == 200, reply.text
        got = reply.json()
        assert admin.peeks == [(TOPIC, "audit", 1, 6)]
        too_many = await http.get("/admin/v2/peek/acme/orders/created/subscription/audit", params={"count": 101})
        assert too_many.status_code == 400 and admin.peeks == [(TOPIC, "audit", 1, 6)]
    assert [m["messageId"] for m in got] == [f"7:{i}" for i in range(6)]
    assert (got[0]["schemaType"], got[0]["value"]) == ("JSON", {"a": [1, 2]})
    assert (got[1]["schemaType"], got[1]["value"]) == ("AVRO", {"id": 42, "note": "rush", "raw": base64.b64encode(b"\xff").decode()})
    assert (got[2]["schemaType"], got[2]["value"]) == ("INT32", 256)
    assert got[3]["value"] is None and "not a JSON value" in got[3]["decodeError"]
    assert got[4]["schemaType"] is None and got[4]["decodeError"] is None and base64.b64decode(got[4]["payload"]) == b"\x01\x02"
    assert got[5]["schemaVersion"] == 9 and "not a live version" in got[5]["decodeError"]
    assert got[1]["properties"] == {"n": "1"} and got[1]["size"] == len(record) and got[1]["producerName"] == "p-1"


def test_decode_value_reads_primitives_and_refuses_what_it_cannot():
    from magnetar.common.errors import InvalidArgument
    from magnetar.gateway.schema_values import decode_value

    assert decode_value(pb.SchemaInfo(type=5), b"\x01") is True
    assert decode_value(pb.SchemaInfo(type=11), b"\x7f\xf8\x00\x00\x00\x00\x00\x00") == "nan"  # JSON has no NaN
    assert decode_value(pb.SchemaInfo(type=9), (-2).to_bytes(8, "big", signed=True)) == -2
    assert decode_value(pb.SchemaInfo(type=1), "zürich".encode()) == "zürich"
    for info, data, reason in (
        (pb.SchemaInfo(type=5), b"\x02", "not a BOOLEAN value"),
        (pb.SchemaInfo(type=8), b"\x00\x01", "not a INT32 value"),
        (pb.SchemaInfo(type=20), b"\x08\x01", "PROTOBUF_NATIVE payloads are not decoded"),
        (pb.SchemaInfo(type=4, data=AVRO.encode()), b"\x54\x00\x02\xff\x00", "bytes are left after the record"),
    ):
        with pytest.raises(InvalidArgument, match=reason):
            decode_value(info, data)


class FakeDlqAdmin:
    def __init__(self) -> None:
        self.cleared: list[tuple[str, str]] = []

    async def subscriptions(self, topic: str) -> list[str]:
        return ["s-DLQ-sub"]

    async def clear_backlog(self, topic: str, subscription: str) -> None:
        self.cleared.append((topic, subscription))


class NoClient:
    """A caller client no call should reach: bad input is refused before subscribing."""

    async def subscribe(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("subscribed for a purge that should have been refused")


async def test_a_purge_of_chosen_messages_refuses_bad_ids_and_changes_nothing():
    from contextlib import asynccontextmanager

    admin = FakeDlqAdmin()
    context = _context(authentication=False, admin=admin)

    @asynccontextmanager
    async def caller_client():  # type: ignore[no-untyped-def]
        yield NoClient()

    context.caller_client = caller_client
    app = create_app(context)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        url = "/admin/v2/dlq/acme/orders/created-s-DLQ/purge"
        empty = await http.post(url, json={"messageIds": []})
        assert empty.status_code == 400 and "name the messages to purge" in empty.json()["reason"]
        garbage = await http.post(url, json={"messageIds": ["not-an-id"]})
        assert garbage.status_code == 400, garbage.text
        assert admin.cleared == []
        whole = await http.post(url)  # no body: the whole backlog, as before
        assert whole.status_code == 200 and whole.json() == {"subscription": "s-DLQ-sub"}
    assert admin.cleared == [("persistent://acme/orders/created-s-DLQ", "s-DLQ-sub")]
