"""One bookie process: the storage core (:class:`~magnetar.bookie.bookie.Bookie`), its
gRPC door (:mod:`magnetar.bookie.rpc`), health and ZooKeeper registration, with graceful
shutdown."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer
from prometheus_client import REGISTRY

from magnetar.bookie.bookie import Bookie
from magnetar.bookie.config import DEFAULT_PORT, BookieConfig
from magnetar.bookie.garbagecollector import LedgerPlacement
from magnetar.bookie.metrics import BookieCollector
from magnetar.bookie.opstats import ServerStats
from magnetar.bookie.rpc.servicer import BookieServicer
from magnetar.common.errors import MagnetarError, NoSuchLedger
from magnetar.common.grpcauth import server_interceptors
from magnetar.common.grpcserver import start_grpc_server
from magnetar.common.metrics import serve_metrics
from magnetar.common.tasks import BackgroundTasks
from magnetar.common.tls import server_tls
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.bookies import ZkBookieRegistry
from magnetar.metadata.cookies import ZkCookieStore
from magnetar.metadata.ledgers import ZkLedgerMetadataStore
from magnetar.metadata.session import ZkSession
from magnetar.metadata.underreplication import ZkUnderReplicationStore
from magnetar.proto.v1 import bookie_pb2 as pb
from magnetar.proto.v1 import bookie_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    import grpc

log = logging.getLogger(__name__)

UNREGISTER_TIMEOUT_S = 2.0
"""Longest wait to remove the registration on stop: a stop must be prompt whatever is down."""


class ZkLedgerMetadataView:
    """The ledger metadata and the auditor's markers and locks, as the bookie's garbage
    collector reads them (``bookie/garbagecollector.py``)."""

    def __init__(self, session: ZkSession, bookie_id: str) -> None:
        self._ledgers = ZkLedgerMetadataStore(session, LedgerMetadata.from_dict)
        self._markers = ZkUnderReplicationStore(session)
        self._owner = f"bookie-gc {bookie_id}"

    async def id_bound(self) -> int:
        return await self._ledgers.id_bound()

    async def ledger_ids(self) -> set[int]:
        return set(await self._ledgers.list())

    async def placement(self, ledger_id: int) -> LedgerPlacement | None:
        try:
            metadata, _ = await self._ledgers.read(ledger_id)
        except NoSuchLedger:
            return None
        return LedgerPlacement(closed=metadata.is_closed, bookies=frozenset(metadata.bookies()))

    async def under_replicated(self, ledger_id: int) -> bool:
        return await self._markers.get(ledger_id) is not None

    async def try_lock(self, ledger_id: int) -> bool:
        return await self._markers.try_lock(ledger_id, self._owner)

    async def unlock(self, ledger_id: int) -> None:
        await self._markers.unlock(ledger_id)


class BookieServer:
    """One bookie process: storage core, gRPC server, health, registration."""

    def __init__(self, config: BookieConfig) -> None:
        self.config = config
        self.port = config.port or DEFAULT_PORT
        self.bookie_id = config.advertised_address or f"{config.host}:{self.port}"
        self.authenticator = config.authenticator()  # a bad key setting stops the start
        self.health = HealthServicer()
        self.server: grpc.aio.Server | None = None
        self.zk = ZkSession(config.zookeeper, config.zk_root, config.zk_session_timeout_s)
        self.bookie = Bookie(
            config, self.bookie_id, cookies=ZkCookieStore(self.zk),
            ledger_metadata=ZkLedgerMetadataView(self.zk, self.bookie_id),
        )
        self.registry = ZkBookieRegistry(self.zk)
        self.server_stats = ServerStats()
        self._registration_tasks = BackgroundTasks("bookie registration")

    async def start(self) -> None:
        # ZooKeeper first: the bookie checks its cookie there before it opens its storage.
        await self.zk.start()
        try:
            await self.bookie.start()
        except BaseException:
            await self.zk.close()
            raise
        # With authentication on, only superuser roles (brokers, auditors, tools) get in.
        interceptors = server_interceptors(self.authenticator, "bookie", required_roles=self.config.superuser_roles)
        try:
            # The health servicer says NOT_SERVING until the bookie is registered.
            server = await start_grpc_server(
                f"{self.config.host}:{self.port}", [(pb_grpc.add_BookieServicer_to_server, BookieServicer(self.bookie, self.server_stats))],
                health=self.health, tls=server_tls(self.config), interceptors=interceptors,
                reflected=[pb.DESCRIPTOR.services_by_name["Bookie"].full_name],
            )
        except BaseException:
            await self.bookie.close()
            await self.zk.close()
            raise
        self.server = server
        try:
            await self.registry.register(self.bookie_id, self._registration_info(), read_only=self.bookie.read_only)
        except BaseException:
            await server.stop(0)
            await self.bookie.close()
            await self.zk.close()
            raise
        self.bookie.on_read_only_change = self._read_only_changed
        if self.config.metrics_port:
            REGISTRY.register(BookieCollector(self.bookie, self.server_stats))
            serve_metrics(self.config.host, self.config.metrics_port)
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self.health.set("magnetar.v1.Bookie", health_pb2.HealthCheckResponse.SERVING)
        log.info("bookie %s serving (data %s)", self.bookie_id, self.config.data_dir)

    def _registration_info(self) -> dict[str, object]:
        return {"address": self.bookie_id, "version": self.bookie.info()["version"]}

    def _read_only_changed(self, read_only: bool) -> None:
        self._registration_tasks.spawn(self.registry.set_read_only(self.bookie_id, read_only), name="bookie-set-read-only")

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop taking requests, finish in-flight ones (up to ``grace_s``), flush, leave ZooKeeper."""
        await self.health.enter_graceful_shutdown()
        self.zk.stopping()  # with ZooKeeper gone, unregistering fails at once
        self._registration_tasks.cancel()
        try:
            # Bounded: with ZooKeeper gone the call would wait out the session's operation
            # timeout (30 s). The registration is ephemeral and goes with the session anyway.
            async with asyncio.timeout(UNREGISTER_TIMEOUT_S):
                await self.registry.unregister(self.bookie_id)
        except MagnetarError as exc:
            log.warning("could not unregister: %s", exc)
        except TimeoutError:
            log.warning("could not unregister within %g s (ZooKeeper unreachable?)", UNREGISTER_TIMEOUT_S)
        if self.server is not None:
            await self.server.stop(grace_s)
        await self.bookie.close()
        await self.zk.close()
        log.info("bookie %s stopped", self.bookie_id)
