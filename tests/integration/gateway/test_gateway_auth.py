"""Authentication and authorization at the gateway, with real processes: bookies, a broker
with authentication and authorization on, and gateways with authentication on.

- REST and WebSocket refuse a missing, expired, foreign-key, ``alg: none`` or malformed
  token with 401 ``{"reason"}`` (the probes and API documents stay open), log each
  refusal once without the token, and take the token as ``?token=`` on a WebSocket;
- what the gateway serves without a broker (bookies, ledgers, the auditor, the cluster's
  brokers) is the superusers' only;
- the caller's token, not the gateway's, reaches the brokers: a gateway whose own token
  the brokers refuse still serves a caller with a valid one, and the brokers' decision
  on a role is the same through REST, WebSocket and gRPC;
- the permission routes round trip (grant, read, revoke), and ``magnetar admin``'s
  permission commands print the same through both doors.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import pytest_asyncio
from gateway_support import unique
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

import magnetar.asyncio as ma
from magnetar.client.admin import AdminClient
from magnetar.common import tokens
from magnetar.common.errors import AuthorizationError
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.testing.auth import Keys
from magnetar.testing.processes import BookieProcess, BrokerProcess, GatewayProcess, ServiceFactory
from magnetar.testing.shell import warm_magnetar as magnetar

pytestmark = pytest.mark.integration

TENANT_ADMIN = "ops"


@dataclass
class SecuredCluster:
    keys: Keys
    broker: BrokerProcess
    gateway: GatewayProcess
    """Authentication on, its service token valid."""
    relay: GatewayProcess
    """Authentication on, with a service token the brokers refuse: it works only by
    handing on its callers' tokens."""

    def headers(self, role: str | None = None, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.keys.token(role or 'nobody')}"}

    @property
    def superuser(self) -> dict[str, str]:
        return self.headers(token=self.keys.service_token)


@pytest.fixture(scope="module")
def cluster(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    if not zk_server.alive:
        zk_server.start()
    base = Path(tmp_path_factory.mktemp("gateway-auth"))
    keys = Keys.make(base)
    foreign = base / "foreign.token"
    foreign.write_text(tokens.create_token("magnetar-service", tokens.generate_secret_key()))
    root = f"/gwauth-{uuid.uuid4().hex[:8]}"
    connect_string = zk_server.connect_string
    bookies = ServiceFactory(BookieProcess, connect_string, root, base / "bookies")
    brokers = ServiceFactory(BrokerProcess, connect_string, root, base / "brokers")
    gateways = ServiceFactory(GatewayProcess, connect_string, root, base / "gateways")
    def settings(**more: object) -> dict[str, Any]:
        return keys.settings(**more)

    try:
        bookies(**settings())
        broker = brokers(ensemble_size=1, write_quorum=1, ack_quorum=1, **settings(
            authorization_enabled=True, broker_client_auth_token_file=str(keys.service_token_file)))
        gateway = gateways(broker_refresh_interval_s=0.5,
                           **settings(broker_client_auth_token_file=str(keys.service_token_file)))
        relay = gateways(broker_refresh_interval_s=0.5, **settings(broker_client_auth_token_file=str(foreign)))
        yield SecuredCluster(keys, broker, gateway, relay)
    finally:
        for factory in (gateways, brokers, bookies):
            factory.kill_all()


@pytest_asyncio.fixture
async def http(cluster: SecuredCluster) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=cluster.gateway.url, timeout=30) as client:
        yield client


@pytest_asyncio.fixture
async def namespace(cluster: SecuredCluster) -> AsyncIterator[str]:
    """A tenant of its own (admin role ``ops``) with a namespace ``ns``."""
    tenant = unique("t")
    async with AdminClient(cluster.broker.address, 15, token=lambda: cluster.keys.service_token) as admin:
        await admin.create_tenant(tenant, pb.TenantInfo(admin_roles=[TENANT_ADMIN], allowed_clusters=["standalone"]))
        await admin.create_namespace(f"{tenant}/ns")
    yield f"{tenant}/ns"


def alg_none_token(role: str) -> str:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=").decode()
    claims = base64.urlsafe_b64encode(json.dumps({"sub": role}).encode()).rstrip(b"=").decode()
    return f"{header}.{claims}."


