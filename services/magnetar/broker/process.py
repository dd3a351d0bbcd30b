"""One broker process: the ZooKeeper session, the stores and the ledger client the
:class:`~magnetar.broker.service.BrokerService` runs on, its gRPC door
(:mod:`magnetar.broker.rpc`), health and metrics, started and stopped together."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer

from magnetar.broker.config import DEFAULT_PORT, BrokerConfig
from magnetar.broker.metrics import BrokerMetrics
from magnetar.broker.protocol.listener import ProtocolListener, pulsar_service_urls
from magnetar.broker.rpc.authorization import AuthorizationInterceptor
from magnetar.broker.rpc.load_peers import RemoteLoadPeers
from magnetar.broker.rpc.peer_topics import RemoteTopicLister
from magnetar.broker.rpc.remote_moves import RemoteMovePublisher
from magnetar.broker.rpc.servicer import BrokerServicer
from magnetar.broker.service import BrokerService
from magnetar.broker.session.listener import FramedSessionListener, session_address
from magnetar.common.grpcauth import AuthenticationInterceptor, server_interceptors
from magnetar.common.grpcserver import start_grpc_server
from magnetar.common.metrics import serve_metrics
from magnetar.common.tls import client_tls, server_ssl_context, server_tls
from magnetar.ledger.client import LedgerClient
from magnetar.ledger.context import LedgerClientConfig
from magnetar.metadata.managed_ledgers import ZkManagedLedgerStore
from magnetar.metadata.ownership import ZkOwnershipStore
from magnetar.metadata.session import ZkSession
from magnetar.metadata.tenants import ZkTenantStore
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    import grpc

log = logging.getLogger(__name__)


class BrokerServer:
    """One broker process: service core, gRPC server, health, registration."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.port = config.port or DEFAULT_PORT
        self.broker_id = config.advertised_address or f"{config.host}:{self.port}"
        self.session = ZkSession(config.zookeeper, config.zk_root, config.zk_session_timeout_s)
        session = self.session
        # Read the keys and the service token now: a bad setting stops the start.
        self.authenticator = config.authenticator()
        token = config.service_token()
        tls = client_tls(config)  # how this broker calls bookies and brokers
        ledgers = LedgerClient(
            session,
            LedgerClientConfig(
                add_timeout_s=config.ledger_add_timeout_s, read_timeout_s=config.ledger_read_timeout_s, auth_token=token
            ),
            tls=tls,
        )
        self.service = BrokerService(
            config, self.broker_id, session, ledgers=ledgers, ml_store=ZkManagedLedgerStore(session),
            tenants=ZkTenantStore(session), ownership=ZkOwnershipStore(session),
            # Moves to topics other brokers serve go through the SDK, pointed at this broker.
            remote_mover=RemoteMovePublisher(self.broker_id, tls=tls, token=token),
            # A namespace's non-persistent topics are asked of the brokers serving them.
            peer_topics=RemoteTopicLister(self.broker_id, tls=tls, token=token),
            # The load manager asks other brokers to take or unload bundles.
            load_peers=RemoteLoadPeers(self.broker_id, tls=tls, token=token),
            pulsar_urls=pulsar_service_urls(config), session_address=session_address(config),
        )
        # Pulsar's binary protocol: pulsar:// and, with TLS, pulsar+ssl:// on a port of its own.
        self.protocol: list[ProtocolListener] = []
        if config.protocol_port:
            self.protocol.append(ProtocolListener(self.service, config, self.authenticator))
        if config.protocol_tls_port and (served_tls := server_tls(config)) is not None:
            # The TLS files are read now: a bad one stops the start.
            context = server_ssl_context(served_tls)
            self.protocol.append(ProtocolListener(self.service, config, self.authenticator, tls=context))
        self.servicer = BrokerServicer(self.service)
        self.interceptors = server_interceptors(self.authenticator, "broker", proxy_roles=config.proxy_roles)
        # The SDK's session over framed TCP, checked as the gRPC door checks its calls.
        self.framed: FramedSessionListener | None = None
        if config.session_port:
            authentication = next((i for i in self.interceptors if isinstance(i, AuthenticationInterceptor)), None)
            served = server_tls(config)
            self.framed = FramedSessionListener(
                self.servicer.produce_stream, self.servicer.consume_stream, config, authentication,
                tls=server_ssl_context(served) if served is not None else None,
            )
        self.health = HealthServicer()
        self.server: grpc.aio.Server | None = None

    async def start(self) -> None:
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.session.start()
        try:
            for listener in self.protocol:  # listening before the registration advertises them
                await listener.start()
            if self.framed is not None:
                await self.framed.start()
            await self.service.start()
            interceptors = list(self.interceptors)
            if self.config.authorization_enabled:
                interceptors.append(AuthorizationInterceptor(self.service.authorizer))
            self.server = await start_grpc_server(
                f"{self.config.host}:{self.port}", [(pb_grpc.add_BrokerServicer_to_server, self.servicer)],
                health=self.health, tls=server_tls(self.config), interceptors=interceptors,
            )
        except BaseException:
            for listener in self.protocol:
                await listener.stop()
            if self.framed is not None:
                await self.framed.stop()
            await self.session.close()
            raise
        pulsar = BrokerMetrics(self.service, asyncio.get_running_loop(), self.config.expose_topic_level_metrics_in_prometheus)
        serve_metrics(self.config.host, self.config.metrics_port, extra=pulsar.exposition)
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        log.info("broker %s serving", self.broker_id)

    async def stop(self, grace_s: float = 5.0) -> None:
        await self.health.enter_graceful_shutdown()
        self.session.stopping()  # with ZooKeeper gone, topics close as after a crash, at once
        if self.server is not None:
            await self.server.stop(grace_s)
        for listener in self.protocol:
            await listener.stop(grace_s)
        if self.framed is not None:
            await self.framed.stop(grace_s)
        await self.service.close()
        await self.session.close()
        log.info("broker %s stopped", self.broker_id)
