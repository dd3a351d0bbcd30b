"""Issue 16's isolation matrix, with real processes: a bookie, a broker with
authentication and authorization on, and a gateway with authentication on.

2 tenants (``alpha``, whose roles the identities are, and ``beta``) × 11 identities ×
9 actions × 4 doors (gRPC through the SDK and the admin client, REST, WebSocket, and
Pulsar's binary protocol in raw frames). Every cell is tried for real (several at a time,
each on names of its own) and its outcome compared with Pulsar's model: ``ok``, ``401``
(who you are is not proven) or ``403`` (not allowed). WebSocket has no admin API and no lookups, the Pulsar door no admin API: those
cells are ``–``, as is the Pulsar door's dead-letter cell (a pulsar-client's dead-letter
policy is the client's own, the broker never sees it). "lookup" and "partitions" need
produce or consume on the namespace (Pulsar's ``canLookup``). REST consume is a peek of a subscription's message (it needs
consume), REST produce is Pulsar's REST producer. A WebSocket consumer starts at the latest
message (Pulsar's), so its subscription is made first, at the earliest, by the superuser.
"subscribe, DLQ in other tenant" subscribes with a dead letter topic in the other
tenant's namespace (the SDK's ``dead_letter_policy``, the WebSocket's
``deadLetterTopic=``): the moves would write there, so it needs produce there (REST has no
subscribe). "replay DLQ" replays a DLQ of the tenant into its ``data`` topic through the
gateway (Magnetar's REST route only): consume on the DLQ and produce on the target.

After the matrix a role's grant is revoked while its pulsar-client producer and consumer
are open: the broker closes both within the gRPC door's bound (5 s).

A refusal changes nothing: after the matrix, the superuser checks that exactly the
messages of allowed produce and replay cells are stored, that refused subscriptions,
topics and grants do not exist, that refused replays left their DLQ's message, and that
refused tenant deletions left their tenants. A refused WebSocket upgrade is an answer,
not a server error: the gateway logs no ERROR for one. The bookie (superusers of the
services only) answers every add of a refused add stream with its refusal, stores nothing.

The identities come in by each of the doors' ways: tokens, a basic user (user name and
password), a wrong password, and no credentials at all, which is the cluster's anonymous
role (Pulsar's ``anonymousUserRole``), granted consume on ``alpha/ns`` and nothing on
``beta/ns``. (A TLS client certificate's role is tested in test_tls_cluster.py: gRPC asks
for a client certificate only from a server that requires one, so it cannot share this
plain-text cluster.)

The table is printed, and docs/security.md must hold it as printed (run with
``MAGNETAR_WRITE_MATRIX=1`` to write it there after a deliberate change).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

import magnetar.asyncio as ma
from magnetar.client.admin import AdminClient
from magnetar.common import shacrypt, tokens
from magnetar.common.authentication import basic_header
from magnetar.common.errors import AuthenticationError, AuthorizationError, MagnetarError
from magnetar.common.letters import REAL_TOPIC
from magnetar.common.message_id import MessageId
from magnetar.ledger.bookie_client import BookieClient, Entry
from magnetar.proto.pulsar import pulsar_api_pb2 as wire
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.protocol.frames import encode_payload_command
from magnetar.testing.auth import SERVICE_ROLE, Keys
from magnetar.testing.processes import BookieProcess, BrokerProcess, GatewayProcess, ServiceFactory
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection, connect_command, lookup_command

pytestmark = pytest.mark.integration

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BEGIN, END = "<!-- isolation-matrix:begin -->", "<!-- isolation-matrix:end -->"

TENANTS = ("alpha", "beta")
IDENTITIES = (
    "superuser", "tenant admin", "producer-only", "consumer-only", "no grant", "basic user, producer-only",
    "anonymous role, consumer-only", "expired token", "token signed with another key", "alg: none", "wrong password",
)
ANONYMOUS_ROLE = "anonymous"
BASIC_USER, BASIC_PASSWORD = "alpha-basic", "correct horse battery staple"
LETTERS = "subscribe, DLQ in other tenant"
ACTIONS = (
    "produce", "consume", "lookup", "partitions", LETTERS, "create/delete topic", "grant", "delete tenant", "replay DLQ",
)
DOORS = ("gRPC", "REST", "WebSocket", "Pulsar")
CELLS_AT_ONCE = 8
"""Cells tried at the same time: most of a cell is waiting on a round trip."""
LOOKUPS = ("lookup", "partitions")
UNPROVEN = {"expired token", "token signed with another key", "alg: none", "wrong password"}
OWN_TENANT_ALLOWS = {
    "tenant admin": {"produce", "consume", *LOOKUPS, "create/delete topic", "grant", "replay DLQ"},
    "producer-only": {"produce", *LOOKUPS},
    "consumer-only": {"consume", *LOOKUPS},
    "no grant": set(),
    "basic user, producer-only": {"produce", *LOOKUPS},
    "anonymous role, consumer-only": {"consume", *LOOKUPS},
}


def expected(identity: str, action: str, tenant: str, door: str) -> str:
    """Pulsar's model: superusers do anything; a tenant's roles act on their tenant only,
    each as far as its grants go; deleting a tenant is the superusers'."""
    if door == "WebSocket" and action not in ("produce", "consume", LETTERS):
        return "–"
    if door == "Pulsar" and action not in ("produce", "consume", *LOOKUPS):
        return "–"  # no administration; a pulsar-client's dead-letter policy is the client's own
    if (door, action) in (("REST", LETTERS), ("gRPC", "replay DLQ")):
        return "–"
    if identity in UNPROVEN:
        return "401"
    if identity == "superuser":
        return "ok"
    return "ok" if tenant == "alpha" and action in OWN_TENANT_ALLOWS[identity] else "403"


