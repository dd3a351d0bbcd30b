"""The auditor's gRPC adapter (``magnetar.v1.Auditor``) and the process around it."""

from __future__ import annotations

import logging
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from magnetar.auditor.config import DEFAULT_PORT, AuditorConfig
from magnetar.auditor.service import AuditorService, NotLeader
from magnetar.common.errors import MagnetarError
from magnetar.common.grpcauth import server_interceptors, with_token
from magnetar.common.grpcutil import (
    CHANNEL_OPTIONS,
    SERVER_OPTIONS,
    MalformedRequestGuard,
    from_rpc_error,
    rpc_errors,
)
from magnetar.common.metrics import serve_metrics
from magnetar.common.tls import ClientTls, add_port, aio_channel, client_tls, server_tls
from magnetar.proto.v1 import auditor_pb2 as pb
from magnetar.proto.v1 import auditor_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

_AUDIT_RPC_TIMEOUT_S = 3600.0


def report_message(doc: dict[str, Any]) -> pb.AuditReport:
    fields = pb.AuditReport.DESCRIPTOR.fields_by_name
    return pb.AuditReport(**{k: v for k, v in doc.items() if k in fields})


class AuditorServicer(pb_grpc.AuditorServicer):
    def __init__(self, service: AuditorService) -> None:
        self.service = service

    @rpc_errors
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.AuditorStatus:
        s = await self.service.status(request.max_ledgers or 1000)
        config = self.service.config
        return pb.AuditorStatus(
            auditor_id=s.auditor_id,
            leader_id=s.leader_id,
            is_leader=s.is_leader,
            last_audit=report_message(s.last_audit) if s.last_audit else None,
            under_replicated_count=s.under_replicated_count,
            under_replicated=[
                pb.UnderReplicatedLedger(
                    ledger_id=m.ledger_id,
                    missing_bookies=m.missing,
                    marked_at_ms=m.marked_at_ms,
                    locked_by=owner,
                )
                for m, owner in s.under_replicated
            ],
            in_progress=[
                pb.ReplicationProgress(
                    ledger_id=p.ledger_id,
                    first_entry=p.first_entry,
                    missing_bookie=p.missing,
                    target_bookie=p.target,
                    entries_total=p.entries_total,
                    entries_copied=p.entries_copied,
                    note=p.note,
                )  # fmt: skip
                for p in s.in_progress
            ],
            ledgers_replicated=s.ledgers_replicated,
            entries_copied=s.entries_copied,
            lost_bookies=[
                pb.LostBookie(bookie_id=b, gone_for_s=t) for b, t in sorted(s.lost_bookies.items())
            ],
            grace_period_s=config.grace_period_s,
            throttle_entries_per_s=config.throttle_entries_per_s,
            last_error=s.last_error,
        )

    @rpc_errors
    async def TriggerAudit(
        self, request: pb.TriggerAuditRequest, context: grpc.aio.ServicerContext
    ) -> pb.AuditReport:
        try:
            return report_message(await self.service.trigger_audit())
        except NotLeader as exc:
            if not exc.leader or exc.leader == self.service.auditor_id:
                raise
            return await forward_trigger(exc.leader, tls=client_tls(self.service.config), token=self.service.service_token)


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


class AuditorServer:
    """One auditor replica process: the service, gRPC server, health."""

    def __init__(self, config: AuditorConfig) -> None:
        self.config = config
        self.port = config.port or DEFAULT_PORT
        self.auditor_id = config.address(DEFAULT_PORT)
        self.service = AuditorService(config, self.auditor_id)
        self.authenticator = config.authenticator()  # a bad key setting stops the start
        self.health = HealthServicer()
        self.server: grpc.aio.Server | None = None

    async def start(self) -> None:
        # With authentication on, only superuser roles (operators, the gateway, replicas).
        interceptors = server_interceptors(self.authenticator, "auditor", required_roles=self.config.superuser_roles)
        server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[MalformedRequestGuard(), *interceptors])
        pb_grpc.add_AuditorServicer_to_server(AuditorServicer(self.service), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (pb.DESCRIPTOR.services_by_name["Auditor"].full_name, reflection.SERVICE_NAME), server
        )
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        if not add_port(server, f"{self.config.host}:{self.port}", server_tls(self.config)):
            raise MagnetarError(
                f"cannot listen on {self.config.host}:{self.port}: is the port in use?"
            )
        await server.start()
        self.server = server
        try:
            await self.service.start()
            serve_metrics(self.config.host, self.config.metrics_port)
        except BaseException:
            await server.stop(0)
            await self.service.stop()
            raise
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self.health.set("magnetar.v1.Auditor", health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "auditor %s serving (grace period %g s, check every %g s, throttle %s)",
            self.auditor_id, self.config.grace_period_s, self.config.audit_interval_s,
            f"{self.config.throttle_entries_per_s} entries/s" if self.config.throttle_entries_per_s else "off",
        )  # fmt: skip

    async def stop(self, grace_s: float = 5.0) -> None:
        await self.health.enter_graceful_shutdown()
        if self.server is not None:
            await self.server.stop(grace_s)
        await self.service.stop()
        log.info("auditor %s stopped", self.auditor_id)