def bad_credentials(keys: Keys) -> list[tuple[dict[str, str], str]]:
    """(headers, the reason's words) of every refusal."""
    expired = keys.token("admin", expires_in_s=1, now=1_000_000)
    foreign = tokens.create_token("admin", tokens.generate_secret_key())
    rs256 = jwt.encode({"sub": "admin"}, tokens.generate_key_pair("RS256")[0], algorithm="RS256")
    return [
        ({}, "no token was presented"),
        ({"Authorization": f"Basic {keys.service_token}"}, "no token was presented"),
        ({"Authorization": "Bearer not-a-jwt"}, "malformed"),
        ({"Authorization": f"Bearer {expired}"}, "expired"),
        ({"Authorization": f"Bearer {foreign}"}, "does not verify"),
        ({"Authorization": f"Bearer {alg_none_token('admin')}"}, "'none'"),
        ({"Authorization": f"Bearer {rs256}"}, "'RS256'"),
    ]


async def test_rest_refuses_requests_without_a_valid_token(cluster: SecuredCluster, http: httpx.AsyncClient):
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc"):
        assert (await http.get(path)).status_code == 200, path  # probes and documents stay open
    for headers, reason in bad_credentials(cluster.keys):
        for method, path in (("GET", "/admin/v2/tenants"), ("PUT", "/admin/v2/tenants/x"), ("GET", "/nowhere"),
                             ("POST", "/topics/persistent/public/default/t")):
            response = await http.request(method, path, headers=headers)
            assert response.status_code == 401, (method, path, headers, response.text)
            assert reason in response.json()["reason"], (reason, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
    assert "admin" not in await _tenants(http, cluster.superuser)  # nothing was created
    log = cluster.gateway.log_tail(400)
    assert "gateway refused GET /admin/v2/tenants: the token has expired" in log
    assert "gateway refused PUT /admin/v2/tenants/x: authentication required: no token was presented" in log
    for headers, _ in bad_credentials(cluster.keys):
        for value in headers.values():
            assert value.split()[-1] not in log


async def _tenants(http: httpx.AsyncClient, headers: dict[str, str]) -> list[str]:
    response = await http.get("/admin/v2/tenants", headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json())


async def test_websocket_refuses_upgrades_without_a_valid_token(cluster: SecuredCluster, namespace: str):
    base = cluster.gateway.url.replace("http", "ws", 1)
    url = f"{base}/ws/v2/producer/persistent/{namespace}/{unique('ws')}"
    for headers, reason in bad_credentials(cluster.keys):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, additional_headers=headers, open_timeout=15):
                pass
        assert refused.value.response.status_code == 401
        assert reason in json.loads(refused.value.response.body)["reason"]
    bad = cluster.keys.token("admin", expires_in_s=1, now=1_000_000)
    with pytest.raises(InvalidStatus) as refused:
        async with connect(f"{url}?token={bad}", open_timeout=15):
            pass
    assert refused.value.response.status_code == 401
    assert bad not in cluster.gateway.log_tail(400)

    # A valid token, as the header or as ?token= (browsers): the brokers then decide.
    writer = cluster.keys.token("writer")
    with pytest.raises(InvalidStatus) as refused:  # no grant yet
        async with connect(url, additional_headers=cluster.headers(token=writer), open_timeout=15):
            pass
    assert refused.value.response.status_code == 403
    assert "role 'writer' is not authorized" in json.loads(refused.value.response.body)["reason"]
    await _grant(cluster, namespace, "writer", ["produce"])
    for opened in (connect(url, additional_headers=cluster.headers(token=writer), open_timeout=15),
                   connect(f"{url}?token={writer}", open_timeout=15)):
        async with opened as ws:
            await ws.send(json.dumps({"payload": base64.b64encode(b"hi").decode(), "context": "1"}))
            assert json.loads(await ws.recv())["result"] == "ok"


async def _grant(cluster: SecuredCluster, namespace: str, role: str, actions: list[str]) -> None:
    async with httpx.AsyncClient(base_url=cluster.gateway.url, timeout=30) as http:
        response = await http.post(f"/admin/v2/namespaces/{namespace}/permissions/{role}", json=actions,
                                   headers=cluster.superuser)
        assert response.status_code == 204, response.text


