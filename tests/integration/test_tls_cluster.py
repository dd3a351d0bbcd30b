"""TLS on every port of a real cluster, with a CA made for the run (nothing checked in):
bookies requiring client certificates (mTLS), a broker, an auditor and the gateway all
serving TLS and calling each other with it. The SDK produces and consumes over
``magnetar+ssl://``, the gateway answers HTTPS and WSS, and a client trusting another
CA, or dialling a name the certificate does not list, is refused at once with a clear
error; a bookie refuses a client without a certificate."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pulsar
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

import magnetar
import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.client.framed import FramedSessionTransport
from magnetar.common.errors import (
    AuthenticationError,
    AuthorizationError,
    NotConnected,
    Timeout,
    TlsHandshakeFailed,
)
from magnetar.common.healthcheck import grpc_health_serving
from magnetar.common.message_id import MessageId
from magnetar.common.tls import ClientTls, https_context
from magnetar.common.zkserver import ZooKeeperServer
from magnetar.ledger.bookie_client import BookieClient
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.testing.auth import SERVICE_ROLE, Keys
from magnetar.testing.certs import Issued, TestCa
from magnetar.testing.processes import (
    AuditorProcess,
    BookieProcess,
    BrokerProcess,
    GatewayProcess,
    ServiceFactory,
)
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.tools import admin as admin_cli

pytestmark = [pytest.mark.integration]

NS = "public/default"
REFUSAL_BOUND_S = 5.0
"""A refused handshake fails the call at once, not after the operation timeout (30 s)."""


@dataclass
class TlsCluster:
    ca: TestCa
    other_ca: TestCa
    node: Issued
    client: Issued
    bookies: list[BookieProcess]
    broker: BrokerProcess
    auditor: AuditorProcess
    gateway: GatewayProcess

    @property
    def service_url(self) -> str:
        return f"magnetar+ssl://{self.broker.address}"


@pytest.fixture(scope="module")
def tls_cluster(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    if not zk_server.alive:
        zk_server.start()
    base = Path(tmp_path_factory.mktemp("tls-cluster"))
    ca, other_ca = TestCa.create(base / "ca"), TestCa.create(base / "other-ca", "Another CA")
    # Every service shows this certificate as server and as client; it names 127.0.0.1
    # only, so dialling "localhost" is a host name the certificate does not list.
    node = ca.issue("node", ["127.0.0.1"])
    tls = {"tls_enabled": True, "tls_cert_file": node.cert_file, "tls_key_file": node.key_file,
           "tls_trust_certs_file": ca.cert_file}  # fmt: skip
    root, connect_string = f"/tls-{uuid.uuid4().hex[:8]}", zk_server.connect_string
    factories = [
        ServiceFactory(kind, connect_string, root, base / kind.module)
        for kind in (BookieProcess, BrokerProcess, AuditorProcess, GatewayProcess)
    ]
    bookie_factory, broker_factory, auditor_factory, gateway_factory = factories
    try:
        bookies = [bookie_factory(**tls, tls_require_client_cert=True) for _ in range(2)]
        broker = broker_factory(**tls, tls_client_enabled=True, ensemble_size=2, write_quorum=2, ack_quorum=2)
        auditor = auditor_factory(**tls, tls_client_enabled=True)
        gateway = gateway_factory(**tls, tls_client_enabled=True, broker_refresh_interval_s=0.5)
        yield TlsCluster(ca, other_ca, node, ca.issue("client", []), bookies, broker, auditor, gateway)
    finally:
        for factory in reversed(factories):
            factory.kill_all()


def unique(prefix: str) -> str:
    return f"persistent://{NS}/{prefix}-{uuid.uuid4().hex[:8]}"


async def test_produce_and_consume_over_tls(tls_cluster: TlsCluster):
    topic = unique("tls")
    async with mg.Client(tls_cluster.service_url, tls_trust_certs_file_path=tls_cluster.ca.cert_file) as client:
        consumer = await client.subscribe(topic, "s")
        producer = await client.create_producer(topic)
        sent = [await producer.send(f"m{i}".encode()) for i in range(10)]
        got = []
        for _ in range(10):
            msg = await consumer.receive(timeout_millis=10_000)
            got.append((msg.message_id(), msg.data()))
            await consumer.acknowledge(msg)
        # over the broker's framed session, with TLS as its gRPC port
        transport = client._pool.session(tls_cluster.broker.address).transport
        assert isinstance(transport, FramedSessionTransport)
        assert transport.address == f"{tls_cluster.broker.host}:{tls_cluster.broker.session_port}"
        assert transport.ssl_object is not None
    assert got == [(mid, f"m{i}".encode()) for i, mid in enumerate(sent)]


def test_blocking_client_with_a_pulsar_ssl_url_and_a_client_certificate(tls_cluster: TlsCluster):
    topic = unique("tls-sync")
    url = tls_cluster.service_url.replace("magnetar+ssl", "pulsar+ssl")
    with magnetar.Client(
        url, tls_trust_certs_file_path=tls_cluster.ca.cert_file,
        tls_certificate_file_path=tls_cluster.client.cert_file, tls_private_key_file_path=tls_cluster.client.key_file,
    ) as client:  # fmt: skip
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"hello")
        assert consumer.receive(timeout_millis=10_000).data() == b"hello"


async def test_a_client_trusting_another_ca_is_refused_at_once(tls_cluster: TlsCluster):
    async with mg.Client(tls_cluster.service_url, tls_trust_certs_file_path=tls_cluster.other_ca.cert_file) as client:
        started = time.monotonic()
        with pytest.raises(TlsHandshakeFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await client.create_producer(unique("other-ca"))
    assert time.monotonic() - started < REFUSAL_BOUND_S


async def test_a_host_name_the_certificate_does_not_list_is_refused(tls_cluster: TlsCluster):
    url = f"magnetar+ssl://localhost:{tls_cluster.broker.port}"  # the certificate names 127.0.0.1 only
    async with mg.Client(url, tls_trust_certs_file_path=tls_cluster.ca.cert_file) as client:
        started = time.monotonic()
        with pytest.raises(TlsHandshakeFailed, match="Hostname Verification"):
            await client.create_producer(unique("wrong-name"))
    assert time.monotonic() - started < REFUSAL_BOUND_S


async def test_a_plain_text_client_gets_no_answer_from_a_tls_port(tls_cluster: TlsCluster):
    async with mg.Client(f"magnetar://{tls_cluster.broker.address}", operation_timeout_seconds=2) as client:
        started = time.monotonic()
        with pytest.raises((NotConnected, Timeout)):
            await client.create_producer(unique("plain"))
    assert time.monotonic() - started < 2 + REFUSAL_BOUND_S


async def test_a_bookie_requiring_client_certificates_refuses_a_client_without_one(tls_cluster: TlsCluster):
    bookie = tls_cluster.bookies[0].address
    async with BookieClient(bookie, timeout_s=3, tls=ClientTls(tls_cluster.ca.cert_file)) as anonymous:
        with pytest.raises(NotConnected):
            await anonymous.info()
    client = tls_cluster.client
    async with BookieClient(bookie, timeout_s=3, tls=ClientTls(tls_cluster.ca.cert_file, client.cert_file,
                                                                client.key_file)) as known:  # fmt: skip
        assert (await known.info()).version
    # A certificate from another CA is no better than none.
    stranger = tls_cluster.other_ca.issue("stranger", [])
    tls = ClientTls(tls_cluster.ca.cert_file, stranger.cert_file, stranger.key_file)
    assert not await asyncio.to_thread(grpc_health_serving, bookie, 2.0, "", tls)


def test_the_host_name_is_what_fails_a_certificate_issued_for_another_name(
    tls_cluster: TlsCluster, bookie_factory: ServiceFactory[BookieProcess]
):
    # A bookie whose certificate names other.example only: refused on 127.0.0.1, served
    # when told to expect that name (grpc.ssl_target_name_override, for tests only).
    elsewhere = tls_cluster.ca.issue("elsewhere", ["other.example"])
    bookie = bookie_factory.create(tls_enabled=True, tls_cert_file=elsewhere.cert_file, tls_key_file=elsewhere.key_file)
    bookie.probe_tls = ClientTls(tls_cluster.ca.cert_file, target_name_override="other.example")
    bookie.start()
    assert grpc_health_serving(bookie.address, 2.0, tls=bookie.probe_tls)
    assert not grpc_health_serving(bookie.address, 2.0, tls=ClientTls(tls_cluster.ca.cert_file))


def _pulsar_client(url: str, ca: str, **more: object) -> pulsar.Client:
    settings = {"operation_timeout_seconds": 10, "connection_timeout_ms": 5000, **more}
    return pulsar_client(url, tls_trust_certs_file_path=ca, tls_validate_hostname=True, **settings)


def test_pulsar_client_over_pulsar_ssl(tls_cluster: TlsCluster):
    """Pulsar's protocol over TLS on its own port, with the broker's certificate (checked,
    host name included); a lookup on it answers with the TLS URL."""
    broker, topic = tls_cluster.broker, unique("wire-tls")
    assert broker.pulsar_tls_url.startswith("pulsar+ssl://127.0.0.1:")
    client = _pulsar_client(broker.pulsar_tls_url, tls_cluster.ca.cert_file)
    try:
        assert client.get_topic_partitions(topic) == [topic]
    finally:
        client.close()
    # The registration advertises both URLs: the gateway's lookup (HTTPS here) shows them.
    with httpx.Client(verify=https_context(ClientTls(tls_cluster.ca.cert_file)), timeout=10) as http:
        body = http.get(f"{tls_cluster.gateway.url}/lookup/v2/topic/{topic.replace('://', '/')}").json()
    assert (body["brokerUrl"], body["brokerUrlTls"]) == (broker.pulsar_url, broker.pulsar_tls_url)


def test_pulsar_client_trusting_another_ca_fails_at_once(tls_cluster: TlsCluster):
    client = _pulsar_client(tls_cluster.broker.pulsar_tls_url, tls_cluster.other_ca.cert_file)
    started = time.monotonic()
    try:
        with pytest.raises(pulsar.ConnectError):
            client.get_topic_partitions(unique("wire-other-ca"))
    finally:
        client.close()
    assert time.monotonic() - started < REFUSAL_BOUND_S


def _ws_url(cluster: TlsCluster, path: str) -> str:
    return cluster.gateway.url.replace("https://", "wss://") + path


async def test_gateway_serves_https_and_wss(tls_cluster: TlsCluster):
    context = https_context(ClientTls(tls_cluster.ca.cert_file))
    assert tls_cluster.gateway.url.startswith("https://")
    async with httpx.AsyncClient(base_url=tls_cluster.gateway.url, verify=context, timeout=30) as http:
        assert (await http.get("/admin/v2/clusters")).json() == ["standalone"]  # gateway -> broker
        bookies = (await http.get("/admin/v2/bookies")).json()  # gateway -> bookies (mTLS)
        assert len(bookies) == 2 and all(b["reachable"] for b in bookies), bookies
        auditor = await http.get("/admin/v2/auditor")  # gateway -> auditor
        assert auditor.status_code == 200, auditor.text
    topic = unique("wss")
    local = topic.rsplit("/", 1)[1]
    async with mg.Client(tls_cluster.service_url, tls_trust_certs_file_path=tls_cluster.ca.cert_file) as client:
        consumer = await client.subscribe(topic, "sdk")
        url = _ws_url(tls_cluster, f"/ws/v2/producer/persistent/{NS}/{local}")
        async with connect(url, ssl=context, open_timeout=30) as ws:
            await ws.send(json.dumps({"payload": base64.b64encode(b"over wss").decode(), "context": "c"}))
            ack = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert ack["result"] == "ok"
        assert (await consumer.receive(timeout_millis=10_000)).data() == b"over wss"


async def test_gateway_refuses_a_client_trusting_another_ca(tls_cluster: TlsCluster):
    context = https_context(ClientTls(tls_cluster.other_ca.cert_file))
    async with httpx.AsyncClient(base_url=tls_cluster.gateway.url, verify=context, timeout=5) as http:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await http.get("/admin/v2/clusters")
    with pytest.raises(ssl.SSLCertVerificationError):
        async with connect(_ws_url(tls_cluster, f"/ws/v2/producer/persistent/{NS}/x"), ssl=context, open_timeout=5):
            pass


async def test_auditor_checks_ledgers_on_tls_bookies(tls_cluster: TlsCluster):
    topic = unique("audit")
    async with mg.Client(tls_cluster.service_url, tls_trust_certs_file_path=tls_cluster.ca.cert_file) as client:
        producer = await client.create_producer(topic)
        await producer.send(b"x")
        await producer.close()
    async with AdminClient(tls_cluster.service_url, tls=ClientTls(tls_cluster.ca.cert_file)) as admin:
        await admin.unload_topic(topic)  # closes its ledger: the audit checks closed ledgers
    context = https_context(ClientTls(tls_cluster.ca.cert_file))
    async with httpx.AsyncClient(base_url=tls_cluster.gateway.url, verify=context, timeout=60) as http:
        report = await http.post("/admin/v2/auditor/audit")  # gateway -> auditor -> bookies
    assert report.status_code == 200, report.text
    # The auditor read the ledger's fragment from its bookies (mTLS) and found it whole.
    checked = report.json()
    assert checked["ledgersChecked"] >= 1 and checked["ledgersMarked"] == 0, checked


def test_admin_cli_over_tls(tls_cluster: TlsCluster, capsys: pytest.CaptureFixture[str]):
    args = ["--url", tls_cluster.service_url, "--tls-trust-certs-file", tls_cluster.ca.cert_file, "tenants", "list"]
    assert admin_cli.main(args) == 0
    assert "public" in capsys.readouterr().out.split()
    other = ["--url", tls_cluster.service_url, "--tls-trust-certs-file", tls_cluster.other_ca.cert_file,
             "tenants", "list"]  # fmt: skip
    assert admin_cli.main(other) == 1
    assert "TLS handshake" in capsys.readouterr().err


async def test_a_broker_and_a_gateway_requiring_client_certificates(
    tls_cluster: TlsCluster,
    broker_factory: ServiceFactory[BrokerProcess],
    gateway_factory: ServiceFactory[GatewayProcess],
):
    node, ca = tls_cluster.node, tls_cluster.ca.cert_file
    mtls = {"tls_enabled": True, "tls_cert_file": node.cert_file, "tls_key_file": node.key_file,
            "tls_trust_certs_file": ca, "tls_require_client_cert": True}  # fmt: skip
    broker = broker_factory(**mtls)
    url, topic = f"magnetar+ssl://{broker.address}", unique("mtls")
    async with mg.Client(url, tls_trust_certs_file_path=ca, operation_timeout_seconds=3) as anonymous:
        with pytest.raises((NotConnected, Timeout)):
            await anonymous.get_topic_partitions(topic)
    client = tls_cluster.client
    async with mg.Client(url, tls_trust_certs_file_path=ca, tls_certificate_file_path=client.cert_file,
                         tls_private_key_file_path=client.key_file) as known:  # fmt: skip
        assert await known.get_topic_partitions(topic) == [topic]
    # The gateway shows its certificate to the broker, and wants one from its own clients.
    gateway = gateway_factory(**mtls, tls_client_enabled=True)
    async with httpx.AsyncClient(verify=https_context(ClientTls(ca)), timeout=5) as anonymous_http:
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            await anonymous_http.get(f"{gateway.url}/admin/v2/clusters")
    context = https_context(ClientTls(ca, client.cert_file, client.key_file))
    async with httpx.AsyncClient(verify=context, timeout=10) as known_http:
        assert (await known_http.get(f"{gateway.url}/admin/v2/brokers/standalone")).json() == [broker.address]
        tenants = await known_http.get(f"{gateway.url}/admin/v2/tenants")  # gateway -> broker, mTLS
        assert tenants.status_code == 200 and "public" in tenants.json(), tenants.text
    # Pulsar's protocol over TLS asks for the same client certificate (mTLS).
    await asyncio.to_thread(_pulsar_client_needs_a_certificate, broker.pulsar_tls_url, ca, client, topic)


def _pulsar_client_needs_a_certificate(url: str, ca: str, client: Issued, topic: str) -> None:
    # TLS 1.3: the refusal arrives after the client's side of the handshake, as a closed
    # connection, which pulsar-client retries until its operation timeout.
    anonymous = _pulsar_client(url, ca, operation_timeout_seconds=3)
    try:
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout)):
            anonymous.get_topic_partitions(topic)
    finally:
        anonymous.close()
    known = _pulsar_client(url, ca, authentication=pulsar.AuthenticationTLS(client.cert_file, client.key_file))
    try:
        assert known.get_topic_partitions(topic) == [topic]
    finally:
        known.close()


async def test_a_client_certificate_is_a_role_at_every_door(
    tls_cluster: TlsCluster, keys: Keys, bookie_factory: ServiceFactory[BookieProcess],
    broker_factory: ServiceFactory[BrokerProcess], gateway_factory: ServiceFactory[GatewayProcess],
):
    """Pulsar's TLS authentication provider: the role is the client certificate's common
    name, over gRPC (the broker requires certificates), HTTPS and WSS (the gateway asks
    for one; it forwards the role to the broker as the original principal of its own
    proxy role, since a certificate cannot be forwarded). The role is granted consume on
    one namespace and nothing on another; a certificate without a CN is refused."""
    ca, node = tls_cluster.ca, tls_cluster.node
    tls = {"tls_enabled": True, "tls_cert_file": node.cert_file, "tls_key_file": node.key_file,
           "tls_trust_certs_file": ca.cert_file}  # fmt: skip
    ways_in = {"authentication_providers": ["token", "tls"], "superuser_roles": [SERVICE_ROLE],
               "broker_client_auth_token_file": str(keys.service_token_file)}  # fmt: skip
    bookie_factory(**keys.settings())
    broker = broker_factory(**tls, tls_require_client_cert=True, ensemble_size=1, write_quorum=1, ack_quorum=1,
                            **keys.settings(authorization_enabled=True, proxy_roles=[SERVICE_ROLE], **ways_in))
    gateway = gateway_factory(**tls, tls_client_enabled=True, broker_refresh_interval_s=0.5, **keys.settings(**ways_in))
    url = f"magnetar+ssl://{broker.address}"
    service = {"tls_trust_certs_file_path": ca.cert_file, "tls_certificate_file_path": node.cert_file,
               "tls_private_key_file_path": node.key_file}  # fmt: skip
    async with AdminClient(url, 15, tls=ClientTls(ca.cert_file, node.cert_file, node.key_file),
                           token=lambda: keys.service_token) as admin:  # fmt: skip
        for tenant in ("alpha", "beta"):
            await admin.create_tenant(tenant, pb.TenantInfo(allowed_clusters=["standalone"]))
            await admin.create_namespace(f"{tenant}/ns")
            await admin.create_topic(f"persistent://{tenant}/ns/data")
            for sub in ("peek", "ws"):
                await admin.create_subscription(f"persistent://{tenant}/ns/data", sub, MessageId.earliest)
        await admin.call(lambda stub: stub.GrantPermission(
            pb.GrantPermissionRequest(namespace="alpha/ns", role="app-cert", actions=["consume"])))
        async with mg.Client(url, authentication=mg.AuthenticationToken(keys.service_token), **service) as client:
            for tenant in ("alpha", "beta"):
                await (await client.create_producer(f"persistent://{tenant}/ns/data")).send(b"seed")

    app, nameless = ca.issue("app-cert", []), ca.issue("nameless", [], common_name=False)

    async def grpc(issued: Issued, action: str, tenant: str) -> str:
        auth = mg.AuthenticationTLS(issued.cert_file, issued.key_file)
        try:
            async with mg.Client(url, tls_trust_certs_file_path=ca.cert_file, authentication=auth,
                                 operation_timeout_seconds=15) as client:  # fmt: skip
                topic = f"persistent://{tenant}/ns/data"
                if action == "produce":
                    await (await client.create_producer(topic)).send(b"by certificate")
                else:
                    consumer = await client.subscribe(topic, "grpc", initial_position=mg.InitialPosition.Earliest)
                    await consumer.receive(timeout_millis=10_000)
            return "ok"
        except (AuthenticationError, AuthorizationError) as exc:
            return "401" if isinstance(exc, AuthenticationError) else "403"

    async def rest(issued: Issued, action: str, tenant: str) -> str:
        context = https_context(ClientTls(ca.cert_file, issued.cert_file, issued.key_file))
        async with httpx.AsyncClient(base_url=gateway.url, verify=context, timeout=30) as http:
            if action == "produce":
                body = {"messages": [{"payload": base64.b64encode(b"by certificate").decode()}]}
                response = await http.post(f"/topics/persistent/{tenant}/ns/data", json=body)
            else:
                response = await http.get(f"/admin/v2/persistent/{tenant}/ns/data/subscription/peek/position/1")
        return "ok" if response.is_success else str(response.status_code)

    async def websocket(issued: Issued, action: str, tenant: str) -> str:
        context = https_context(ClientTls(ca.cert_file, issued.cert_file, issued.key_file))
        path = "producer" if action == "produce" else "consumer"
        ws_url = gateway.url.replace("https://", "wss://") + f"/ws/v2/{path}/persistent/{tenant}/ns/data" + ("" if action == "produce" else "/ws")
        try:
            async with connect(ws_url, ssl=context, open_timeout=30) as ws:
                if action == "produce":
                    await ws.send(json.dumps({"payload": base64.b64encode(b"by certificate").decode()}))
                    assert json.loads(await ws.recv()).get("result") == "ok"
                else:
                    assert "messageId" in json.loads(await asyncio.wait_for(ws.recv(), 10))
            return "ok"
        except InvalidStatus as exc:
            return str(exc.response.status_code)

    got = {}
    for door_name, door in (("gRPC", grpc), ("REST", rest), ("WebSocket", websocket)):
        for action, tenant in (("consume", "alpha"), ("produce", "alpha"), ("consume", "beta")):
            got[door_name, action, tenant] = await asyncio.wait_for(door(app, action, tenant), 30)
        got[door_name, "no CN"] = await asyncio.wait_for(door(nameless, "consume", "alpha"), 30)
    assert got == {
        **{(d, "consume", "alpha"): "ok" for d in ("gRPC", "REST", "WebSocket")},
        **{(d, "produce", "alpha"): "403" for d in ("gRPC", "REST", "WebSocket")},
        **{(d, "consume", "beta"): "403" for d in ("gRPC", "REST", "WebSocket")},
        **{(d, "no CN"): "401" for d in ("gRPC", "REST", "WebSocket")},
    }
    assert "client certificate's subject has no common name" in broker.log_tail(2000)
