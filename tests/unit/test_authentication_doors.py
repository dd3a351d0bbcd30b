"""The new ways in at each door, against small real servers: basic credentials, a TLS
client certificate and the anonymous role on a grpc.aio server with the services'
interceptor (the SDK as client), and on a uvicorn server with the gateway's middleware
and protocols (HTTPS and WSS with client certificates)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
import uvicorn
from fastapi import FastAPI, WebSocket
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

import magnetar
import magnetar.asyncio as ma
from magnetar.common import shacrypt, tokens
from magnetar.common.authentication import AuthenticationService, BasicAuthenticator
from magnetar.common.errors import AuthenticationError, InvalidArgument, TopicNotFound
from magnetar.common.grpcauth import CALLER_ROLE, AuthenticationInterceptor
from magnetar.common.grpcutil import abort
from magnetar.common.tls import ServerTls, add_port
from magnetar.gateway.auth import AuthenticationMiddleware, caller_authorization, caller_role
from magnetar.gateway.tlsprotocols import GatewayHttpProtocol, GatewayTlsWebSocketProtocol
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.testing.certs import TestCa

KEY = tokens.generate_secret_key()
USERS = {"alice": "wonderland"}


class RoleBroker(pb_grpc.BrokerServicer):
    """Answers lookups with itself, then refuses the producer (TopicNotFound), noting
    the role each call was given."""

    def __init__(self) -> None:
        self.address = ""
        self.roles: list[tuple[str, str | None]] = []

    async def Lookup(self, request, context):
        self.roles.append(("Lookup", CALLER_ROLE.get()))
        return pb.LookupResponse(broker_address=self.address, owned_here=True)

    async def GetPartitionedTopicMetadata(self, request, context):
        self.roles.append(("GetPartitionedTopicMetadata", CALLER_ROLE.get()))
        return pb.PartitionedTopicMetadata(partitions=0)

    async def Produce(self, request_iterator, context):
        self.roles.append(("Produce", CALLER_ROLE.get()))
        await abort(context, TopicNotFound("no such topic here"))
        yield pb.ProduceResponse()  # an async generator, as the broker's Produce


def _service(**kwargs: object) -> AuthenticationService:
    basic = BasicAuthenticator({u: shacrypt.hash_password(p) for u, p in USERS.items()})
    return AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY), basic=basic, **kwargs)  # type: ignore[arg-type]


async def _serve(service: AuthenticationService, tls: ServerTls | None = None) -> tuple[grpc.aio.Server, RoleBroker]:
    broker = RoleBroker()
    server = grpc.aio.server(interceptors=[AuthenticationInterceptor(service, "broker")])
    pb_grpc.add_BrokerServicer_to_server(broker, server)
    broker.address = f"127.0.0.1:{add_port(server, '127.0.0.1:0', tls)}"
    await server.start()
    return server, broker


async def _produce(url: str, **client_args: object) -> None:
    client = ma.Client(url, operation_timeout_seconds=5, **client_args)  # type: ignore[arg-type]
    try:
        await client.create_producer("t")
    finally:
        await client.close()


@pytest.fixture
def ca(tmp_path: Path) -> TestCa:
    return TestCa.create(tmp_path / "ca")


# -- gRPC ------------------------------------------------------------------------------------


async def test_grpc_basic_credentials_and_the_anonymous_role() -> None:
    server, broker = await _serve(_service(anonymous_user_role="guest"))
    try:
        with pytest.raises(TopicNotFound):  # let in: the servicer answered
            await _produce(broker.address, authentication=ma.AuthenticationBasic("alice", "wonderland"))
        assert {role for _, role in broker.roles} == {"alice"}
        assert [m for m, _ in broker.roles][-1] == "Produce"  # the stream too
        broker.roles.clear()
        with pytest.raises(TopicNotFound):
            await _produce(broker.address)  # no credentials: the anonymous role
        assert {role for _, role in broker.roles} == {"guest"}
        broker.roles.clear()
        for wrong in (ma.AuthenticationBasic("alice", "wonderlanD"), ma.AuthenticationBasic("mallory", "x")):
            with pytest.raises(AuthenticationError, match="user name or password is wrong"):
                await _produce(broker.address, authentication=wrong)
        assert broker.roles == []  # the servicer never saw them
    finally:
        await server.stop(None)


async def test_grpc_without_an_anonymous_role_refuses_a_caller_without_credentials() -> None:
    server, broker = await _serve(_service())
    try:
        with pytest.raises(AuthenticationError, match=r"no credentials were presented \(accepted: token, basic\)"):
            await _produce(broker.address)
        assert broker.roles == []
    finally:
        await server.stop(None)


async def test_grpc_a_client_certificate_is_the_role_of_its_common_name(ca: TestCa) -> None:
    node = ca.issue("node", ["127.0.0.1"])
    tls = ServerTls(node.cert_file, node.key_file, ca.cert_file, require_client_cert=True)
    server, broker = await _serve(_service(tls=True), tls)
    url = f"magnetar+ssl://{broker.address}"
    try:
        app = ca.issue("app-1", [])
        with pytest.raises(TopicNotFound):
            await _produce(url, tls_trust_certs_file_path=ca.cert_file,
                           authentication=ma.AuthenticationTLS(app.cert_file, app.key_file))
        assert [role for _, role in broker.roles] == ["app-1"] * len(broker.roles)
        assert [m for m, _ in broker.roles][-1] == "Produce"
        broker.roles.clear()
        # A header still wins over the certificate.
        with pytest.raises(TopicNotFound):
            await _produce(url, tls_trust_certs_file_path=ca.cert_file, tls_certificate_file_path=app.cert_file,
                           tls_private_key_file_path=app.key_file,
                           authentication=ma.AuthenticationBasic("alice", "wonderland"))
        assert {role for _, role in broker.roles} == {"alice"}
        broker.roles.clear()
        nameless = ca.issue("nameless", [], common_name=False)
        with pytest.raises(AuthenticationError, match="no common name"):
            await _produce(url, tls_trust_certs_file_path=ca.cert_file,
                           authentication=ma.AuthenticationTLS(nameless.cert_file, nameless.key_file))
        assert broker.roles == []
    finally:
        await server.stop(None)


def test_the_sdk_classes_are_pulsar_clients_and_check_their_arguments(ca: TestCa) -> None:
    assert magnetar.AuthenticationBasic is ma.AuthenticationBasic
    assert magnetar.AuthenticationTLS is ma.AuthenticationTLS
    for bad in (("", "x"), ("a:b", "x")):
        with pytest.raises(InvalidArgument, match="user name"):
            ma.AuthenticationBasic(*bad)
    app, other = ca.issue("app-1", []), ca.issue("app-2", [])
    with pytest.raises(InvalidArgument, match="needs TLS"):
        magnetar.Client("magnetar://127.0.0.1:1", authentication=ma.AuthenticationTLS(app.cert_file, app.key_file))
    with pytest.raises(InvalidArgument, match="different files"):
        magnetar.Client("magnetar+ssl://127.0.0.1:1", tls_trust_certs_file_path=ca.cert_file,
                        tls_certificate_file_path=other.cert_file, tls_private_key_file_path=other.key_file,
                        authentication=ma.AuthenticationTLS(app.cert_file, app.key_file))


# -- the gateway -------------------------------------------------------------------------


def _app(service: AuthenticationService) -> FastAPI:
    api = FastAPI()
    api.add_middleware(AuthenticationMiddleware, authenticator=service)

    @api.get("/who")
    async def who() -> dict[str, str | None]:
        return {"role": caller_role.get(), "forwarded": caller_authorization.get()}

    @api.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(caller_role.get() or "")
        await websocket.close()

    return api


@pytest.fixture
async def gateway(ca: TestCa) -> AsyncIterator[int]:
    """A uvicorn HTTPS/WSS server with the gateway's protocols, asking for (not
    requiring) client certificates; basic, tls and an anonymous role."""
    node = ca.issue("gateway", ["127.0.0.1"])
    server = uvicorn.Server(uvicorn.Config(
        _app(_service(tls=True, anonymous_user_role="guest")), host="127.0.0.1", port=0, log_config=None,
        access_log=False, lifespan="off", http=GatewayHttpProtocol, ws=GatewayTlsWebSocketProtocol,
        ssl_certfile=node.cert_file, ssl_keyfile=node.key_file, ssl_ca_certs=ca.cert_file,
        ssl_cert_reqs=ssl.CERT_OPTIONAL,
    ))  # fmt: skip
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done()
        await asyncio.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await serving


def _context(ca: TestCa, name: str | None, common_name: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.cert_file)
    if name is not None:
        issued = ca.issue(name, [], common_name=common_name)
        context.load_cert_chain(issued.cert_file, issued.key_file)
    return context


async def test_gateway_roles_from_a_certificate_basic_credentials_or_none(gateway: int, ca: TestCa) -> None:
    url = f"https://127.0.0.1:{gateway}/who"
    async with httpx.AsyncClient(verify=_context(ca, "app-1")) as http:
        assert (await http.get(url)).json() == {"role": "app-1", "forwarded": None}
    async with httpx.AsyncClient(verify=_context(ca, None)) as http:
        basic = httpx.BasicAuth("alice", "wonderland")
        got = (await http.get(url, auth=basic)).json()
        assert got["role"] == "alice" and got["forwarded"].startswith("Basic ")  # what the brokers are sent
        assert (await http.get(url)).json() == {"role": "guest", "forwarded": None}
        refused = await http.get(url, auth=httpx.BasicAuth("alice", "wonderlanD"))
        assert (refused.status_code, refused.json()) == (401, {"reason": "the user name or password is wrong"})
        assert refused.headers["WWW-Authenticate"] == 'Bearer, Basic realm="magnetar"'
    async with httpx.AsyncClient(verify=_context(ca, "nameless", common_name=False)) as http:
        refused = await http.get(url)
        assert refused.status_code == 401 and "no common name" in refused.json()["reason"]


async def test_gateway_websocket_roles_from_a_certificate_or_none(gateway: int, ca: TestCa) -> None:
    url = f"wss://127.0.0.1:{gateway}/ws"
    async with connect(url, ssl=_context(ca, "app-1")) as ws:
        assert await ws.recv() == "app-1"
    async with connect(url, ssl=_context(ca, None)) as ws:
        assert await ws.recv() == "guest"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, ssl=_context(ca, "nameless", common_name=False)):
            pass
    assert refused.value.response.status_code == 401


async def test_grpc_only_a_proxy_role_may_act_for_an_original_principal() -> None:
    """The gateway's way to forward a caller it knows by its client certificate."""
    from magnetar.client.connection import ConnectionPool
    from magnetar.common.errors import AuthorizationError

    broker = RoleBroker()
    interceptor = AuthenticationInterceptor(_service(), "broker", proxy_roles={"gateway"})
    server = grpc.aio.server(interceptors=[interceptor])
    pb_grpc.add_BrokerServicer_to_server(broker, server)
    broker.address = f"127.0.0.1:{add_port(server, '127.0.0.1:0', None)}"
    await server.start()

    async def lookup_as(role: str, principal: str | None) -> None:
        header = "Bearer " + tokens.create_token(role, KEY)
        pool = ConnectionPool(broker.address, 5, authorization=lambda: header, original_principal=lambda: principal)
        try:
            await pool.unary(broker.address, lambda stub: stub.Lookup(pb.LookupRequest(topic="t")))
        finally:
            await pool.close()

    try:
        await lookup_as("gateway", "app-1")
        await lookup_as("gateway", None)
        assert broker.roles == [("Lookup", "app-1"), ("Lookup", "gateway")]
        with pytest.raises(AuthorizationError, match="may not act for another role"):
            await lookup_as("app-2", "root")
        assert len(broker.roles) == 2
    finally:
        await server.stop(None)