async def test_what_the_gateway_serves_itself_is_for_superusers(cluster: SecuredCluster, http: httpx.AsyncClient):
    paths = ["/admin/v2/bookies", "/admin/v2/ledgers/0", "/admin/v2/auditor", "/admin/v2/clusters/standalone",
             "/admin/v2/brokers/standalone"]
    for path in paths:
        response = await http.get(path, headers=cluster.headers("app"))
        assert response.status_code == 403, (path, response.text)
        assert "a superuser role is required" in response.json()["reason"]
    assert (await http.post("/admin/v2/auditor/audit", headers=cluster.headers("app"))).status_code == 403
    bookies = await http.get("/admin/v2/bookies", headers=cluster.superuser)
    assert bookies.status_code == 200 and [b["reachable"] for b in bookies.json()] == [True]
    assert (await http.get("/admin/v2/brokers/standalone", headers=cluster.superuser)).json() == [cluster.broker.address]
    assert (await http.get("/admin/v2/clusters", headers=cluster.headers("app"))).json() == ["standalone"]
    assert "gateway refused GET /admin/v2/bookies to role 'app': a superuser role is required" in cluster.gateway.log_tail(400)


async def test_the_callers_token_reaches_the_brokers(cluster: SecuredCluster, namespace: str):
    """The relay's own token is refused by the brokers: it serves only with its callers'."""
    topic = f"persistent://{namespace}/{unique('relayed')}"
    tenant = namespace.split("/")[0]
    async with httpx.AsyncClient(base_url=cluster.relay.url, timeout=30) as relay:
        assert tenant in await _tenants(relay, cluster.superuser)
        # The brokers decide on the caller's role: the tenant's admin may list its
        # namespace's topics, another role may not, through REST as through gRPC.
        assert (await relay.get(f"/admin/v2/persistent/{namespace}", headers=cluster.headers(TENANT_ADMIN))).status_code == 200
        listed = await relay.get(f"/admin/v2/persistent/{namespace}", headers=cluster.headers("stranger"))
        assert listed.status_code == 403, listed.text
        async with AdminClient(cluster.broker.address, 15, token=lambda: cluster.keys.token("stranger")) as grpc_admin:
            with pytest.raises(AuthorizationError):
                await grpc_admin.topics(namespace)
        assert "a broker refused GET /admin/v2/persistent/" in cluster.relay.log_tail(200)
        assert (await relay.get(f"/admin/v2/persistent/{namespace}/partitioned",
                                headers=cluster.headers("stranger"))).status_code == 403
        # Creates arriving together are gathered into one broker call per caller
        # (docs/gateway.md, "Creating a topic"): the tenant admin's are made, the stranger's refused.
        names = [unique("gathered") for _ in range(6)]
        answers = await asyncio.gather(*(relay.put(f"/admin/v2/persistent/{namespace}/{n}",
                                                   headers=cluster.headers(TENANT_ADMIN if i % 2 == 0 else "stranger"))
                                         for i, n in enumerate(names)))  # fmt: skip
        assert [a.status_code for a in answers] == [204, 403] * 3, [a.text for a in answers]
        listed = (await relay.get(f"/admin/v2/persistent/{namespace}", headers=cluster.headers(TENANT_ADMIN))).json()
        assert [n for n in names if f"persistent://{namespace}/{n}" in listed] == names[::2]

        # REST produce as a role with produce only, then read back with consume.
        await _grant(cluster, namespace, "app", ["produce"])
        body = {"messages": [{"payload": base64.b64encode(f"m{i}".encode()).decode(), "key": "k",
                              "properties": {"n": str(i)}} for i in range(3)]}
        produced = await relay.post(f"/topics/persistent/{topic.removeprefix('persistent://')}", json=body,
                                    headers=cluster.headers("app"))
        assert produced.status_code == 200, produced.text
        results = produced.json()["messagePublishResults"]
        assert [r["errorCode"] for r in results] == [0, 0, 0] and all(r["messageId"].count(":") == 2 for r in results)
        denied = await relay.post(f"/topics/persistent/{topic.removeprefix('persistent://')}", json=body,
                                  headers=cluster.headers("stranger"))
        assert denied.status_code == 403, denied.text

    # A WebSocket consumer through the relay: its session's client carries the caller's token.
    await _grant(cluster, namespace, "app", ["produce", "consume"])
    ws_url = cluster.relay.url.replace("http", "ws", 1)
    consumer_url = f"{ws_url}/ws/v2/consumer/{topic.replace('://', '/')}/s?subscriptionType=Shared"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(consumer_url, additional_headers=cluster.headers("stranger"), open_timeout=15):
            pass
    assert refused.value.response.status_code == 403
    async with connect(consumer_url, additional_headers=cluster.headers("app"), open_timeout=15):
        pass  # the subscription now exists (it starts at the end): produce once more
    client = ma.Client(cluster.broker.address, authentication=ma.AuthenticationToken(cluster.keys.token("app")))
    try:
        producer = await client.create_producer(topic)
        async with connect(consumer_url, additional_headers=cluster.headers("app"), open_timeout=15) as ws:
            await producer.send(b"after")
            msg = json.loads(await asyncio.wait_for(ws.recv(), 15))
            assert base64.b64decode(msg["payload"]) == b"after"
            await ws.send(json.dumps({"messageId": msg["messageId"]}))
            # Revoking consume cuts the open socket off (the broker ends its stream).
            await _revoke(cluster, namespace, "app")
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 15)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4006, closed.value
            assert closed.value.rcvd.reason.startswith("Client is not authorized")
    finally:
        await client.close()


