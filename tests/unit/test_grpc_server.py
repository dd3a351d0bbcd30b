"""``common/grpcserver.py``, the one gRPC server start-up of the broker, the bookie and the
auditor, on real sockets: it serves the given servicers, health (NOT_SERVING until the
caller says otherwise) and reflection; malformed bytes are refused before the given
interceptors see them; a port in use stops the start with a one-line error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from magnetar.common.errors import MagnetarError
from magnetar.common.grpcserver import start_grpc_server
from magnetar.common.grpcutil import CHANNEL_OPTIONS
from magnetar.common.netutil import free_port
from magnetar.proto.v1 import bookie_pb2 as pb
from magnetar.proto.v1 import bookie_pb2_grpc as pb_grpc

pytestmark = pytest.mark.asyncio

BOOKIE = pb.DESCRIPTOR.services_by_name["Bookie"].full_name


class InfoBookie(pb_grpc.BookieServicer):
    def __init__(self, bookie_id: str) -> None:
        self.bookie_id = bookie_id

    async def GetInfo(self, request: pb.GetInfoRequest, context: grpc.aio.ServicerContext) -> pb.BookieInfo:
        return pb.BookieInfo(bookie_id=self.bookie_id)


class RecordingInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        self.methods.append(handler_call_details.method)
        return await continuation(handler_call_details)


async def _start(port: int, bookie_id: str, interceptor: RecordingInterceptor | None = None) -> tuple[grpc.aio.Server, HealthServicer]:
    health = HealthServicer()
    server = await start_grpc_server(
        f"127.0.0.1:{port}", [(pb_grpc.add_BookieServicer_to_server, InfoBookie(bookie_id))],
        health=health, interceptors=[interceptor] if interceptor else [], reflected=[BOOKIE],
    )
    return server, health


async def test_serves_the_servicers_health_and_reflection_behind_the_interceptors() -> None:
    port = free_port()
    interceptor = RecordingInterceptor()
    server, health = await _start(port, "bookie-a", interceptor)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS) as channel:
            info = await pb_grpc.BookieStub(channel).GetInfo(pb.GetInfoRequest(), timeout=5)
            assert info.bookie_id == "bookie-a"

            checks = health_pb2_grpc.HealthStub(channel)
            not_yet = await checks.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert not_yet.status == health_pb2.HealthCheckResponse.NOT_SERVING
            await health.set("", health_pb2.HealthCheckResponse.SERVING)
            ready = await checks.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert ready.status == health_pb2.HealthCheckResponse.SERVING

            listing = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            )
            names = {s.name async for reply in listing for s in reply.list_services_response.service}
            assert names == {BOOKIE, reflection.SERVICE_NAME}

            with pytest.raises(grpc.aio.AioRpcError) as malformed:
                await channel.unary_unary(f"/{BOOKIE}/GetInfo")(b"\xff\xff\xff", timeout=5)
            assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "malformed request" in (malformed.value.details() or "")
        assert f"/{BOOKIE}/GetInfo" in interceptor.methods
    finally:
        await server.stop(None)


async def test_a_port_in_use_stops_the_start_with_one_line_and_leaves_the_first_server_serving() -> None:
    port = free_port()
    first, _ = await _start(port, "first")
    try:
        with pytest.raises(MagnetarError) as refused:
            await _start(port, "second")
        assert refused.value.message == f"cannot listen on 127.0.0.1:{port}: is the port in use?"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS) as channel:
            for _ in range(5):  # the port is still the first server's alone
                info = await pb_grpc.BookieStub(channel).GetInfo(pb.GetInfoRequest(), timeout=5)
                assert info.bookie_id == "first"
    finally:
        await first.stop(None)
