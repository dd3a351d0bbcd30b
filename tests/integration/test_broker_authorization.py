"""Authorization at the broker's door, with real processes: bookies and a broker with
authentication and authorization on.

- producer-only, consumer-only, tenant admin and ungranted roles get what Pulsar's model
  gives them over gRPC, and a refusal changes nothing;
- a consumer's retry letters in its own namespace need no produce grant; letters in
  another namespace need produce and consume there, and a subscribe refused for them
  makes no subscription;
- revoking a grant cuts an open consumer and an open producer off within 5 s.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

import magnetar.asyncio as ma
from magnetar.client.admin import AdminClient
from magnetar.common.errors import AuthorizationError
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.schema import StringSchema
from magnetar.testing.auth import Keys
from magnetar.testing.processes import BookieProcess, BrokerProcess, ServiceFactory, start_all

pytestmark = pytest.mark.integration

NS = "acme/orders"
TOPIC = f"persistent://{NS}/in"


@pytest.fixture
def broker(keys: Keys, bookie_factory: ServiceFactory[BookieProcess],
           broker_factory: ServiceFactory[BrokerProcess]) -> BrokerProcess:
    broker = broker_factory.create(
        ensemble_size=1, write_quorum=1, ack_quorum=1, authorization_cache_ttl_s=2.0,
        **keys.settings(authorization_enabled=True, broker_client_auth_token_file=str(keys.service_token_file)),
    )
    start_all([bookie_factory.create(**keys.settings()), broker])  # start-ups overlap
    return broker


def client(broker: BrokerProcess, keys: Keys, role: str) -> ma.Client:
    return ma.Client(broker.address, authentication=ma.AuthenticationToken(keys.token(role)), operation_timeout_seconds=15)


async def grant(admin: AdminClient, namespace: str, role: str, *actions: str) -> None:
    await admin.call(lambda stub: stub.GrantPermission(pb.GrantPermissionRequest(namespace=namespace, role=role, actions=actions)))


async def revoke(admin: AdminClient, namespace: str, role: str) -> None:
    await admin.call(lambda stub: stub.RevokePermission(pb.RevokePermissionRequest(namespace=namespace, role=role)))


@pytest.fixture
async def admin(broker: BrokerProcess, keys: Keys) -> AdminClient:
    admin = AdminClient(broker.address, 15, token=lambda: keys.service_token)
    await admin.create_tenant("acme", pb.TenantInfo(admin_roles=["acme-admin"], allowed_clusters=["standalone"]))
    await admin.create_namespace(NS)
    await admin.create_tenant("other", pb.TenantInfo(admin_roles=["other-admin"], allowed_clusters=["standalone"]))
    await admin.create_namespace("other/ns")
    await grant(admin, NS, "writer", "produce")
    await grant(admin, NS, "reader", "consume")
    yield admin
    await admin.close()


async def test_roles_get_what_their_grants_give_over_grpc(broker: BrokerProcess, keys: Keys, admin: AdminClient) -> None:
    writer, reader = client(broker, keys, "writer"), client(broker, keys, "reader")
    tenant_admin, stranger = client(broker, keys, "acme-admin"), client(broker, keys, "stranger")
    try:
        producer = await writer.create_producer(TOPIC)
        await producer.send(b"one")
        with pytest.raises(AuthorizationError, match="role 'writer' is not authorized to consume"):
            await writer.subscribe(TOPIC, "s")
        consumer = await reader.subscribe(TOPIC, "s", initial_position=ma.InitialPosition.Earliest)
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"one"
        with pytest.raises(AuthorizationError, match="role 'reader' is not authorized to produce"):
            await reader.create_producer(TOPIC)
        for c in (stranger, writer, reader):
            with pytest.raises(AuthorizationError):
                await c.create_producer("persistent://other/ns/t")
        with pytest.raises(AuthorizationError):
            await stranger.subscribe(TOPIC, "s2")
        # Schemas: declared with the produce (or consume) grant; GetSchema needs lookup.
        typed = await writer.create_producer(f"persistent://{NS}/typed", schema=StringSchema())
        assert (await reader._pool.get_schema(f"persistent://{NS}/typed")).schema.type == 1  # STRING
        with pytest.raises(AuthorizationError):
            await stranger._pool.get_schema(f"persistent://{NS}/typed")
        await typed.close()

        # Administration: the tenant's admin, not its producers; nobody else's tenant.
        as_admin = AdminClient(broker.address, 15, token=lambda: keys.token("acme-admin"))
        as_writer = AdminClient(broker.address, 15, token=lambda: keys.token("writer"))
        try:
            await as_admin.create_topic(f"persistent://{NS}/made-by-admin")
            await grant(as_admin, NS, "late", "consume")
            with pytest.raises(AuthorizationError):
                await as_admin.create_topic("persistent://other/ns/not-mine")
            with pytest.raises(AuthorizationError):
                await as_admin.delete_tenant("acme")
            with pytest.raises(AuthorizationError):
                await as_writer.create_topic(f"persistent://{NS}/made-by-writer")
            with pytest.raises(AuthorizationError):
                await grant(as_writer, NS, "writer", "produce", "consume")
            assert (await as_writer.topic_stats(TOPIC)).msg_in_counter >= 1  # lookup and stats: produce suffices
        finally:
            await as_admin.close()
            await as_writer.close()
        # Refusals changed nothing.
        topics = await admin.topics(NS)
        assert f"persistent://{NS}/made-by-admin" in topics and f"persistent://{NS}/made-by-writer" not in topics
        assert "persistent://other/ns/not-mine" not in await admin.topics("other/ns")
        perms = await admin.call(lambda stub: stub.GetPermissions(pb.GetPermissionsRequest(namespace=NS)))
        assert {r: list(a.names) for r, a in perms.roles.items()} == {
            "late": ["consume"], "reader": ["consume"], "writer": ["produce"],
        }
        _ = tenant_admin
    finally:
        for c in (writer, reader, tenant_admin, stranger):
            await c.close()
    log = broker.log_tail(400)
    assert "refused: role 'writer' may not consume on persistent://acme/orders/in" in log
    assert keys.token("writer") not in log


async def test_retry_letters_need_no_produce_grant_in_their_own_namespace(
    broker: BrokerProcess, keys: Keys, admin: AdminClient
) -> None:
    writer, reader = client(broker, keys, "writer"), client(broker, keys, "reader")
    try:
        consumer = await reader.subscribe(
            TOPIC, "retrying", initial_position=ma.InitialPosition.Earliest, enable_retry=True,
            dead_letter_policy=ma.ConsumerDeadLetterPolicy(max_redeliver_count=3),
        )
        producer = await writer.create_producer(TOPIC)
        await producer.send(b"again")
        msg = await consumer.receive(timeout_millis=10_000)
        await consumer.reconsume_later(msg, timedelta(seconds=1))
        again = await consumer.receive(timeout_millis=10_000)
        assert again.data() == b"again" and again.redelivery_count() >= 1
        await consumer.acknowledge(again)
        # Letters in another tenant's namespace would let a consumer write there.
        escaping = ma.ConsumerDeadLetterPolicy(retry_letter_topic="persistent://other/ns/stolen")
        with pytest.raises(AuthorizationError, match="produce on persistent://other/ns/stolen"):
            await reader.subscribe(TOPIC, "escaping", enable_retry=True, dead_letter_policy=escaping)
        assert "escaping" not in await admin.subscriptions(TOPIC)  # refused before it was made
        # Produce there is not enough: the moves would keep the copies in a subscription there.
        await grant(admin, "other/ns", "reader", "produce")
        with pytest.raises(AuthorizationError, match=r"consume on persistent://other/ns/stolen \(subscription escaping\)"):
            await reader.subscribe(TOPIC, "escaping", enable_retry=True, dead_letter_policy=escaping)
        assert "escaping" not in await admin.subscriptions(TOPIC)
        # With both there (and its DLQ there too: the retry topic's own subscription is
        # checked the same way from other/ns), the subscribe is taken.
        await grant(admin, "other/ns", "reader", "produce", "consume")
        both = ma.ConsumerDeadLetterPolicy(
            retry_letter_topic="persistent://other/ns/stolen", dead_letter_topic="persistent://other/ns/stolen-DLQ")
        await reader.subscribe(TOPIC, "escaping", enable_retry=True, dead_letter_policy=both)
        assert "escaping" in await admin.subscriptions(TOPIC)
    finally:
        await writer.close()
        await reader.close()


async def test_revoking_a_grant_cuts_open_streams_off_within_5_s(
    broker: BrokerProcess, keys: Keys, admin: AdminClient
) -> None:
    writer, reader = client(broker, keys, "writer"), client(broker, keys, "reader")
    try:
        consumer = await reader.subscribe(TOPIC, "cut", initial_position=ma.InitialPosition.Earliest)
        producer = await writer.create_producer(TOPIC)
        await producer.send(b"before")
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"before"

        revoked = time.monotonic()
        await revoke(admin, NS, "reader")
        await revoke(admin, NS, "writer")

        async def consumer_cut() -> float:
            while True:
                try:
                    await consumer.receive(timeout_millis=200)
                except AuthorizationError:
                    return time.monotonic() - revoked
                except ma.Timeout:
                    continue

        async def producer_cut() -> float:
            while True:
                try:
                    await producer.send(b"after", )
                except AuthorizationError:
                    return time.monotonic() - revoked
                await asyncio.sleep(0.1)

        consumer_s, producer_s = await asyncio.wait_for(asyncio.gather(consumer_cut(), producer_cut()), 15)
        print(f"consumer cut off {consumer_s:.2f} s and producer {producer_s:.2f} s after the revocation")
        assert consumer_s < 5.0 and producer_s < 5.0
        # And they cannot come back.
        with pytest.raises(AuthorizationError):
            await reader.subscribe(TOPIC, "cut")
    finally:
        await writer.close()
        await reader.close()