async def _revoke(cluster: SecuredCluster, namespace: str, role: str) -> None:
    async with httpx.AsyncClient(base_url=cluster.gateway.url, timeout=30) as http:
        response = await http.delete(f"/admin/v2/namespaces/{namespace}/permissions/{role}", headers=cluster.superuser)
        assert response.status_code == 204, response.text


async def test_permission_routes_round_trip(cluster: SecuredCluster, http: httpx.AsyncClient, namespace: str):
    ns = f"/admin/v2/namespaces/{namespace}"
    admin = cluster.headers(TENANT_ADMIN)
    assert (await http.get(f"{ns}/permissions", headers=admin)).json() == {}
    assert (await http.post(f"{ns}/permissions/app", json=["produce", "consume"], headers=admin)).status_code == 204
    assert (await http.post(f"{ns}/permissions/audit", json=["consume"], headers=admin)).status_code == 204
    got = (await http.get(f"{ns}/permissions", headers=admin)).json()
    assert {role: sorted(actions) for role, actions in got.items()} == {"app": ["consume", "produce"], "audit": ["consume"]}
    assert (await http.post(f"{ns}/permissions/subscription/billing", json=["app", "audit"],
                            headers=admin)).status_code == 204
    got = (await http.get(f"{ns}/permissions/subscription", headers=admin)).json()
    assert {sub: sorted(roles) for sub, roles in got.items()} == {"billing": ["app", "audit"]}
    assert (await http.delete(f"{ns}/permissions/billing/audit", headers=admin)).status_code == 204
    assert (await http.get(f"{ns}/permissions/subscription", headers=admin)).json() == {"billing": ["app"]}
    assert (await http.delete(f"{ns}/permissions/audit", headers=admin)).status_code == 204
    assert (await http.get(f"{ns}/permissions", headers=admin)).json() == {"app": ["consume", "produce"]}

    # Refusals: an unknown action, a role that may not administer the namespace, no namespace.
    bad = await http.post(f"{ns}/permissions/app", json=["produce", "fly"], headers=admin)
    assert bad.status_code == 400, bad.text
    for method, path in (("GET", "permissions"), ("POST", "permissions/app"), ("DELETE", "permissions/app"),
                         ("GET", "permissions/subscription"), ("DELETE", "permissions/billing/app")):
        kwargs: dict[str, Any] = {"json": ["consume"]} if method == "POST" else {}
        response = await http.request(method, f"{ns}/{path}", headers=cluster.headers("app"), **kwargs)
        assert response.status_code == 403, (method, path, response.text)
    missing = await http.get(f"/admin/v2/namespaces/{namespace}-none/permissions", headers=cluster.superuser)
    assert missing.status_code == 404, missing.text
    assert (await http.get(f"{ns}/permissions", headers=admin)).json() == {"app": ["consume", "produce"]}


