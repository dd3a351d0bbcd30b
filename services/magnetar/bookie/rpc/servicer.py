"""The bookie's gRPC adapter (``magnetar.v1.Bookie``) and the process around it:
core + gRPC server + health + ZooKeeper registration, with graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from prometheus_client import REGISTRY

from magnetar.bookie.bookie import Bookie, StoredEntry
from magnetar.bookie.config import DEFAULT_PORT, BookieConfig
from magnetar.bookie.garbagecollector import LedgerPlacement
from magnetar.bookie.metrics import BookieCollector
from magnetar.common.errors import MagnetarError, NoSuchLedger
from magnetar.common.grpcauth import server_interceptors
from magnetar.common.grpcutil import SERVER_OPTIONS, MalformedRequestGuard, abort, rpc_errors
from magnetar.common.metrics import serve_metrics
from magnetar.common.tasks import BackgroundTasks
from magnetar.common.tls import add_port, server_tls
from magnetar.ledger.metadata import LedgerMetadata
from magnetar.metadata.bookies import ZkBookieRegistry
from magnetar.metadata.cookies import ZkCookieStore
from magnetar.metadata.ledgers import ZkLedgerMetadataStore
from magnetar.metadata.session import ZkSession
from magnetar.metadata.underreplication import ZkUnderReplicationStore
from magnetar.proto.v1 import bookie_pb2 as pb
from magnetar.proto.v1 import bookie_pb2_grpc as pb_grpc
from magnetar.proto.v1 import common_pb2

log = logging.getLogger(__name__)

_MAX_PENDING_REQUESTS = 256
_DEFAULT_READ_CHUNK = 1024 * 1024
UNREGISTER_TIMEOUT_S = 2.0
"""Longest wait to remove the registration on stop: a stop must be prompt whatever is down."""


def _error(exc: MagnetarError) -> common_pb2.Error:
    return common_pb2.Error(code=exc.code, message=exc.message, retriable=exc.retriable)


class BookieServicer(pb_grpc.BookieServicer):
    def __init__(self, bookie: Bookie) -> None:
        self.bookie = bookie

    async def AddEntries(
        self, request_iterator: AsyncIterator[pb.AddRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.AddResponse]:
        bookie = self.bookie
        pending: asyncio.Queue[tuple[int, asyncio.Future[None] | None, list[pb.AddResult]] | None] = asyncio.Queue(
            _MAX_PENDING_REQUESTS
        )

        async def receive() -> None:
            try:
                async for req in request_iterator:
                    await bookie.wait_for_cache_room()
                    try:
                        fut, rejected = bookie.add_entries(req.entries, recovery=req.recovery)
                        failed = [pb.AddResult(ledger_id=lid, entry_id=e, error=_error(x)) for lid, e, x in rejected]
                    except MagnetarError as exc:  # the whole request is refused
                        fut = None
                        err = _error(exc)
                        failed = [pb.AddResult(ledger_id=e.ledger_id, entry_id=e.entry_id, error=err) for e in req.entries]
                    await pending.put((req.request_id, fut, failed))
            finally:
                await pending.put(None)

        receiver = asyncio.create_task(receive())
        try:
            while (item := await pending.get()) is not None:
                request_id, fut, failed = item
                if fut is not None:
                    try:
                        await fut
                    except MagnetarError as exc:
                        await abort(context, exc)
                yield pb.AddResponse(request_id=request_id, failed=failed)
            await receiver  # surfaces a receive error
        finally:
            receiver.cancel()

    @rpc_errors
    async def ReadEntry(self, request: pb.ReadEntryRequest, context: grpc.aio.ServicerContext) -> pb.ReadEntryResponse:
        e = await self.bookie.read_entry(request.ledger_id, request.entry_id, fence=request.fence)
        return pb.ReadEntryResponse(
            entry=pb.Entry(ledger_id=request.ledger_id, entry_id=e.entry_id, last_add_confirmed=e.lac, payload=e.payload)
        )

    async def ReadEntries(
        self, request: pb.ReadEntriesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ReadEntriesResponse]:
        lid = request.ledger_id
        chunk = request.max_bytes_per_response or _DEFAULT_READ_CHUNK
        first, last = request.first_entry_id, request.last_entry_id
        try:
            if request.fence:
                await self.bookie.fence(lid)
            if last < 0:
                last = self.bookie.last_entry(lid)
            ids = list(request.entry_ids)
            while ids:
                found = await self.bookie.read_entry_list(lid, ids, max_bytes=chunk)
                if not found:
                    break
                yield self._entries_response(lid, found)
                ids = ids[ids.index(found[-1].entry_id) + 1 :]
            while first <= last and not request.entry_ids:
                found = await self.bookie.read_entries(lid, first, last, max_bytes=chunk)
                if not found:
                    break
                yield self._entries_response(lid, found)
                first = found[-1].entry_id + 1
        except MagnetarError as exc:
            await abort(context, exc)

    @staticmethod
    def _entries_response(lid: int, found: list[StoredEntry]) -> pb.ReadEntriesResponse:
        return pb.ReadEntriesResponse(
            entries=[pb.Entry(ledger_id=lid, entry_id=e.entry_id, last_add_confirmed=e.lac, payload=e.payload) for e in found]
        )

    @rpc_errors
    async def ReadLac(self, request: pb.ReadLacRequest, context: grpc.aio.ServicerContext) -> pb.ReadLacResponse:
        return pb.ReadLacResponse(last_add_confirmed=self.bookie.read_lac(request.ledger_id))

    @rpc_errors
    async def Fence(self, request: pb.FenceRequest, context: grpc.aio.ServicerContext) -> pb.FenceResponse:
        return pb.FenceResponse(last_add_confirmed=await self.bookie.fence(request.ledger_id))

    @rpc_errors
    async def DeleteLedger(self, request: pb.DeleteLedgerRequest, context: grpc.aio.ServicerContext) -> pb.DeleteLedgerResponse:
        await self.bookie.delete_ledger(request.ledger_id)
        return pb.DeleteLedgerResponse()

    @rpc_errors
    async def ListLedgers(self, request: pb.ListLedgersRequest, context: grpc.aio.ServicerContext) -> pb.ListLedgersResponse:
        return pb.ListLedgersResponse(ledger_ids=self.bookie.list_ledgers())

    @rpc_errors
    async def GetInfo(self, request: pb.GetInfoRequest, context: grpc.aio.ServicerContext) -> pb.BookieInfo:
        return pb.BookieInfo(**self.bookie.info())


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
        server = grpc.aio.server(options=SERVER_OPTIONS, interceptors=[MalformedRequestGuard(), *interceptors])
        pb_grpc.add_BookieServicer_to_server(BookieServicer(self.bookie), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (pb.DESCRIPTOR.services_by_name["Bookie"].full_name, reflection.SERVICE_NAME), server
        )
        # grpc's HealthServicer starts with "" SERVING: say NOT_SERVING until registered.
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        bound = add_port(server, f"{self.config.host}:{self.port}", server_tls(self.config))
        if not bound:
            await self.bookie.close()
            await self.zk.close()
            raise MagnetarError(f"cannot listen on {self.config.host}:{self.port}: is the port in use?")
        await server.start()
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
            REGISTRY.register(BookieCollector(self.bookie))
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
