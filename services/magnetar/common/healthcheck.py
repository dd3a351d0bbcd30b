"""Readiness probes: the standard gRPC health check (grpc.health.v1.Health/Check), and an
HTTP readiness endpoint (the gateway's ``/readyz``); both over TLS when given a
:class:`ClientTls`."""

from __future__ import annotations

import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from magnetar.common.netutil import can_connect
from magnetar.common.tls import ClientTls, https_context, sync_channel

# A probe keeps its connection to itself: with gRPC's process-wide subchannel pool, a new
# channel to an address reuses the subchannel of any other channel to it with the same
# arguments, state (connecting, backing off) included, so one stuck connection left by
# an earlier channel could fail every later probe of that address.
PROBE_OPTIONS = (("grpc.use_local_subchannel_pool", 1),)


def grpc_health_serving(address: str, timeout_s: float = 1.0, service: str = "", tls: ClientTls | None = None) -> bool:
    """True when the gRPC server at ``host:port`` reports SERVING for ``service``.

    Any failure (nothing listening, not serving yet, no health service, a TLS handshake
    refused) is False.
    """
    return grpc_health_problem(address, timeout_s, service, tls) is None


def grpc_health_problem(
    address: str, timeout_s: float = 1.0, service: str = "", tls: ClientTls | None = None,
) -> str | None:
    """Why the gRPC server at ``host:port`` does not report SERVING for ``service`` (the
    call's status and details, or the status it reported); None when it does."""
    with sync_channel(address, tls, PROBE_OPTIONS) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            problem = f"health check failed: {code.name if code else 'error'} {details}"
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:  # which side was slow?
                problem += " (a TCP connection opens)" if can_connect(address, timeout_s) else " (no TCP connection opens)"
            return problem
    if reply.status == health_pb2.HealthCheckResponse.SERVING:
        return None
    return f"health check answered {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"


def http_ready(url: str, timeout_s: float = 1.0, tls: ClientTls | None = None) -> bool:
    """True when ``url`` answers 200; any failure (nothing listening, 503, a TLS
    handshake refused) is False. ``tls``: how an ``https://`` URL is verified."""
    context = https_context(tls) if tls is not None else None
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