async def test_a_namespace_created_with_a_policies_body_has_its_grants(
    cluster: SecuredCluster, http: httpx.AsyncClient, namespace: str,
):
    """PUT /admin/v2/namespaces/{t}/{ns} with Pulsar's Policies body applies it: the
    auth_policies grants let their role produce (a role not named may not), the
    retention, rate and replication clusters are answered back; a bad field refuses the
    whole create. ``magnetar admin namespaces create --clusters`` stores its clusters."""
    tenant = namespace.split("/")[0]
    admin = cluster.headers(TENANT_ADMIN)
    ns = f"{tenant}/{unique('made')}"
    body = {
        "auth_policies": {"namespace_auth": {"writer": ["produce"]},
                          "destination_auth": {f"persistent://{ns}/only": {"reader": ["consume"]}},
                          "subscription_auth_roles": {"audit-sub": ["writer"]}},
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
        "replication_clusters": ["standalone"],
        "publishMaxMessageRate": {"standalone": {"publishThrottlingRateInMsg": 1000, "publishThrottlingRateInByte": -1}},
        "message_ttl_in_seconds": 3600, "is_allow_auto_update_schema": True, "encryption_required": False,
    }
    # Refused whole, nothing created: an unknown cluster, a bad action, a topic grant.
    for bad, status, reason in (
        ({**body, "replication_clusters": ["mars"]}, 412, "Invalid cluster id: mars"),
        ({**body, "auth_policies": {"namespace_auth": {"writer": ["fly"]}}}, 400, ""),
        ({**body, "auth_policies": {"destination_auth": {f"persistent://{tenant}/elsewhere/t": {"w": ["produce"]}}}},
         400, "not in namespace"),
        ({**body, "retention_policies": {"retentionTimeInMinutes": 0, "retentionSizeInMB": 5}}, 400, "retention"),
    ):
        r = await http.put(f"/admin/v2/namespaces/{ns}", json=bad, headers=admin)
        assert r.status_code == status and reason in r.json()["reason"], (bad, r.text)
        assert (await http.get(f"/admin/v2/namespaces/{ns}", headers=admin)).status_code == 404
    r = await http.put(f"/admin/v2/namespaces/{ns}", json=body, headers=admin)
    assert r.status_code == 204, r.text
    got = (await http.get(f"/admin/v2/namespaces/{ns}", headers=admin)).json()
    assert got["auth_policies"]["namespace_auth"] == {"writer": ["produce"]}
    assert got["auth_policies"]["subscription_auth_roles"] == {"audit-sub": ["writer"]}
    assert got["auth_policies"]["destination_auth"] == {f"persistent://{ns}/only": {"reader": ["consume"]}}
    assert got["replication_clusters"] == ["standalone"] and got["message_ttl_in_seconds"] == 3600
    assert got["retention_policies"] == body["retention_policies"]
    assert got["publishMaxMessageRate"] == body["publishMaxMessageRate"]
    assert (await http.get(f"/admin/v2/namespaces/{ns}/permissions", headers=admin)).json() == {"writer": ["produce"]}

    # The grant from the body lets its role produce there; a role not named is refused.
    topic = f"persistent://{ns}/{unique('granted')}"
    writer = ma.Client(cluster.broker.address, authentication=ma.AuthenticationToken(cluster.keys.token("writer")))
    stranger = ma.Client(cluster.broker.address, authentication=ma.AuthenticationToken(cluster.keys.token("stranger")))
    reader = ma.Client(cluster.broker.address, authentication=ma.AuthenticationToken(cluster.keys.token("reader")))
    try:
        producer = await writer.create_producer(topic)
        assert (await producer.send(b"granted")).ledger_id() >= 0
        with pytest.raises(AuthorizationError):
            await stranger.create_producer(topic)
        await (await reader.subscribe(f"persistent://{ns}/only", "s")).close()  # its topic grant
        with pytest.raises(AuthorizationError):
            await reader.subscribe(topic, "s")
    finally:
        await writer.close()
        await stranger.close()
        await reader.close()

    # The CLI's --clusters: stored and answered; a cluster that does not exist refuses it.
    door, token = ["--url", cluster.broker.address], cluster.keys.service_token
    code, _, _ = await asyncio.to_thread(_cli, door, token, "namespaces", "create", f"{tenant}/cli", "--clusters", "standalone")
    assert code == 0
    got = (await http.get(f"/admin/v2/namespaces/{tenant}/cli", headers=admin)).json()
    assert got["replication_clusters"] == ["standalone"]
    refused = await asyncio.to_thread(_stderr, door, token, "namespaces", "create", f"{tenant}/cli2", "--clusters", "mars")
    assert refused == "magnetar admin: Invalid cluster id: mars\n"
    assert f"{tenant}/cli2" not in (await http.get(f"/admin/v2/namespaces/{tenant}", headers=admin)).json()


