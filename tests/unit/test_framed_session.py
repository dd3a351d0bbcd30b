"""The framed session: its frame codec (common/frames.py), the broker's listener
(broker/session/) serving stand-in stream servers, and the SDK's transport
(client/framed.py) with its fallback to the ``Session`` RPC."""

from __future__ import annotations

import asyncio
import random

import pytest
from test_broker_session import Servers

from magnetar.broker.config import BrokerConfig
from magnetar.broker.session.listener import FramedSessionListener
from magnetar.client.connection import ConnectionPool
from magnetar.client.framed import FramedSessionTransport
from magnetar.client.session import ClientSession, GrpcSessionTransport
from magnetar.common.authentication import AuthenticationService
from magnetar.common.errors import AuthenticationError, InvalidArgument, NotConnected
from magnetar.common.frames import HEADER, FrameDecoder, encode
from magnetar.common.grpcauth import CALLER_ROLE, AuthenticationInterceptor
from magnetar.common.netutil import free_port
from magnetar.common.tokens import TokenAuthenticator, create_token, generate_secret_key
from magnetar.proto.v1 import broker_pb2 as pb


def test_frames_come_out_whole_however_the_stream_is_cut() -> None:
    bodies = [b"", b"a", b"x" * 70_000, bytes(range(256)) * 3]
    stream = b"".join(encode(b) for b in bodies)
    assert stream[:4] == HEADER.pack(0) and stream[4:9] == HEADER.pack(1) + b"a"
    rng = random.Random(35)
    for cuts in ([1] * len(stream), [len(stream)], [rng.randrange(1, 9000) for _ in range(200)]):
        decoder, got, pos = FrameDecoder(), [], 0
        for size in cuts:
            if pos >= len(stream):
                break
            got += [bytes(f) for f in decoder.feed(stream[pos : pos + size])]
            pos += size
        if pos < len(stream):
            got += [bytes(f) for f in decoder.feed(stream[pos:])]
        assert got == bodies and decoder.pending == 0
    torn = FrameDecoder()
    assert torn.feed(stream[:10]) == [b"", b"a"] and torn.pending == 1  # a header cut short is kept


def test_a_frame_over_the_limit_is_refused() -> None:
    decoder = FrameDecoder(max_bytes=1024)
    assert decoder.feed(encode(b"x" * 1024))[0] == b"x" * 1024
    with pytest.raises(InvalidArgument, match="1025 bytes is longer than the limit of 1024"):
        decoder.feed(HEADER.pack(1025) + b"x")


async def _listener(servers: Servers, authentication: AuthenticationInterceptor | None = None) -> FramedSessionListener:
    config = BrokerConfig(host="127.0.0.1", session_port=free_port(), protocol_port=0)
    listener = FramedSessionListener(servers.produce, servers.consume, config, authentication)
    await listener.start()
    return listener


async def test_handles_of_a_framed_session_are_served_and_detached_when_the_connection_closes() -> None:
    servers = Servers()
    listener = await _listener(servers)
    try:
        transport = FramedSessionTransport(f"127.0.0.1:{listener.port}", "the broker")
        session = ClientSession(transport, "the broker", lambda s: None)
        a, b = session.open_handle("produce", "a"), session.open_handle("consume", "b")
        opened = await asyncio.gather(
            a.open(pb.ProduceRequest(open=pb.OpenProducer(topic="ta")), 5),
            b.open(pb.ConsumeRequest(subscribe=pb.Subscribe(topic="tb")), 5),
        )
        assert [opened[0].opened.producer_name, opened[1].subscribed.consumer_name] == ["ta", "tb"]
        await asyncio.gather(*(a.write(pb.ProduceRequest(send=pb.SendBatch(request_id=i))) for i in range(100)))
        await b.write(pb.ConsumeRequest(flow=pb.Flow(permits=300_000)))  # a delivery larger than a socket read
        receipts = [(await a.read()).receipt.request_id for _ in range(100)]
        assert receipts == list(range(100))
        assert len((await b.read()).deliveries.deliveries[0].entry) == 300_000
        assert listener.connections == 1
        await session.close()  # the connection closes: the broker detaches both
        for _ in range(200):
            if sorted(servers.detached) == ["ta", "tb"] and listener.connections == 0:
                break
            await asyncio.sleep(0.01)
        assert sorted(servers.detached) == ["ta", "tb"] and listener.connections == 0
    finally:
        await listener.stop()


async def test_the_first_frame_is_authenticated_and_the_role_serves_the_handles() -> None:
    key = generate_secret_key()
    roles: list[str | None] = []
    servers = Servers()
    produce = servers.produce

    def produce_recording_role(requests):  # type: ignore[no-untyped-def]
        roles.append(CALLER_ROLE.get())
        return produce(requests)

    servers.produce = produce_recording_role  # type: ignore[method-assign]
    check = AuthenticationInterceptor(AuthenticationService(TokenAuthenticator("HS256", key)), "broker")
    listener = await _listener(servers, check)
    address = f"127.0.0.1:{listener.port}"
    try:
        for header, reason in (("", "no token"), ("Bearer " + create_token("app", generate_secret_key()), "verify")):
            refused = FramedSessionTransport(address, "the broker", authorization=header)
            with pytest.raises(AuthenticationError, match=reason):
                await asyncio.wait_for(refused.read(), 5)
            refused.cancel()
        transport = FramedSessionTransport(address, "the broker", authorization="Bearer " + create_token("app", key))
        session = ClientSession(transport, "the broker", lambda s: None)
        handle = session.open_handle("produce", "p")
        assert (await handle.open(pb.ProduceRequest(open=pb.OpenProducer(topic="t")), 5)).opened.producer_name == "t"
        assert roles == ["app"]
        await session.close()
    finally:
        await listener.stop()


async def test_a_listener_that_cannot_be_reached_sends_the_session_to_the_session_rpc() -> None:
    pool = ConnectionPool("127.0.0.1:1", 5)
    address = "127.0.0.1:1"
    pool._session_addresses[address] = f"127.0.0.1:{free_port()}"  # as a lookup would have advertised; nobody listens
    try:
        session = pool.session(address)
        assert isinstance(session.transport, FramedSessionTransport)
        handle = session.open_handle("produce", "p")
        with pytest.raises(NotConnected, match="cannot reach the framed session"):
            await handle.open(pb.ProduceRequest(open=pb.OpenProducer(topic="t")), 5)
        assert session.unsupported and session.broken is not None
        fallback = pool.session(address)
        assert fallback is not session and isinstance(fallback.transport, GrpcSessionTransport)
    finally:
        await pool.close()


async def test_a_connection_made_after_the_session_was_closed_is_closed_at_once() -> None:
    """cancel() while connecting, then the connection completes (wait_for cancelled as the
    inner create_connection finishes): the transport must not be left open."""
    accepted: list[asyncio.StreamWriter] = []
    server = await asyncio.start_server(lambda _r, w: accepted.append(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        session = FramedSessionTransport(f"127.0.0.1:{port}", "broker")
        session.cancel()  # before the connection is made
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_connection(lambda: session, "127.0.0.1", port)
        assert transport.is_closing()
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