def alg_none(role: str) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part({'sub': role})}."


def authorization_of(identity: str, keys: Keys) -> str | None:
    """The ``authorization`` an identity presents at every door (None: nothing)."""
    if identity == "basic user, producer-only":
        return basic_header(BASIC_USER, BASIC_PASSWORD)
    if identity == "wrong password":
        return basic_header(BASIC_USER, BASIC_PASSWORD + "!")
    token = {
        "superuser": keys.token("root"),
        "tenant admin": keys.token("alpha-admin"),
        "producer-only": keys.token("alpha-producer"),
        "consumer-only": keys.token("alpha-consumer"),
        "no grant": keys.token("alpha-nobody"),
        "anonymous role, consumer-only": None,
        "expired token": keys.token("alpha-admin", expires_in_s=60, now=1_000_000),
        "token signed with another key": tokens.create_token("alpha-admin", tokens.generate_secret_key()),
        "alg: none": alg_none("alpha-admin"),
    }[identity]
    return None if token is None else f"Bearer {token}"


def sdk_authentication(header: str | None) -> object | None:
    """The SDK's authentication object presenting ``header``."""
    if header is None:
        return None
    if header.startswith("Basic "):
        user, _, password = base64.b64decode(header[len("Basic "):]).decode().partition(":")
        return ma.AuthenticationBasic(user, password)
    return ma.AuthenticationToken(header[len("Bearer "):])


def outcome_of(exc: BaseException) -> str:
    if isinstance(exc, AuthenticationError):
        return "401"
    if isinstance(exc, AuthorizationError):
        return "403"
    return f"error: {type(exc).__name__}: {exc}"


def wire_outcome(answer: wire.BaseCommand) -> str:
    """The outcome of a Pulsar protocol refusal (ERROR, or a Failed lookup answer)."""
    error = {
        wire.BaseCommand.ERROR: answer.error.error,
        wire.BaseCommand.LOOKUP_RESPONSE: answer.lookupTopicResponse.error,
        wire.BaseCommand.PARTITIONED_METADATA_RESPONSE: answer.partitionMetadataResponse.error,
    }.get(answer.type)
    if error == wire.AuthenticationError:
        return "401"
    if error == wire.AuthorizationError:
        return "403"
    return f"error: {answer}"