async def test_a_topic_grant_lets_its_role_use_that_topic_only(
    cluster: SecuredCluster, http: httpx.AsyncClient, namespace: str,
):
    """GET/POST/DELETE /admin/v2/persistent/{t}/{ns}/{topic}/permissions[/{role}] and
    ``magnetar admin topics permissions|grant-permission|revoke-permission``: a role
    granted consume on one topic consumes there and nowhere else in the namespace; a
    produce grant on another topic (through the CLI) lets it produce there only."""
    admin = cluster.headers(TENANT_ADMIN)
    mine, other = f"persistent://{namespace}/{unique('mine')}", f"persistent://{namespace}/{unique('other')}"
    rest = f"/admin/v2/persistent/{mine.removeprefix('persistent://')}/permissions"
    assert (await http.get(rest, headers=admin)).json() == {}
    assert (await http.post(f"{rest}/reader", json=["consume"], headers=admin)).status_code == 204
    assert (await http.get(rest, headers=admin)).json() == {"reader": ["consume"]}
    bad = await http.post(f"{rest}/reader", json=["fly"], headers=admin)
    assert bad.status_code == 400 and (await http.get(rest, headers=admin)).json() == {"reader": ["consume"]}
    assert (await http.post(f"{rest}/reader", json=["consume"], headers=cluster.headers("reader"))).status_code == 403

    reader = ma.Client(cluster.broker.address, authentication=ma.AuthenticationToken(cluster.keys.token("reader")))
    try:
        consumer = await reader.subscribe(mine, "s")  # allowed: consume on this topic
        await consumer.close()
        for refused in (reader.subscribe(other, "s"), reader.create_producer(mine)):
            with pytest.raises(AuthorizationError):
                await refused

        # Through the CLI (gRPC door): produce on the other topic, read back, revoke.
        door, token = ["--url", cluster.broker.address], cluster.keys.token(TENANT_ADMIN)
        code, _, _ = await asyncio.to_thread(_cli, door, token, "topics", "grant-permission", other,
                                             "--role", "reader", "--actions", "produce")
        assert code == 0
        code, out, _ = await asyncio.to_thread(_cli, ["--admin-url", cluster.gateway.url], token,
                                               "topics", "permissions", other)
        assert (code, json.loads(out)) == (0, {"reader": ["produce"]})
        producer = await reader.create_producer(other)
        assert (await producer.send(b"granted")).ledger_id() >= 0
        await producer.close()
        code, _, _ = await asyncio.to_thread(_cli, door, token, "topics", "revoke-permission", other, "--role", "reader")
        assert code == 0
        refused_again = await asyncio.to_thread(_stderr, door, token, "topics", "revoke-permission", other,
                                                "--role", "reader")
        assert refused_again.startswith("magnetar admin: Permissions are not set at the topic level")
    finally:
        await reader.close()
    assert (await http.delete(f"{rest}/reader", headers=admin)).status_code == 204
    r = await http.delete(f"{rest}/reader", headers=admin)
    assert r.status_code == 412 and r.json()["reason"].startswith("Permissions are not set at the topic level")
    assert (await http.get(rest, headers=admin)).json() == {}


def _cli(door: list[str], token: str, *args: str) -> tuple[int, str, int]:
    """(exit code, stdout, how many lines on stderr)."""
    done = magnetar("admin", *door, "--auth-token", token, *args)
    return done.returncode, done.stdout, len(done.stderr.strip().splitlines())


def _stderr(door: list[str], token: str, *args: str) -> str:
    return magnetar("admin", *door, "--auth-token", token, *args).stderr


