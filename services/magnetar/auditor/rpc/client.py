"""Calls to an auditor replica over gRPC: its status, and a check run by the leader
(used by the gateway, the shell and a replica that is not the leader)."""

from __future__ import annotations

import grpc

from magnetar.common.grpcauth import with_token
from magnetar.common.grpcutil import CHANNEL_OPTIONS, from_rpc_error
from magnetar.common.tls import ClientTls, aio_channel
from magnetar.proto.v1 import auditor_pb2 as pb
from magnetar.proto.v1 import auditor_pb2_grpc as pb_grpc

_AUDIT_RPC_TIMEOUT_S = 3600.0


async def fetch_status(
    address: str, max_ledgers: int = 1000, timeout_s: float = 10.0, *, tls: ClientTls | None = None,
    token: str | None = None,
) -> pb.AuditorStatus:
    """The status of the auditor replica at ``address`` (called with ``tls``, None: plain
    text; presenting ``token`` if given).

    Raises:
        MagnetarError: it could not be reached or failed.
    """
    async with aio_channel(address, tls, CHANNEL_OPTIONS) as channel:
        try:
            return await _stub(channel, token).GetStatus(
                pb.GetStatusRequest(max_ledgers=max_ledgers), timeout=timeout_s
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, f"the auditor {address}") from exc


async def forward_trigger(leader: str, *, tls: ClientTls | None = None, token: str | None = None) -> pb.AuditReport:
    """Ask the leading replica at ``leader`` to run the check (called with ``tls``,
    presenting ``token``).

    Raises:
        MagnetarError: it could not be reached or failed.
    """
    async with aio_channel(leader, tls, CHANNEL_OPTIONS) as channel:
        try:
            return await _stub(channel, token).TriggerAudit(
                pb.TriggerAuditRequest(), timeout=_AUDIT_RPC_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, f"the leading auditor {leader}") from exc


def _stub(channel: grpc.aio.Channel, token: str | None) -> pb_grpc.AuditorStub:
    return with_token(pb_grpc.AuditorStub(channel), (lambda: token) if token else None)  # type: ignore[no-any-return]
