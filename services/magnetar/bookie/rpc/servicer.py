"""The bookie's gRPC servicer (``magnetar.v1.Bookie``): wire ↔ :class:`~magnetar.bookie.bookie.Bookie`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc

from magnetar.bookie.bookie import Bookie, StoredEntry
from magnetar.bookie.opstats import ServerStats
from magnetar.common.errors import MagnetarError
from magnetar.common.grpcutil import abort, rpc_errors
from magnetar.proto.v1 import bookie_pb2 as pb
from magnetar.proto.v1 import bookie_pb2_grpc as pb_grpc
from magnetar.proto.v1 import common_pb2

_MAX_PENDING_REQUESTS = 256
_DEFAULT_READ_CHUNK = 1024 * 1024


def _error(exc: MagnetarError) -> common_pb2.Error:
    return common_pb2.Error(code=exc.code, message=exc.message, retriable=exc.retriable)


class BookieServicer(pb_grpc.BookieServicer):
    def __init__(self, bookie: Bookie, stats: ServerStats | None = None) -> None:
        self.bookie = bookie
        self.stats = stats if stats is not None else ServerStats()

    async def AddEntries(
        self, request_iterator: AsyncIterator[pb.AddRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.AddResponse]:
        bookie = self.bookie
        adds = self.stats.add_entry_request
        pending: asyncio.Queue[tuple[int, asyncio.Future[None] | None, list[pb.AddResult], float] | None] = (
            asyncio.Queue(_MAX_PENDING_REQUESTS)
        )

        async def receive() -> None:
            try:
                async for req in request_iterator:
                    arrived = time.perf_counter()
                    await bookie.wait_for_cache_room()
                    try:
                        fut, rejected = bookie.add_entries(req.entries, recovery=req.recovery)
                        failed = [pb.AddResult(ledger_id=lid, entry_id=e, error=_error(x)) for lid, e, x in rejected]
                    except MagnetarError as exc:  # the whole request is refused
                        fut = None
                        err = _error(exc)
                        failed = [pb.AddResult(ledger_id=e.ledger_id, entry_id=e.entry_id, error=err) for e in req.entries]
                    await pending.put((req.request_id, fut, failed, arrived))
            finally:
                await pending.put(None)

        receiver = asyncio.create_task(receive())
        try:
            while (item := await pending.get()) is not None:
                request_id, fut, failed, arrived = item
                if fut is not None:
                    try:
                        await fut
                    except MagnetarError as exc:
                        adds.record(False, time.perf_counter() - arrived)
                        await abort(context, exc)
                adds.record(not failed, time.perf_counter() - arrived)
                yield pb.AddResponse(request_id=request_id, failed=failed)
            await receiver  # surfaces a receive error
        finally:
            receiver.cancel()

    @rpc_errors
    async def ReadEntry(self, request: pb.ReadEntryRequest, context: grpc.aio.ServicerContext) -> pb.ReadEntryResponse:
        arrived = time.perf_counter()
        try:
            e = await self.bookie.read_entry(request.ledger_id, request.entry_id, fence=request.fence)
        except MagnetarError:
            self.stats.read_entry_request.record(False, time.perf_counter() - arrived)
            raise
        self.stats.read_entry_request.record(True, time.perf_counter() - arrived)
        return pb.ReadEntryResponse(
            entry=pb.Entry(ledger_id=request.ledger_id, entry_id=e.entry_id, last_add_confirmed=e.lac, payload=e.payload)
        )

    async def ReadEntries(
        self, request: pb.ReadEntriesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ReadEntriesResponse]:
        lid = request.ledger_id
        chunk = request.max_bytes_per_response or _DEFAULT_READ_CHUNK
        first, last = request.first_entry_id, request.last_entry_id
        arrived, ok = time.perf_counter(), False
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
            ok = True
        except MagnetarError as exc:
            await abort(context, exc)
        finally:
            self.stats.read_entry_request.record(ok, time.perf_counter() - arrived)

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