def http_outcome(response: httpx.Response) -> str:
    if response.is_success:
        return "ok"
    if response.status_code in (401, 403):
        assert "reason" in response.json(), response.text  # Pulsar's error body
        return str(response.status_code)
    return f"HTTP {response.status_code}: {response.text[:200]}"


class Matrix:
    """Runs the cells; remembers what each allowed or refused cell should have left."""

    def __init__(self, broker: BrokerProcess, gateway: GatewayProcess, keys: Keys) -> None:
        self.broker, self.gateway, self.keys = broker, gateway, keys
        self.cells: dict[tuple[str, str, str, str], str] = {}
        self.produced: dict[str, bool] = {}  # payload -> allowed
        self.subscriptions: dict[tuple[str, str], bool] = {}  # (topic, subscription) -> allowed
        self.topics: list[str] = []
        self.grants: dict[tuple[str, str], bool] = {}  # (namespace, role) -> allowed
        self.doomed: dict[str, bool] = {}  # tenant to delete -> allowed
        self.replays: dict[tuple[str, str], bool] = {}  # (DLQ, its subscription) -> allowed
        self.counter = itertools.count()

    # -- the doors -------------------------------------------------------------------
    async def grpc(self, header: str | None, action: str, tenant: str, n: int) -> str:
        auth = sdk_authentication(header)
        ns = f"{tenant}/ns"
        try:
            if action in ("produce", "consume", LETTERS):
                async with ma.Client(self.broker.address, authentication=auth, operation_timeout_seconds=15) as client:
                    if action == "produce":
                        producer = await client.create_producer(f"persistent://{ns}/data")
                        await producer.send(self.payload(tenant, n))
                    elif action == LETTERS:
                        await client.subscribe(
                            f"persistent://{ns}/data", self.subscription(tenant, n),
                            dead_letter_policy=ma.ConsumerDeadLetterPolicy(
                                max_redeliver_count=3, dead_letter_topic=self.elsewhere(tenant)),
                        )
                    else:
                        consumer = await client.subscribe(
                            f"persistent://{ns}/data", self.subscription(tenant, n),
                            initial_position=ma.InitialPosition.Earliest,
                        )
                        await consumer.receive(timeout_millis=10_000)
                return "ok"
            admin = AdminClient(self.broker.address, 15, authorization=(lambda: header) if header is not None else None)
            async with admin:
                await self.admin_action(admin, action, tenant, n)
            return "ok"
        except MagnetarError as exc:
            return outcome_of(exc)

    async def admin_action(self, admin: AdminClient, action: str, tenant: str, n: int) -> None:
        ns = f"{tenant}/ns"
        if action == "lookup":
            await admin.lookup(f"persistent://{ns}/data")
        elif action == "partitions":
            await admin.partitions(f"persistent://{ns}/data")
        elif action == "create/delete topic":
            topic = self.topic(tenant, n)
            await admin.create_topic(topic)
            await admin.delete_topic(topic)
        elif action == "grant":
            role = self.grantee(tenant, n)
            await admin.call(lambda stub: stub.GrantPermission(
                pb.GrantPermissionRequest(namespace=ns, role=role, actions=["consume"])))
        else:
            await admin.delete_tenant(self.doomed_tenant(tenant, n))

    async def rest(self, header: str | None, action: str, tenant: str, n: int) -> str:
        headers = {"Authorization": header} if header is not None else {}
        ns = f"{tenant}/ns"
        async with httpx.AsyncClient(base_url=self.gateway.url, headers=headers, timeout=30) as http:
            if action == "produce":
                body = {"messages": [{"payload": base64.b64encode(self.payload(tenant, n)).decode()}]}
                return http_outcome(await http.post(f"/topics/persistent/{ns}/data", json=body))
            if action == "consume":
                return http_outcome(await http.get(f"/admin/v2/persistent/{ns}/data/subscription/peek/position/1"))
            if action == "lookup":
                return http_outcome(await http.get(f"/lookup/v2/topic/persistent/{ns}/data"))
            if action == "partitions":
                return http_outcome(await http.get(f"/admin/v2/persistent/{ns}/data/partitions"))
            if action == "create/delete topic":
                local = self.topic(tenant, n).rsplit("/", 1)[1]
                created = http_outcome(await http.put(f"/admin/v2/persistent/{ns}/{local}"))
                if created != "ok":
                    return created
                return http_outcome(await http.delete(f"/admin/v2/persistent/{ns}/{local}"))
            if action == "grant":
                role = self.grantee(tenant, n)
                return http_outcome(await http.post(f"/admin/v2/namespaces/{ns}/permissions/{role}", json=["consume"]))
            if action == "replay DLQ":
                local = self.dlq(tenant, n).rsplit("/", 1)[1]
                return http_outcome(await http.post(f"/admin/v2/dlq/{ns}/{local}/replay"))
            return http_outcome(await http.delete(f"/admin/v2/tenants/{self.doomed_tenant(tenant, n)}"))

    async def websocket(self, header: str | None, action: str, tenant: str, n: int) -> str:
        base = self.gateway.url.replace("http://", "ws://") + f"/ws/v2/{{}}/persistent/{tenant}/ns/data"
        headers = {"Authorization": header} if header is not None else {}
        if action == "produce":
            url = base.format("producer")
        else:
            url = base.format("consumer") + "/" + self.subscription(tenant, n)
        if action == LETTERS:
            url += f"?maxRedeliverCount=3&deadLetterTopic={self.elsewhere(tenant)}"
        try:
            async with connect(url, additional_headers=headers, open_timeout=30) as ws:
                if action == "produce":
                    await ws.send(json.dumps({"payload": base64.b64encode(self.payload(tenant, n)).decode()}))
                    answer = json.loads(await ws.recv())
                    assert answer.get("result") == "ok", answer
                elif action == LETTERS:
                    pass  # subscribed: the upgrade is accepted only once the broker took the subscribe
                else:
                    message = json.loads(await ws.recv())
                    assert "messageId" in message, message
            return "ok"
        except InvalidStatus as exc:
            status = exc.response.status_code
            return str(status) if status in (401, 403) else f"HTTP {status}: {exc.response.body!r}"

    async def pulsar(self, header: str | None, action: str, tenant: str, n: int) -> str:
        """Pulsar's binary protocol, in raw frames (pulsar-client retries a refused
        PRODUCER or SUBSCRIBE until its timeout, and says less of why)."""
        topic = f"persistent://{tenant}/ns/data"
        connect = connect_command()
        if header is not None and header.startswith("Bearer "):
            connect.connect.auth_method_name, connect.connect.auth_data = "token", header[len("Bearer "):].encode()
        elif header is not None:
            connect.connect.auth_method_name = "basic"
            connect.connect.auth_data = base64.b64decode(header[len("Basic "):])
        async with await RawPulsarConnection.open(self.broker.host, self.broker.protocol_port) as conn:
            await conn.send(connect)
            answer = (await conn.receive()).command
            if answer.type != wire.BaseCommand.CONNECTED:
                return wire_outcome(answer)
            if action == "produce":
                await conn.send(wire.BaseCommand(type=wire.BaseCommand.PRODUCER, producer=wire.CommandProducer(
                    topic=topic, producer_id=1, request_id=1)))  # fmt: skip
                answer = (await conn.receive()).command
                if answer.type != wire.BaseCommand.PRODUCER_SUCCESS:
                    return wire_outcome(answer)
                send = wire.BaseCommand(type=wire.BaseCommand.SEND, send=wire.CommandSend(producer_id=1, sequence_id=0))
                metadata = wire.MessageMetadata(producer_name=answer.producer_success.producer_name, sequence_id=0,
                                                publish_time=int(time.time() * 1000))  # fmt: skip
                await conn.send_bytes(encode_payload_command(send, metadata, self.payload(tenant, n)))
                answer = (await conn.receive()).command
                return "ok" if answer.type == wire.BaseCommand.SEND_RECEIPT else wire_outcome(answer)
            if action == "consume":
                await conn.send(wire.BaseCommand(type=wire.BaseCommand.SUBSCRIBE, subscribe=wire.CommandSubscribe(
                    topic=topic, subscription=self.subscription(tenant, n), subType=wire.CommandSubscribe.Exclusive,
                    consumer_id=1, request_id=1, initialPosition=wire.CommandSubscribe.Earliest,
                )))  # fmt: skip
                answer = (await conn.receive()).command
                if answer.type != wire.BaseCommand.SUCCESS:
                    return wire_outcome(answer)
                await conn.send(wire.BaseCommand(type=wire.BaseCommand.FLOW, flow=wire.CommandFlow(consumer_id=1, messagePermits=1)))
                answer = (await conn.receive()).command
                return "ok" if answer.type == wire.BaseCommand.MESSAGE else wire_outcome(answer)
            if action == "lookup":
                await conn.send(lookup_command(topic, 1))
                answer = (await conn.receive()).command
                failed = answer.lookupTopicResponse.response == wire.CommandLookupTopicResponse.Failed
                return wire_outcome(answer) if failed or answer.type != wire.BaseCommand.LOOKUP_RESPONSE else "ok"
            await conn.send(wire.BaseCommand(type=wire.BaseCommand.PARTITIONED_METADATA, partitionMetadata=(
                wire.CommandPartitionedTopicMetadata(topic=topic, request_id=1))))  # fmt: skip
            answer = (await conn.receive()).command
            failed = answer.partitionMetadataResponse.response == wire.CommandPartitionedTopicMetadataResponse.Failed
            return wire_outcome(answer) if failed or answer.type != wire.BaseCommand.PARTITIONED_METADATA_RESPONSE else "ok"

    # -- what the cells leave ----------------------------------------------------------
    def payload(self, tenant: str, n: int) -> bytes:
        return f"{tenant}-cell-{n}".encode()

    def subscription(self, tenant: str, n: int) -> str:
        return f"cell-{n}"

    def elsewhere(self, tenant: str) -> str:
        """A dead letter topic in the other tenant's namespace."""
        other = TENANTS[1 - TENANTS.index(tenant)]
        return f"persistent://{other}/ns/dlq-target"

    def dlq(self, tenant: str, n: int) -> str:
        return f"persistent://{tenant}/ns/cell-{n}-DLQ"

    def replayed(self, tenant: str, n: int) -> bytes:
        return f"{tenant}-replayed-{n}".encode()

    def topic(self, tenant: str, n: int) -> str:
        return f"persistent://{tenant}/ns/made-{n}"

    def grantee(self, tenant: str, n: int) -> str:
        return f"grantee-{n}"

    def doomed_tenant(self, tenant: str, n: int) -> str:
        return f"{tenant}-doomed-{n}"

    async def run(self, admin: AdminClient, client: ma.Client) -> None:
        """Every cell, :data:`CELLS_AT_ONCE` at a time: each works on names of its own (its
        subscription, topic, DLQ, grantee, tenant), so no cell sees another's."""
        at_once = asyncio.Semaphore(CELLS_AT_ONCE)

        async def cell(identity: str, tenant: str, action: str, door: str) -> None:
            async with at_once:
                await self.cell(admin, client, identity, tenant, action, door)

        await asyncio.gather(*(cell(*c) for c in itertools.product(IDENTITIES, TENANTS, ACTIONS, DOORS)))

    async def cell(self, admin: AdminClient, client: ma.Client, identity: str, tenant: str, action: str, door: str) -> None:
        doors: dict[str, Callable[[str | None, str, str, int], Awaitable[str]]] = {
            "gRPC": self.grpc, "REST": self.rest, "WebSocket": self.websocket, "Pulsar": self.pulsar,
        }
        want = expected(identity, action, tenant, door)
        if want == "–":
            self.cells[identity, tenant, action, door] = "–"
            return
        n = next(self.counter)
        if action == "consume" and door == "WebSocket":
            # Pulsar's WebSocket consumers start at the latest message: the
            # subscription is made first, at the earliest, by the superuser.
            await admin.create_subscription(
                f"persistent://{tenant}/ns/data", self.subscription(tenant, n), MessageId.earliest)
        if action == "replay DLQ":
            # A DLQ as the broker's moves leave it: its initial subscription keeps one
            # message whose REAL_TOPIC is the tenant's data topic.
            dlq = self.dlq(tenant, n)
            await admin.create_topic(dlq)
            await admin.create_subscription(dlq, f"cell-{n}-DLQ-sub", MessageId.earliest)
            producer = await client.create_producer(dlq)
            await producer.send(self.replayed(tenant, n), properties={REAL_TOPIC: f"persistent://{tenant}/ns/data"})
            await producer.close()
        if action == "delete tenant":
            await admin.create_tenant(
                self.doomed_tenant(tenant, n),
                pb.TenantInfo(admin_roles=[f"{tenant}-admin"], allowed_clusters=["standalone"]),
            )
        try:
            got = await asyncio.wait_for(doors[door](authorization_of(identity, self.keys), action, tenant, n), 30)
        except TimeoutError:
            got = "no answer in 30 s"
        print(f"cell {n}: {identity} / {tenant} / {action} / {door}: {got}", flush=True)
        self.cells[identity, tenant, action, door] = got
        allowed = got == "ok"
        if action == "produce":
            self.produced[self.payload(tenant, n).decode()] = allowed
        elif (action == "consume" and door in ("gRPC", "Pulsar")) or action == LETTERS:
            self.subscriptions[f"persistent://{tenant}/ns/data", self.subscription(tenant, n)] = allowed
        elif action == "replay DLQ":
            self.produced[self.replayed(tenant, n).decode()] = allowed
            self.replays[self.dlq(tenant, n), f"cell-{n}-DLQ-sub"] = allowed
        elif action == "create/delete topic":
            self.topics.append(self.topic(tenant, n))
        elif action == "grant":
            self.grants[f"{tenant}/ns", self.grantee(tenant, n)] = allowed
        elif action == "delete tenant":
            self.doomed[self.doomed_tenant(tenant, n)] = allowed

    def table(self) -> str:
        """One row per identity and tenant, one column per action; a cell gives the
        outcome at each door as gRPC / REST / WebSocket / Pulsar."""
        lines = [
            "| identity (alpha's roles) | tenant | " + " | ".join(ACTIONS) + " |",
            "| --- | --- | " + " | ".join("---" for _ in ACTIONS) + " |",
        ]
        for identity, tenant in itertools.product(IDENTITIES, TENANTS):
            cells = [" / ".join(self.cells[identity, tenant, a, d] for d in DOORS) for a in ACTIONS]
            lines.append(f"| {identity} | {tenant}{' (own)' if tenant == 'alpha' else ' (other)'} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


async def revocation_cut_off(broker: BrokerProcess, admin: AdminClient, keys: Keys) -> float:
    """Seconds from revoking a role's grant to the broker holding neither its pulsar-client
    producer nor its consumer any more."""
    import pulsar

    topic = "persistent://alpha/ns/revoked"
    await admin.call(lambda stub: stub.GrantPermission(
        pb.GrantPermissionRequest(namespace="alpha/ns", role="alpha-revoked", actions=["produce", "consume"])))  # fmt: skip
    client = pulsar_client(
        broker.pulsar_url, authentication=pulsar.AuthenticationToken(keys.token("alpha-revoked")), operation_timeout_seconds=10,
    )  # fmt: skip
    try:
        def open_both() -> bytes:
            consumer = client.subscribe(topic, "cut", initial_position=pulsar.InitialPosition.Earliest)
            client.create_producer(topic).send(b"before")
            return consumer.receive(10_000).data()

        assert await asyncio.to_thread(open_both) == b"before"
        stats = await admin.topic_stats(topic)
        assert stats.producers == 1 and [s.consumers for s in stats.subscriptions] == [1], stats
        revoked = time.monotonic()
        await admin.call(lambda stub: stub.RevokePermission(
            pb.RevokePermissionRequest(namespace="alpha/ns", role="alpha-revoked")))  # fmt: skip
        while True:
            stats = await admin.topic_stats(topic)
            if stats.producers == 0 and [s.consumers for s in stats.subscriptions] == [0]:
                return time.monotonic() - revoked
            assert time.monotonic() - revoked < 15, f"still attached 15 s after the revocation: {stats}"
            await asyncio.sleep(0.1)
    finally:
        await asyncio.to_thread(client.close)


async def test_the_isolation_matrix(
    keys: Keys, tmp_path: Path, bookie_factory: ServiceFactory[BookieProcess],
    broker_factory: ServiceFactory[BrokerProcess], gateway_factory: ServiceFactory[GatewayProcess],
) -> None:
    superusers = [SERVICE_ROLE, "root"]
    passwords = tmp_path / "users.htpasswd"
    passwords.write_text(f"{BASIC_USER}:{shacrypt.hash_password(BASIC_PASSWORD)}\n")
    ways_in = {"authentication_providers": ["token", "basic"], "basic_auth_conf": str(passwords),
               "anonymous_user_role": ANONYMOUS_ROLE}  # fmt: skip
    bookie = bookie_factory(**keys.settings())
    broker = broker_factory(
        ensemble_size=1, write_quorum=1, ack_quorum=1,
        **keys.settings(superuser_roles=superusers, authorization_enabled=True,
                        broker_client_auth_token_file=str(keys.service_token_file), **ways_in),
    )
    gateway = gateway_factory(
        broker_refresh_interval_s=0.5,
        **keys.settings(superuser_roles=superusers, broker_client_auth_token_file=str(keys.service_token_file),
                        **ways_in),
    )
    async with AdminClient(broker.address, 15, token=lambda: keys.service_token) as admin:
        for tenant in TENANTS:
            await admin.create_tenant(tenant, pb.TenantInfo(admin_roles=[f"{tenant}-admin"], allowed_clusters=["standalone"]))
            await admin.create_namespace(f"{tenant}/ns")
            grants = [(f"{tenant}-producer", "produce"), (f"{tenant}-consumer", "consume")]
            if tenant == "alpha":
                grants += [(BASIC_USER, "produce"), (ANONYMOUS_ROLE, "consume")]
            for role, action in grants:
                await admin.call(lambda stub, r=role, a=action, t=tenant: stub.GrantPermission(
                    pb.GrantPermissionRequest(namespace=f"{t}/ns", role=r, actions=[a])))
            data = f"persistent://{tenant}/ns/data"
            await admin.create_topic(data)
            await admin.create_subscription(data, "peek", MessageId.earliest)
            async with ma.Client(broker.address, authentication=ma.AuthenticationToken(keys.service_token)) as client:
                producer = await client.create_producer(data)
                await producer.send(b"seed")

        matrix = Matrix(broker, gateway, keys)
        async with ma.Client(broker.address, authentication=ma.AuthenticationToken(keys.service_token)) as client:
            await matrix.run(admin, client)
            # A replay that may move some messages and not others: 200, each failure with
            # the broker's reason, the refused message left in the DLQ.
            dlq = "persistent://alpha/ns/partial-DLQ"
            await admin.create_topic(dlq)
            await admin.create_subscription(dlq, "partial-DLQ-sub", MessageId.earliest)
            producer = await client.create_producer(dlq, batching_enabled=False)
            for tenant in TENANTS:
                await producer.send(f"partial-{tenant}".encode(), properties={REAL_TOPIC: f"persistent://{tenant}/ns/data"})
        headers = {"Authorization": authorization_of("tenant admin", keys) or ""}
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as http:
            answer = await http.post("/admin/v2/dlq/alpha/ns/partial-DLQ/replay")
        matrix.produced.update({"partial-alpha": True, "partial-beta": False})
        table = matrix.table()
        print("\n" + table)

        wrong = {
            cell: got for cell, got in matrix.cells.items() if got != expected(cell[0], cell[2], cell[1], cell[3])
        }
        assert not wrong, "cells not as specified:\n" + "\n".join(
            f"{c}: got {g}, expected {expected(c[0], c[2], c[1], c[3])}" for c, g in wrong.items()
        )

        assert answer.status_code == 200, answer.text
        report = answer.json()
        assert (report["moved"], report["failed"], len(report.get("failures", ()))) == (1, 1, 1), report
        assert report["failures"][0]["target"] == "persistent://beta/ns/data"
        assert re.search(r"not authorized to \w+ on persistent://beta/ns/data", report["failures"][0]["reason"]), report
        assert [m.message.payload for m in await admin.peek_messages(dlq, "partial-DLQ-sub", 1, 10)] == [b"partial-beta"]

        # Refusals changed nothing; what was allowed happened.
        stored: set[str] = set()
        for tenant in TENANTS:
            async with ma.Client(broker.address, authentication=ma.AuthenticationToken(keys.service_token)) as client:
                reader = await client.create_reader(f"persistent://{tenant}/ns/data", MessageId.earliest)
                while await reader.has_message_available():
                    stored.add((await reader.read_next(timeout_millis=10_000)).data().decode())
        assert {p for p, ok in matrix.produced.items() if ok} == stored - {"seed"}
        for (topic, sub), ok in matrix.subscriptions.items():
            assert (sub in await admin.subscriptions(topic)) is ok, (topic, sub)
        for (dlq, sub), ok in matrix.replays.items():
            # A replay acknowledges a message only once it is stored in its target.
            assert await admin.subscriptions(dlq) == [sub], dlq
            assert len(await admin.peek_messages(dlq, sub, 1, 10)) == (0 if ok else 1), dlq
        for tenant in TENANTS:
            assert not set(matrix.topics) & set(await admin.topics(f"{tenant}/ns"))
        for (ns, role), ok in matrix.grants.items():
            perms = await admin.call(lambda stub, n=ns: stub.GetPermissions(pb.GetPermissionsRequest(namespace=n)))
            assert (role in perms.roles) is ok, (ns, role)
        tenants = set(await admin.tenants())
        for tenant, ok in matrix.doomed.items():
            assert (tenant not in tenants) is ok, tenant

        # The revocation cut-off at the Pulsar door: a role's open pulsar-client producer
        # and consumer are closed by the broker within the gRPC door's bound (5 s,
        # test_broker_authorization.py), and what the client tries again is refused.
        cut_s = await revocation_cut_off(broker, admin, keys)
        print(f"pulsar-client producer and consumer closed {cut_s:.2f} s after the revocation")
        assert cut_s < 5.0

    # The bookies take superusers only (the broker's service role): every add written on a
    # refused add stream is told the bookie's refusal, however it races with it.
    for token, error in ((keys.token("root"), AuthorizationError), (None, AuthenticationError)):
        for _ in range(4):
            async with BookieClient(bookie.address, timeout_s=5, token=token) as writer:
                got = await asyncio.gather(
                    *(writer.add_entries([Entry(4242, i, -1, b"x" * 1000)]) for i in range(8)), return_exceptions=True)
            assert all(isinstance(g, error) for g in got), (token, got)
    async with BookieClient(bookie.address, timeout_s=5, token=keys.service_token) as reader:
        assert 4242 not in await reader.list_ledgers()  # nothing was stored

    for process in (broker, gateway):
        secrets = [h.split(" ", 1)[1] for h in (authorization_of(i, keys) for i in IDENTITIES) if h]
        assert not any(s in process.log_tail(2000) for s in [*secrets, BASIC_PASSWORD])
    # Every refused WebSocket upgrade was answered with its status, and none is a server error.
    assert "ASGI callable returned without completing handshake" not in gateway.log_tail(4000)

    if os.environ.get("MAGNETAR_WRITE_MATRIX"):
        text = DOCS.read_text()
        DOCS.write_text(re.sub(f"{re.escape(BEGIN)}.*?{re.escape(END)}", f"{BEGIN}\n{table}\n{END}", text, flags=re.S))
    documented = DOCS.read_text()
    assert BEGIN in documented and END in documented, f"docs/security.md lost its {BEGIN} / {END} markers"
    documented = documented[documented.index(BEGIN) + len(BEGIN): documented.index(END)].strip()
    assert documented == table, "docs/security.md's isolation matrix differs from the measured one"