async def test_cli_permission_commands_through_both_doors(cluster: SecuredCluster):
    grpc_door = ["--url", cluster.broker.address]
    rest_door = ["--admin-url", cluster.gateway.url]
    outputs: dict[str, list[tuple[int, str, int]]] = {}
    for name, door in (("grpc", grpc_door), ("rest", rest_door)):
        tenant = unique(name)
        ns = f"{tenant}/ns"
        token = cluster.keys.service_token
        steps = [
            ["tenants", "create", tenant], ["namespaces", "create", ns],
            ["namespaces", "permissions", ns],
            ["namespaces", "grant-permission", ns, "--role", "app", "--actions", "produce,consume"],
            ["namespaces", "grant-permission", ns, "--role", "audit", "--actions", "consume"],
            ["namespaces", "permissions", ns],
            ["namespaces", "grant-subscription-permission", ns, "--subscription", "billing", "--roles", "app,audit"],
            ["namespaces", "subscription-permission", ns],
            ["namespaces", "revoke-subscription-permission", ns, "--subscription", "billing", "--role", "audit"],
            ["namespaces", "subscription-permission", ns],
            ["namespaces", "revoke-permission", ns, "--role", "audit"],
            ["namespaces", "permissions", ns],
            ["namespaces", "grant-permission", ns, "--role", "app", "--actions", "produce,fly"],  # refused: exit 1
            ["namespaces", "permissions", f"{tenant}/nosuch"],  # exit 1
        ]
        outputs[name] = [await asyncio.to_thread(_cli, door, token, *step) for step in steps]
        # Refused for a role that is no admin of the tenant (exit 1, one line).
        refused = await asyncio.to_thread(_stderr, door, cluster.keys.token("app"), "namespaces", "permissions", ns)
        assert refused.startswith("magnetar admin: ") and len(refused.splitlines()) == 1 and "not authorized" in refused
    assert outputs["rest"] == outputs["grpc"]
    printed = [json.loads(out) for code, out, _ in outputs["rest"] if code == 0 and out.strip()]
    assert printed == [
        {}, {"app": ["consume", "produce"], "audit": ["consume"]}, {"billing": ["app", "audit"]}, {"billing": ["app"]},
        {"app": ["consume", "produce"]},
    ]
    assert [code for code, _, _ in outputs["rest"][-2:]] == [1, 1]
    bad = await asyncio.to_thread(_stderr, rest_door, "not-a-jwt", "tenants", "list")
    assert len(bad.splitlines()) == 1 and "malformed" in bad and "HTTP 401" in bad


async def test_schema_routes_need_lookup_to_read_and_the_tenant_admin_to_change(
    cluster: SecuredCluster, http: httpx.AsyncClient, namespace: str,
):
    """As Pulsar's SchemasResource: 401 without a token; a role with produce may read
    but not upload or delete; the tenant's admin may; a stranger may do neither; the
    namespace's schema policies are the tenant admin's."""
    base = f"/admin/v2/schemas/{namespace}/{unique('schema')}"
    payload = {"type": "STRING", "schema": "", "properties": {}}
    assert (await http.get(f"{base}/schema")).status_code == 401
    await _grant(cluster, namespace, "app", ["produce"])
    refused = await http.post(f"{base}/schema", json=payload, headers=cluster.headers("app"))
    assert refused.status_code == 403, refused.text
    uploaded = await http.post(f"{base}/schema", json=payload, headers=cluster.headers(TENANT_ADMIN))
    assert uploaded.json() == {"version": {"version": 0}}, uploaded.text
    read = await http.get(f"{base}/schema", headers=cluster.headers("app"))
    assert (read.status_code, read.json()["type"]) == (200, "STRING")
    for method, path in (("GET", "schema"), ("GET", "schemas"), ("POST", "version"), ("DELETE", "schema")):
        kwargs: dict[str, Any] = {"json": payload} if method == "POST" else {}
        r = await http.request(method, f"{base}/{path}", headers=cluster.headers("stranger"), **kwargs)
        assert r.status_code == 403, (method, path, r.text)
    assert (await http.delete(f"{base}/schema", headers=cluster.headers("app"))).status_code == 403
    assert (await http.delete(f"{base}/schema", headers=cluster.headers(TENANT_ADMIN))).json() == {"version": 1}

    ns = f"/admin/v2/namespaces/{namespace}"
    denied = await http.post(f"{ns}/isAllowAutoUpdateSchema", json=False, headers=cluster.headers("app"))
    assert denied.status_code == 403, denied.text
    assert (await http.post(f"{ns}/isAllowAutoUpdateSchema", json=False,
                            headers=cluster.headers(TENANT_ADMIN))).status_code == 204
    assert (await http.get(f"{ns}/isAllowAutoUpdateSchema", headers=cluster.headers(TENANT_ADMIN))).json() is False