async def test_the_command_line_tools_present_a_basic_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from magnetar.tools import clienttool, toolauth

    parser = argparse.ArgumentParser()
    toolauth.add_arguments(parser)
    (tmp_path / "password").write_text("wonderland\n")
    args = parser.parse_args(["--auth-basic-user", "alice", "--auth-password-file", str(tmp_path / "password")])
    assert toolauth.authorization(args) == "Basic " + __import__("base64").b64encode(b"alice:wonderland").decode()
    assert toolauth.authorization(parser.parse_args(["--auth-token", "t"]), environ={}) == "Bearer t"
    assert toolauth.authorization(parser.parse_args([]), environ={}) is None
    with pytest.raises(InvalidArgument, match="needs a password"):
        toolauth.authorization(parser.parse_args(["--auth-basic-user", "alice"]), environ={})

    server, broker = await _serve(_service())
    try:  # `magnetar produce` as alice: let in (the servicer's own refusal ends it), as alice
        monkeypatch.setenv(toolauth.PASSWORD_ENV_VAR, "wonderland")
        code = await asyncio.to_thread(clienttool.produce_main, ["t", "-m", "x", "--url", broker.address,
                                                                 "--auth-basic-user", "alice"])
        assert code == 1 and broker.roles and {role for _, role in broker.roles} == {"alice"}
    finally:
        await server.stop(None)
