"""The gRPC readiness probe (magnetar.common.healthcheck): what it says of a server that
serves, of a port nothing listens on, and of a listener that accepts and never answers
(the probe then tells which side was slow)."""

from __future__ import annotations

import asyncio
import socket

from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer

from magnetar.common.grpcserver import start_grpc_server
from magnetar.common.healthcheck import grpc_health_problem
from magnetar.common.netutil import free_port


async def test_a_serving_server_has_no_problem() -> None:
    health = HealthServicer()
    port = free_port()
    server = await start_grpc_server(f"127.0.0.1:{port}", [], health=health)
    try:
        problem = await asyncio.to_thread(grpc_health_problem, f"127.0.0.1:{port}")
        assert problem is not None and "NOT_SERVING" in problem  # the servicer's start state
        await health.set("", health_pb2.HealthCheckResponse.SERVING)
        assert await asyncio.to_thread(grpc_health_problem, f"127.0.0.1:{port}") is None
    finally:
        await server.stop(0)


def test_nothing_listening_is_unavailable() -> None:
    problem = grpc_health_problem(f"127.0.0.1:{free_port()}", timeout_s=1.0)
    assert problem is not None and problem.startswith("health check failed: UNAVAILABLE")


def test_a_listener_that_never_answers_is_a_deadline_with_the_tcp_verdict() -> None:
    with socket.socket() as listener:  # accepts connections (backlog), answers nothing
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        problem = grpc_health_problem(f"127.0.0.1:{port}", timeout_s=0.5)
    assert problem is not None
    assert "DEADLINE_EXCEEDED" in problem and "(a TCP connection opens)" in problem, problem
