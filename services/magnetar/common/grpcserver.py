"""The one gRPC server start-up of the broker, the bookie and the auditor.

Every service listens the same way: :data:`~magnetar.common.grpcutil.SERVER_OPTIONS`,
:class:`~magnetar.common.grpcutil.MalformedRequestGuard` before the service's own
interceptors, its servicers and a health servicer (optionally server reflection), on one
port with TLS or plain text (``common/tls.py``). A port that cannot be bound stops the
start with a one-line error instead of a server that listens nowhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from magnetar.common.errors import MagnetarError
from magnetar.common.grpcutil import SERVER_OPTIONS, MalformedRequestGuard
from magnetar.common.tls import ServerTls, add_port

AddServicer = Callable[[Any, grpc.aio.Server], None]
"""A generated ``add_<Service>Servicer_to_server`` function."""


async def start_grpc_server(
    address: str,
    servicers: Sequence[tuple[AddServicer, Any]],
    *,
    health: HealthServicer,
    tls: ServerTls | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    reflected: Sequence[str] = (),
) -> grpc.aio.Server:
    """Start a gRPC server on ``address`` serving ``servicers``, each given as its
    generated add function and the servicer, and ``health``.

    ``health`` says NOT_SERVING for the server as a whole (``""``) before the port opens
    (grpc's HealthServicer starts out SERVING); the caller says SERVING once it is ready.

    Args:
        address: ``host:port`` to listen on.
        servicers: ``(add_fn, servicer)`` pairs, e.g. ``(add_BookieServicer_to_server, s)``.
        health: the process's health servicer.
        tls: listen with TLS (None: plain text).
        interceptors: the service's interceptors (authentication, authorization), run
            after the malformed-request guard.
        reflected: full names of services offered through server reflection.

    Raises:
        MagnetarError: the port cannot be bound (in use, or a bad address).
    """
    server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[MalformedRequestGuard(), *interceptors])
    for add, servicer in servicers:
        add(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    if reflected:
        reflection.enable_server_reflection((*reflected, reflection.SERVICE_NAME), server)
    await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    try:
        bound = add_port(server, address, tls)
    except RuntimeError:  # some gRPC versions raise instead of answering 0
        bound = 0
    if not bound:
        await server.stop(None)
        raise MagnetarError(f"cannot listen on {address}: is the port in use?")
    await server.start()
    return server
