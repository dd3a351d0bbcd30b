"""Token authentication on the wire: the SDK sends ``authorization: Bearer`` on every
call and stream (asking a token function anew each time), and the servers' interceptor
lets valid tokens in with their role and refuses the rest with AuthenticationError —
against a small real grpc.aio server that records what it was sent."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest

import magnetar
import magnetar.asyncio as ma
from magnetar.common import tokens
from magnetar.common.errors import (
    AuthenticationError,
    AuthorizationError,
    InvalidArgument,
    TopicNotFound,
)
from magnetar.common.grpcauth import CALLER_ROLE, AuthenticationInterceptor, bearer_token
from magnetar.common.grpcutil import abort
from magnetar.ledger.bookie_client import BookieClient, Entry
from magnetar.proto.v1 import bookie_pb2_grpc as bookie_grpc
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))


class RecordingBroker(pb_grpc.BrokerServicer):
    """Answers lookups with itself, then refuses the producer (TopicNotFound): enough
    for the SDK to make two unary calls and open one stream."""

    def __init__(self) -> None:
        self.address = ""
        self.calls: list[tuple[str, str | None, str | None]] = []

    def _record(self, method: str, context: grpc.aio.ServicerContext) -> None:
        self.calls.append((method, CALLER_ROLE.get(), bearer_token(context.invocation_metadata())))

    async def Lookup(self, request, context):
        self._record("Lookup", context)
        return pb.LookupResponse(broker_address=self.address, owned_here=True)

    async def GetPartitionedTopicMetadata(self, request, context):
        self._record("GetPartitionedTopicMetadata", context)
        return pb.PartitionedTopicMetadata(partitions=0)

    async def Produce(self, request_iterator, context):
        self._record("Produce", context)
        await abort(context, TopicNotFound("no such topic here"))


@pytest.fixture
async def broker():
    recorder = RecordingBroker()
    auth = tokens.TokenAuthenticator("HS256", KEY)
    server = grpc.aio.server(interceptors=[AuthenticationInterceptor(auth, "broker")])
    pb_grpc.add_BrokerServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    recorder.address = f"127.0.0.1:{port}"
    await server.start()
    yield recorder
    await server.stop(None)


async def _produce(address: str, authentication: object | None) -> None:
    client = ma.Client(address, authentication=authentication, operation_timeout_seconds=5)
    try:
        await client.create_producer("t")
    finally:
        await client.close()


async def test_every_call_and_stream_carries_the_token_and_the_server_sees_the_role(broker) -> None:
    token = tokens.create_token("alice", KEY)
    with pytest.raises(TopicNotFound):  # got through authentication to the servicer
        await _produce(broker.address, ma.AuthenticationToken(token))
    assert {m for m, _, _ in broker.calls} == {"Lookup", "GetPartitionedTopicMetadata", "Produce"}
    assert all(role == "alice" and sent == token for _, role, sent in broker.calls)


async def test_a_token_function_is_asked_for_each_call_so_tokens_rotate(broker) -> None:
    issued = iter(tokens.create_token(f"role-{i}", KEY) for i in range(100))
    with pytest.raises(TopicNotFound):
        await _produce(broker.address, ma.AuthenticationToken(lambda: next(issued)))
    roles = [role for _, role, _ in broker.calls]
    assert len(roles) >= 3 and len(set(roles)) == len(roles)


async def test_anonymous_and_wrongly_signed_clients_are_refused_and_logged_without_the_token(broker, caplog) -> None:
    bad = tokens.create_token("mallory", OTHER_KEY)
    caplog.set_level(logging.WARNING, "magnetar.common.grpcauth")
    with pytest.raises(AuthenticationError, match="no token"):
        await _produce(broker.address, None)
    with pytest.raises(AuthenticationError, match="signature does not verify"):
        await _produce(broker.address, ma.AuthenticationToken(bad))
    expired = tokens.create_token("alice", KEY, expires_in_s=1, now=1_000_000)
    with pytest.raises(AuthenticationError, match="expired"):
        await _produce(broker.address, ma.AuthenticationToken(expired))
    assert broker.calls == []  # the servicer never saw them
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all("/magnetar.v1.Broker/" in line for line in lines)
    assert not any(bad in line or expired in line for line in lines)


async def test_a_required_role_list_refuses_other_roles(broker) -> None:
    auth = tokens.TokenAuthenticator("HS256", KEY)
    server = grpc.aio.server(interceptors=[AuthenticationInterceptor(auth, "bookie", required_roles={"admin"})])
    recorder = RecordingBroker()
    pb_grpc.add_BrokerServicer_to_server(recorder, server)
    recorder.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    try:
        with pytest.raises(AuthorizationError, match="superuser role is required"):
            await _produce(recorder.address, ma.AuthenticationToken(tokens.create_token("alice", KEY)))
        with pytest.raises(TopicNotFound):
            await _produce(recorder.address, ma.AuthenticationToken(tokens.create_token("admin", KEY)))
    finally:
        await server.stop(None)


class RecordingBookie(bookie_grpc.BookieServicer):
    """Counts the add streams that got past the interceptor."""

    def __init__(self) -> None:
        self.add_streams = 0

    async def AddEntries(self, request_iterator, context):
        self.add_streams += 1
        async for _ in request_iterator:
            pass
        return
        yield


async def test_a_refused_add_stream_reaches_every_add_as_the_bookies_status() -> None:
    """Adds written on a stream the bookie is refusing end with grpc's own bare INTERNAL
    "Internal error from Core" (the refusal's status is lost under the client's writes):
    the client must still report the refusal it got, to every add."""
    auth = tokens.TokenAuthenticator("HS256", KEY)
    server = grpc.aio.server(interceptors=[AuthenticationInterceptor(auth, "bookie", required_roles={"admin"})])
    bookie = RecordingBookie()
    bookie_grpc.add_BookieServicer_to_server(bookie, server)
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    await server.start()
    outcomes: dict[str, int] = {}
    try:
        for token, error in ((None, AuthenticationError), (tokens.create_token("alice", KEY), AuthorizationError)):
            for _ in range(8):  # a stream each; its adds race with the refusal
                async with BookieClient(address, timeout_s=5, token=token) as client:
                    got = await asyncio.gather(
                        *(client.add_entries([Entry(7, i, -1, b"x" * 1000)]) for i in range(8)),
                        return_exceptions=True,
                    )
                for g in got:
                    key = f"{type(g).__name__}: {g}" if isinstance(g, BaseException) else repr(g)
                    outcomes[key] = outcomes.get(key, 0) + 1
                    assert isinstance(g, error), outcomes
        assert bookie.add_streams == 0  # nothing got past the interceptor
    finally:
        await server.stop(None)


async def test_the_blocking_client_takes_the_same_authentication(broker) -> None:
    assert magnetar.AuthenticationToken is ma.AuthenticationToken

    def produce() -> None:  # in a thread: the server runs on this loop
        token = magnetar.AuthenticationToken(tokens.create_token("bob", KEY))
        client = magnetar.Client(broker.address, authentication=token, operation_timeout_seconds=5)
        try:
            with pytest.raises(TopicNotFound):
                client.create_producer("t")
        finally:
            client.close()

    await asyncio.to_thread(produce)
    assert {role for _, role, _ in broker.calls} == {"bob"}


def test_bad_authentication_arguments() -> None:
    with pytest.raises(InvalidArgument, match="empty"):
        ma.AuthenticationToken("  ")
    with pytest.raises(InvalidArgument, match="token or a function"):
        ma.AuthenticationToken(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="unsupported authentication str"):
        ma.Client("127.0.0.1:1", authentication="token")
    failing = ma.AuthenticationToken(lambda: "")
    with pytest.raises(AuthenticationError, match="returned no token"):
        failing.token()


def test_a_bare_unauthenticated_or_permission_denied_status_is_typed() -> None:
    from magnetar.common.grpcutil import from_rpc_error

    class Bare(grpc.RpcError):
        def __init__(self, code: grpc.StatusCode) -> None:
            self._code = code

        def code(self) -> grpc.StatusCode:
            return self._code

        def details(self) -> str:
            return "refused by a proxy"

        def trailing_metadata(self) -> tuple[()]:
            return ()

    assert isinstance(from_rpc_error(Bare(grpc.StatusCode.UNAUTHENTICATED)), AuthenticationError)
    assert isinstance(from_rpc_error(Bare(grpc.StatusCode.PERMISSION_DENIED)), AuthorizationError)
    assert not AuthenticationError.retriable and not AuthorizationError.retriable
