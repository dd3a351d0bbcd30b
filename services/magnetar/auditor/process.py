"""One auditor replica process: the :class:`~magnetar.auditor.service.AuditorService`,
its gRPC door (:mod:`magnetar.auditor.rpc`), health and metrics."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer

from magnetar.auditor.config import DEFAULT_PORT, AuditorConfig
from magnetar.auditor.rpc.servicer import AuditorServicer
from magnetar.auditor.service import AuditorService
from magnetar.common.grpcauth import server_interceptors
from magnetar.common.grpcserver import start_grpc_server
from magnetar.common.metrics import serve_metrics
from magnetar.common.tls import server_tls
from magnetar.proto.v1 import auditor_pb2 as pb
from magnetar.proto.v1 import auditor_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    import grpc

log = logging.getLogger(__name__)


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
        # The health servicer says NOT_SERVING until the service has started.
        server = await start_grpc_server(
            f"{self.config.host}:{self.port}", [(pb_grpc.add_AuditorServicer_to_server, AuditorServicer(self.service))],
            health=self.health, tls=server_tls(self.config), interceptors=interceptors,
            reflected=[pb.DESCRIPTOR.services_by_name["Auditor"].full_name],
        )
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
