"""The broker's side of an SDK session: many producers and consumers on one stream, as
Pulsar's clients share one connection per broker, whatever carries it — the ``Session``
RPC (:mod:`magnetar.broker.rpc.session`) or the framed session listener
(:mod:`magnetar.broker.session`): both drive a :class:`BrokerSession` with the
session's ``SessionRequest`` messages and send out what it yields.

Each frame names a client-chosen handle. The first frame of a handle opens it (a
``ProduceRequest.open`` or a ``ConsumeRequest.subscribe``); the handle is then served by
the same code as a ``Produce`` or ``Consume`` stream
(:meth:`~magnetar.broker.rpc.servicer.BrokerServicer.produce_stream` /
``consume_stream``), fed from the handle's inbox, and its responses go out tagged with
the handle. A handle ends as its stream would: with a ``SessionHandleEnd`` (error set
where the stream would end with a status). What every handle answered in one loop turn
leaves in one ``SessionResponse``.

A handle's requests are queued without limit: the SDK bounds them (its producer's
``max_pending_messages``), and stopping the session's reader for one handle would stop
every other handle's requests (a consumer's acks behind a producer held until its
backlog shrinks would never come).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.proto.v1 import broker_pb2 as pb

log = logging.getLogger(__name__)

StreamServer = Callable[[AsyncIterator[Any]], AsyncGenerator[Any, None]]
"""Serves one producer or consumer: its requests in, its responses out."""

_OPENINGS = {"produce": "open", "consume": "subscribe"}
"""The request that opens a handle of each kind."""

RESPONSE_BYTES = 4 * 1024 * 1024
"""A response holding this much starts another: what many consumers' deliveries of one
loop turn add up to stays far below gRPC's message limit (one larger reply goes alone)."""


class HandleInbox:
    """A handle's requests, read by its stream server as a stream's request iterator;
    it ends at the handle's half-close (or cancel)."""

    __slots__ = ("_items", "_waiter", "closed")

    def __init__(self) -> None:
        self._items: deque[Any] | None = None  # made while it holds something (idle handles are many)
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def put(self, item: Any) -> None:
        if not self.closed:
            if self._items is None:
                self._items = deque()
            self._items.append(item)
            self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> HandleInbox:
        return self

    async def __anext__(self) -> Any:
        while not self._items:
            if self.closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._items.popleft()
        if not self._items:
            self._items = None
        return item


class SessionHandle:
    __slots__ = ("id", "kind", "inbox", "task")

    def __init__(self, handle_id: int, kind: str) -> None:
        self.id = handle_id
        self.kind = kind
        self.inbox = HandleInbox()
        self.task: asyncio.Task[None] | None = None


class BrokerSession:
    """One client session: its handles and the replies waiting to go out."""

    def __init__(self, produce: StreamServer, consume: StreamServer) -> None:
        self._servers = {"produce": produce, "consume": consume}
        self._handles: dict[int, SessionHandle] = {}
        self._out: pb.SessionResponse | None = None  # the replies gathered since the last one left
        self._out_bytes = 0
        self._full: list[pb.SessionResponse] = []  # responses that reached RESPONSE_BYTES, in order
        self._wake: asyncio.Future[None] | None = None
        self._reading = True

    async def run(self, requests: AsyncIterator[pb.SessionRequest]) -> AsyncGenerator[pb.SessionResponse, None]:
        """The session's responses, until the client half-closed it and every handle
        ended. Going away (the call cancelled), it cancels every handle."""
        reader = asyncio.create_task(self._read(requests), name="session-reader")
        try:
            while True:
                if self._full:
                    yield self._full.pop(0)
                    continue
                if self._out is not None:
                    out, self._out = self._out, None
                    yield out
                    continue
                if not self._reading and not self._handles:
                    break
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
        finally:
            reader.cancel()
            handles = list(self._handles.values())
            self._handles.clear()
            tasks = [h.task for h in handles if h.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(reader, *tasks, return_exceptions=True)

    async def _read(self, requests: AsyncIterator[pb.SessionRequest]) -> None:
        try:
            async for request in requests:
                for frame in request.frames:
                    self.dispatch(frame)
        finally:
            # The client wrote its last request: each handle is half-closed.
            self._reading = False
            for handle in self._handles.values():
                handle.inbox.close()
            self._wakeup()

    def dispatch(self, frame: pb.SessionFrame) -> None:
        """Hand one frame to its handle (opening it on its first request)."""
        kind = frame.WhichOneof("kind")
        handle = self._handles.get(frame.handle)
        if kind == "cancel":
            if handle is not None:
                del self._handles[frame.handle]
                handle.inbox.close()
                if handle.task is not None:
                    handle.task.cancel()
            return
        if kind == "half_close":
            if handle is not None:
                handle.inbox.close()
            return
        if kind not in _OPENINGS:  # an empty frame: nothing asked
            return
        request = getattr(frame, kind)
        if handle is None:
            opening = _OPENINGS[kind]
            if request.WhichOneof("kind") != opening:
                # Also a request the client sent before the handle's end reached it: the
                # answer is an end it ignores.
                self._end(frame.handle, InvalidArgument(
                    f"session handle {frame.handle} is not open: its first request must be {kind}.{opening}"))
                return
            handle = SessionHandle(frame.handle, kind)
            self._handles[frame.handle] = handle
            handle.inbox.put(request)
            handle.task = asyncio.create_task(self._serve(handle), name=f"session-{kind}:{frame.handle}")
        elif handle.kind != kind:
            del self._handles[frame.handle]
            handle.inbox.close()
            if handle.task is not None:
                handle.task.cancel()
            self._end(frame.handle, InvalidArgument(f"session handle {frame.handle} is a {handle.kind} handle, not a {kind} one"))
        else:
            handle.inbox.put(request)

    async def _serve(self, handle: SessionHandle) -> None:
        error: MagnetarError | None = None
        responses = self._servers[handle.kind](handle.inbox)
        kind = handle.kind
        try:
            async with contextlib.aclosing(responses):
                async for resp in responses:
                    # Built in place in the outgoing message: each entry is copied once.
                    getattr(self._reply(handle.id), kind).CopyFrom(resp)
                    self._out_bytes += resp.ByteSize()
        except MagnetarError as exc:
            error = exc
        except Exception as exc:
            log.exception("session %s handle %d failed", kind, handle.id)
            error = MagnetarError(f"internal error in a session's {kind} handle: {type(exc).__name__}: {exc}")
        if self._handles.get(handle.id) is handle:
            del self._handles[handle.id]
        self._end(handle.id, error)

    def _end(self, handle_id: int, error: MagnetarError | None) -> None:
        end = self._reply(handle_id).end
        end.SetInParent()
        if error is not None:
            end.error.code, end.error.message, end.error.retriable = error.code, error.message, error.retriable

    def _reply(self, handle_id: int) -> pb.SessionReply:
        """A new reply of ``handle_id`` in the next response, for the caller to fill."""
        if self._out is not None and self._out_bytes >= RESPONSE_BYTES:
            self._full.append(self._out)
            self._out = None
        if self._out is None:
            self._out = pb.SessionResponse()
            self._out_bytes = 0
            self._wakeup()
        return self._out.replies.add(handle=handle_id)

    def _wakeup(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)
