"""The auditor's gRPC servicer (``magnetar.v1.Auditor``): wire ↔
:class:`~magnetar.auditor.service.AuditorService`."""

from __future__ import annotations

from typing import Any

import grpc

from magnetar.auditor.rpc.client import forward_trigger
from magnetar.auditor.service import AuditorService, NotLeader
from magnetar.common.grpcutil import rpc_errors
from magnetar.common.tls import client_tls
from magnetar.proto.v1 import auditor_pb2 as pb
from magnetar.proto.v1 import auditor_pb2_grpc as pb_grpc


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
