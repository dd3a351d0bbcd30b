"""The gRPC options every Magnetar channel and server uses, on real sockets: a channel
does not inherit another channel's failure to reach the same address, and a server does
not share a port another server listens on."""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from magnetar.common.grpcutil import CHANNEL_OPTIONS, CLIENT_CHANNEL_OPTIONS, SERVER_OPTIONS
from magnetar.common.netutil import free_port

pytestmark = pytest.mark.asyncio


async def _check(address: str, options) -> int:
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        return reply.status


async def _serve(port: int) -> grpc.aio.Server:
    server = grpc.aio.server(options=SERVER_OPTIONS)
    assert server.add_insecure_port(f"127.0.0.1:{port}") == port
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    await server.start()
    return server


@pytest.mark.parametrize("options", [CHANNEL_OPTIONS, CLIENT_CHANNEL_OPTIONS], ids=["internal", "client"])
async def test_a_new_channel_reaches_a_server_that_came_back_where_an_old_channel_failed(options):
    # gRPC's process-wide connection pool handed the new channel the old one's refused
    # connection and backoff: it failed at once with "Connection refused" (seen in CI as a
    # twin broker on a port a stopped broker had used).
    port = free_port()
    address = f"127.0.0.1:{port}"
    old = grpc.aio.insecure_channel(address, options=options)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            await health_pb2_grpc.HealthStub(old).Check(health_pb2.HealthCheckRequest(), timeout=1)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        server = await _serve(port)
        try:
            started = time.monotonic()
            assert await _check(address, options) == health_pb2.HealthCheckResponse.SERVING
            assert time.monotonic() - started < 1  # no backoff inherited
        finally:
            await server.stop(None)
    finally:
        await old.close()


async def test_a_second_server_cannot_listen_on_a_port_in_use():
    port = free_port()
    first = await _serve(port)
    try:
        second = grpc.aio.server(options=SERVER_OPTIONS)
        try:
            bound = second.add_insecure_port(f"127.0.0.1:{port}")
        except RuntimeError:  # some gRPC versions raise instead of answering 0
            bound = 0
        assert bound == 0  # with SO_REUSEPORT (gRPC's default) both listened and split the connections
        await second.stop(None)
        assert await _check(f"127.0.0.1:{port}", CHANNEL_OPTIONS) == health_pb2.HealthCheckResponse.SERVING
    finally:
        await first.stop(None)
