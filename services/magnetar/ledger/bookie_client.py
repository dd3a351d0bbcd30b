"""A client for one bookie's gRPC service, with a pipelined add stream.

Adds from any number of coroutines share one ``AddEntries`` stream: each request gets
an id, responses arrive in order and complete the matching futures. A broken stream
fails every pending add with the translated error; the next add opens a new stream.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from typing import NamedTuple

import grpc

from magnetar.common.errors import (
    AuthenticationError,
    AuthorizationError,
    MagnetarError,
    NotConnected,
    from_code,
)
from magnetar.common.grpcauth import with_token
from magnetar.common.grpcutil import (
    CHANNEL_OPTIONS,
    ERROR_CODE_KEY,
    cancels_this_task,
    from_rpc_error,
)
from magnetar.common.tls import ClientTls, aio_channel
from magnetar.proto.v1 import bookie_pb2 as pb
from magnetar.proto.v1 import bookie_pb2_grpc as pb_grpc


class Entry(NamedTuple):
    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    payload: bytes


AddFailure = tuple[int, int, MagnetarError]


class BookieClient:
    def __init__(
        self, address: str, timeout_s: float = 10.0, *, tls: ClientTls | None = None, token: str | None = None
    ) -> None:
        """Args: tls: call the bookie with TLS (None: plain text); token: presented with
        every call (bookies with authentication on)."""
        self.address = address
        self._target = f"bookie {address}"
        self.timeout_s = timeout_s
        self._channel = aio_channel(address, tls, CHANNEL_OPTIONS)
        self._stub = with_token(pb_grpc.BookieStub(self._channel), (lambda: token) if token else None)
        self._ids = itertools.count(1)
        self._call: grpc.aio.StreamStreamCall | None = None
        self._pending: dict[int, asyncio.Future[list[AddFailure]]] = {}
        self._readers: set[asyncio.Task[None]] = set()
        """Response readers: the current stream's, and a broken one's still asking why."""
        self._write_lock = asyncio.Lock()

    async def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
        readers = list(self._readers)
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        self._fail_pending(NotConnected(f"client for bookie {self.address} closed"))
        await self._channel.close()

    async def __aenter__(self) -> BookieClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- adds ---------------------------------------------------------------
    async def add_entries(self, entries: Sequence[Entry]) -> list[AddFailure]:
        """Add a batch; returns the entries the bookie rejected (empty: all durable)."""
        return await (await self.send_add(entries))

    async def send_add(self, entries: Sequence[Entry], recovery: bool = False) -> asyncio.Future[list[AddFailure]]:
        """Send a batch on the shared stream without waiting for its answer; the returned
        future completes with the rejected entries once the bookie answered.
        ``recovery`` adds are accepted on fenced ledgers (ledger recovery only)."""
        request = pb.AddRequest(
            recovery=recovery,
            entries=[
                pb.AddEntry(ledger_id=e[0], entry_id=e[1], last_add_confirmed=e[2], payload=e[3]) for e in entries
            ],
        )
        return await self.send_add_request(request)

    async def send_add_request(self, request: pb.AddRequest) -> asyncio.Future[list[AddFailure]]:
        """Like :meth:`send_add` for a prebuilt request (its request_id is replaced)."""
        fut: asyncio.Future[list[AddFailure]] = asyncio.get_running_loop().create_future()
        async with self._write_lock:
            call = self._ensure_stream()
            request.request_id = next(self._ids)
            self._pending[request.request_id] = fut
            try:
                await call.write(request)
            except (grpc.RpcError, asyncio.InvalidStateError, asyncio.CancelledError) as exc:
                if isinstance(exc, asyncio.CancelledError) and cancels_this_task():
                    raise  # else the call was cancelled under the write (close()): a lost stream
                self._pending.pop(request.request_id, None)
                if fut.done():  # already failed by the response reader
                    fut.exception()
                fut.cancel()
                refusal = None if isinstance(exc, asyncio.CancelledError) else await self._refusal(exc)
                if refusal is not None:  # the bookie ended the stream on purpose (no token)
                    raise refusal from exc
                why = exc.details() if isinstance(exc, grpc.RpcError) else "stream closed"  # type: ignore[attr-defined]
                raise NotConnected(f"the add stream to {self._target} broke ({why}): is the bookie up?") from exc
        return fut

    async def _refusal(self, exc: BaseException) -> MagnetarError | None:
        """The bookie's refusal (a missing or rejected token) behind a failed add write,
        or None for a lost connection. A write racing with the bookie's refusal of the
        stream loses the refusal: grpc ends the call with a bare INTERNAL of its own. A
        quick unary call (which the bookie checks the same way) then tells which."""
        if isinstance(exc, grpc.RpcError):
            if any(key == ERROR_CODE_KEY for key, _ in exc.trailing_metadata() or ()):
                return from_rpc_error(exc, self._target)
            if exc.code() != grpc.StatusCode.INTERNAL:
                return None
        try:
            await self._stub.GetInfo(pb.GetInfoRequest(), timeout=1.0)
        except grpc.RpcError as probe:
            error = from_rpc_error(probe, self._target)
            if isinstance(error, AuthenticationError | AuthorizationError):
                return error
        return None

    def _ensure_stream(self) -> grpc.aio.StreamStreamCall:
        if self._call is None or self._call.done():
            self._call = self._stub.AddEntries()
            reader = asyncio.create_task(self._read_responses(self._call))
            self._readers.add(reader)
            reader.add_done_callback(self._readers.discard)
        return self._call

    async def _read_responses(self, call: grpc.aio.StreamStreamCall) -> None:
        try:
            while True:
                resp = await call.read()
                if resp is grpc.aio.EOF:
                    self._fail_pending(NotConnected(f"bookie {self.address} closed the add stream"))
                    return
                fut = self._pending.pop(resp.request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(
                        [(r.ledger_id, r.entry_id, from_code(r.error.code, r.error.message)) for r in resp.failed]
                    )
        except grpc.RpcError as exc:
            # The adds sent on this stream, taken now: a new stream may open (and take
            # adds of its own) while the refusal is being asked for.
            pending, self._pending = self._pending, {}
            # Adds written before the bookie's refusal arrived end with the same bare
            # INTERNAL as a refused write (see _refusal): ask, so they fail with it.
            error: MagnetarError = NotConnected(f"client for bookie {self.address} closed")
            try:
                error = await self._refusal(exc) or from_rpc_error(exc, self._target)
            finally:  # closed while asking: its adds fail all the same
                for fut in pending.values():
                    if not fut.done():
                        fut.set_exception(error)
        except asyncio.CancelledError:
            raise
        finally:
            if self._call is call:
                self._call = None

    def _fail_pending(self, exc: MagnetarError) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    # -- unary calls --------------------------------------------------------
    async def _unary(self, method: str, request: object) -> object:
        try:
            return await getattr(self._stub, method)(request, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self._target) from exc

    async def read_entry(self, ledger_id: int, entry_id: int, fence: bool = False) -> Entry:
        resp = await self._unary("ReadEntry", pb.ReadEntryRequest(ledger_id=ledger_id, entry_id=entry_id, fence=fence))
        e = resp.entry  # type: ignore[attr-defined]
        return Entry(e.ledger_id, e.entry_id, e.last_add_confirmed, e.payload)

    async def read_entries(
        self, ledger_id: int, first: int = 0, last: int = -1, fence: bool = False
    ) -> AsyncIterator[Entry]:
        """Stored entries first..last (last -1: to the end), in order."""
        call = self._stub.ReadEntries(
            pb.ReadEntriesRequest(ledger_id=ledger_id, first_entry_id=first, last_entry_id=last, fence=fence),
            timeout=self.timeout_s * 6,
        )
        try:
            async for resp in call:
                for e in resp.entries:
                    yield Entry(e.ledger_id, e.entry_id, e.last_add_confirmed, e.payload)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self._target) from exc

    async def read_entry_list(self, ledger_id: int, entry_ids: Sequence[int]) -> list[Entry]:
        """The entries among ``entry_ids`` this bookie stores, in that order."""
        call = self._stub.ReadEntries(
            pb.ReadEntriesRequest(ledger_id=ledger_id, entry_ids=list(entry_ids)), timeout=self.timeout_s * 6
        )
        out: list[Entry] = []
        try:
            async for resp in call:
                out.extend(Entry(e.ledger_id, e.entry_id, e.last_add_confirmed, e.payload) for e in resp.entries)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self._target) from exc
        return out

    async def read_lac(self, ledger_id: int) -> int:
        resp = await self._unary("ReadLac", pb.ReadLacRequest(ledger_id=ledger_id))
        return int(resp.last_add_confirmed)  # type: ignore[attr-defined]

    async def fence(self, ledger_id: int) -> int:
        resp = await self._unary("Fence", pb.FenceRequest(ledger_id=ledger_id))
        return int(resp.last_add_confirmed)  # type: ignore[attr-defined]

    async def delete_ledger(self, ledger_id: int) -> None:
        await self._unary("DeleteLedger", pb.DeleteLedgerRequest(ledger_id=ledger_id))

    async def list_ledgers(self) -> list[int]:
        resp = await self._unary("ListLedgers", pb.ListLedgersRequest())
        return list(resp.ledger_ids)  # type: ignore[attr-defined]

    async def info(self) -> pb.BookieInfo:
        return await self._unary("GetInfo", pb.GetInfoRequest())  # type: ignore[return-value]


class BookiePool:
    """One shared :class:`BookieClient` per bookie address."""

    def __init__(self, timeout_s: float = 10.0, *, tls: ClientTls | None = None, token: str | None = None) -> None:
        self.timeout_s = timeout_s
        self.tls = tls
        self.token = token
        self._clients: dict[str, BookieClient] = {}

    def get(self, address: str) -> BookieClient:
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = BookieClient(address, self.timeout_s, tls=self.tls, token=self.token)
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
