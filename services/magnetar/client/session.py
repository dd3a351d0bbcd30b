"""A client's session with one broker: every producer, consumer and reader the client
has on that broker shares one stream, as Pulsar's clients share one connection per
broker. The stream is the broker's framed session listener when it advertises one
(:mod:`.framed`: the session's messages over plain TCP or TLS), else the ``Session`` RPC
(:class:`GrpcSessionTransport`).

Each of them holds a :class:`SessionStream`, a handle with the interface of a
:class:`~magnetar.client.connection.BrokerStream` (``open`` / ``write`` / ``read`` /
``done_writing`` / ``cancel``), so the producer's and consumer's state machines do not
know which they have. What the handles write in one loop turn leaves as one
``SessionRequest``. When the session breaks, every handle's ``read`` raises its error
and each reconnects as after a broken stream; the pool opens a new session on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import grpc

from magnetar.common.errors import MagnetarError, NotConnected, from_code
from magnetar.common.grpcutil import stream_rpc_error
from magnetar.proto.v1 import broker_pb2 as pb

from .streamopen import open_stream

log = logging.getLogger(__name__)

REQUEST_BYTES = 4 * 1024 * 1024
"""A request holding this much starts another: what many producers' sends of one loop
turn add up to stays far below gRPC's message limit (one larger send goes alone)."""

_ENDED = object()
"""A handle's read queue item: the handle ended normally (a stream's end, OK)."""


class SessionTransport(Protocol):
    """What carries a session's messages: the ``Session`` call, or a framed connection."""

    unsupported: bool
    """Set before ``read`` raises when the broker cannot be reached this way (the pool
    then uses the next way: the ``Session`` RPC, then a stream per handle)."""

    async def write(self, request: pb.SessionRequest) -> None: ...

    async def read(self) -> pb.SessionResponse | None:
        """The next response; None at the end. Raises: the typed error it broke with."""
        ...

    def cancel(self) -> None: ...


class GrpcSessionTransport:
    """The ``Session`` RPC as a :class:`SessionTransport`."""

    __slots__ = ("_call", "target", "unsupported", "_answered")

    def __init__(self, call: grpc.aio.StreamStreamCall, target: str) -> None:
        self._call = call
        self.target = target
        self.unsupported = False  # the broker answered the session with UNIMPLEMENTED
        self._answered = False

    async def write(self, request: pb.SessionRequest) -> None:
        await self._call.write(request)

    async def read(self) -> pb.SessionResponse | None:
        try:
            resp = await self._call.read()
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED and not self._answered:
                # A broker older than sessions: the pool opens a stream per handle there
                # from now on, and the handles reconnect to one (NotConnected retries).
                self.unsupported = True
                raise NotConnected(f"{self.target} has no Session RPC; its producers and consumers use a stream each") from exc
            raise stream_rpc_error(exc, self.target) from exc
        self._answered = True
        return None if resp is grpc.aio.EOF else resp

    def cancel(self) -> None:
        self._call.cancel()


class ClientSession:
    """One session stream to a broker and the handles open on it.

    Args:
        transport: the opened ``Session`` call (a :class:`GrpcSessionTransport`) or framed connection.
        target: names the broker in errors.
        on_broken: called once when the stream breaks (the pool then forgets it).
    """

    def __init__(self, transport: SessionTransport, target: str, on_broken: Callable[[ClientSession], None]) -> None:
        self._transport = transport
        self.target = target
        self._on_broken = on_broken
        self._handles: dict[int, SessionStream] = {}
        self._ids = itertools.count(1)
        self._request: pb.SessionRequest | None = None  # the frames gathered since the last write
        self._request_bytes = 0
        self._full: list[pb.SessionRequest] = []  # requests that reached REQUEST_BYTES, in order
        self._written: asyncio.Future[None] | None = None  # done when _request is written
        self._wake: asyncio.Future[None] | None = None
        self.broken: MagnetarError | None = None
        self._reader = asyncio.create_task(self._read_loop(), name=f"session-reader:{target}")
        self._writer = asyncio.create_task(self._write_loop(), name=f"session-writer:{target}")

    @property
    def unsupported(self) -> bool:
        """The broker cannot be reached this way (see :attr:`SessionTransport.unsupported`)."""
        return self._transport.unsupported

    @property
    def transport(self) -> SessionTransport:
        return self._transport

    @property
    def handles(self) -> int:
        """How many handles are open on it."""
        return len(self._handles)

    def open_handle(self, kind: str, target: str) -> SessionStream:
        """A new handle: ``kind`` "produce" or "consume"; ``target`` names it in errors.

        Raises: the error the session broke with.
        """
        if self.broken is not None:
            raise self.broken
        handle = SessionStream(self, next(self._ids), kind, target)
        self._handles[handle.id] = handle
        return handle

    # -- writing ------------------------------------------------------------------------
    def frame(self, handle_id: int) -> pb.SessionFrame:
        """A new frame of ``handle_id`` in the next request, for the caller to fill
        (built in place: an entry is copied once), then :meth:`send`.

        Raises: the error the session broke with.
        """
        if self.broken is not None:
            raise self.broken
        if self._request is not None and self._request_bytes >= REQUEST_BYTES:
            self._full.append(self._request)
            self._request = None
        if self._request is None:
            self._request = pb.SessionRequest()
            self._request_bytes = 0
        return self._request.frames.add(handle=handle_id)

    def added(self, size: int) -> None:
        """The last frame made carries ``size`` bytes."""
        self._request_bytes += size

    async def send(self) -> None:
        """Wait until the stream message carrying the frames made so far was written.

        Raises: the error the session broke with.
        """
        if self.broken is not None:
            raise self.broken
        await asyncio.shield(self._to_write())  # shared by the frames of one stream message: never cancelled by one waiter

    def post(self) -> None:
        """Send the frames made so far without waiting (a cancel)."""
        if self.broken is None:
            self._to_write()

    def _to_write(self) -> asyncio.Future[None]:
        """The future of the request being gathered (made now, and the writer woken, for
        its first frame)."""
        written = self._written
        if written is None:
            if self._request is None:  # nothing gathered: nothing to wait for
                written = asyncio.get_running_loop().create_future()
                written.set_result(None)
                return written
            written = self._written = asyncio.get_running_loop().create_future()
            written.add_done_callback(_taken)  # a cancel's: nobody waits for it
            wake = self._wake
            if wake is not None and not wake.done():
                wake.set_result(None)
        return written

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self.broken is None:
            if self._full:  # a turn that filled several requests: the full ones first
                if not await self._write(self._full.pop(0), None):
                    return
                continue
            if self._request is None:
                self._wake = loop.create_future()
                await self._wake
                continue
            request, self._request = self._request, None
            written, self._written = self._written, None
            if not await self._write(request, written):
                return

    async def _write(self, request: pb.SessionRequest, written: asyncio.Future[None] | None) -> bool:
        """Write ``request``, then settle ``written``; False: the session broke."""
        try:
            await self._transport.write(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The reader reads the status the call ended with (and sees an older
            # broker's UNIMPLEMENTED); a write on a live call that failed breaks it here.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._reader), 1.0)
            self._break(NotConnected(f"the session with {self.target} broke: {exc!r}"))
            assert self.broken is not None
            if written is not None and not written.done():
                written.set_exception(self.broken)
                written.add_done_callback(_taken)
            return False
        if written is not None and not written.done():
            written.set_result(None)
        return True

    # -- reading ------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        handles = self._handles
        try:
            while True:
                resp = await self._transport.read()
                if resp is None:
                    self._break(NotConnected(f"{self.target} ended the session"))
                    return
                for reply in resp.replies:
                    handle = handles.get(reply.handle)
                    if handle is None:  # cancelled here already
                        continue
                    kind = reply.WhichOneof("kind")
                    if kind == "end":
                        del handles[reply.handle]
                        error = reply.end.error if reply.end.HasField("error") else None
                        handle.ended(from_code(error.code, error.message) if error is not None else None)
                    elif kind is not None:
                        handle.deliver(getattr(reply, kind))
        except MagnetarError as exc:
            self._break(exc)
        except asyncio.CancelledError:
            self._break(NotConnected(f"the session with {self.target} was closed"))
            raise

    def _break(self, error: MagnetarError) -> None:
        if self.broken is not None:
            return
        self.broken = error
        log.debug("session with %s broke: %s", self.target, error)
        self._transport.cancel()
        written, self._written = self._written, None
        if written is not None and not written.done():
            written.set_exception(error)
            written.add_done_callback(_taken)
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)
        handles = list(self._handles.values())
        self._handles.clear()
        for handle in handles:
            handle.ended(error)
        self._on_broken(self)

    def forget(self, handle: SessionStream) -> None:
        """``handle`` was cancelled: nothing more is read for it."""
        if self._handles.get(handle.id) is handle:
            del self._handles[handle.id]

    async def close(self) -> None:
        """End the stream and every handle on it."""
        self._break(NotConnected(f"the session with {self.target} was closed"))
        for task in (self._reader, self._writer):
            task.cancel()
        await asyncio.gather(self._reader, self._writer, return_exceptions=True)


class SessionStream:
    """One producer's or consumer's handle on a session, used as a stream: the
    broker serves it as a ``Produce`` or ``Consume`` stream."""

    __slots__ = ("session", "id", "kind", "target", "_inbox", "_waiter", "_done")

    def __init__(self, session: ClientSession, handle_id: int, kind: str, target: str) -> None:
        self.session = session
        self.id = handle_id
        self.kind = kind
        self.target = target
        self._inbox: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._done = False  # ended or cancelled: nothing more is written

    # -- from the session ---------------------------------------------------------------
    def deliver(self, response: Any) -> None:
        self._inbox.append(response)
        self._wakeup()

    def ended(self, error: MagnetarError | None) -> None:
        if self._done:
            return
        self._done = True
        self._inbox.append(_ENDED if error is None else error)
        self._wakeup()

    def _wakeup(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- as a BrokerStream --------------------------------------------------------------
    async def open(self, first: Any, timeout_s: float | None) -> Any:
        """Write the opening request and return the broker's first answer (see
        :func:`~magnetar.client.streamopen.open_stream`)."""
        return await open_stream(self, first, timeout_s)

    async def write(self, request: Any) -> None:
        """Raises: NotConnected once the handle ended; the error the session broke with."""
        if self._done:
            raise self.session.broken or NotConnected(f"the stream to {self.target} has ended")
        session = self.session
        getattr(session.frame(self.id), self.kind).CopyFrom(request)
        session.added(request.ByteSize())
        await session.send()

    async def read(self) -> Any | None:
        """The next message; None at the end of the handle.

        Raises: the typed error the handle ended with.
        """
        inbox = self._inbox
        while not inbox:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = inbox[0]
        if item is _ENDED:
            return None  # left in place: every later read ends too
        if isinstance(item, MagnetarError):
            raise item
        return inbox.popleft()

    async def done_writing(self) -> None:
        """Half-close: no more requests (the broker then ends the handle).

        Raises: NotConnected: the handle or the session is gone.
        """
        if self._done:
            raise NotConnected(f"the stream to {self.target} is gone")
        self.session.frame(self.id).half_close.SetInParent()
        await self.session.send()

    def cancel(self) -> None:
        """Drop the handle: the broker detaches its producer or consumer."""
        if self._done:
            return
        self.session.forget(self)
        self.ended(NotConnected(f"the stream to {self.target} was cancelled"))
        if self.session.broken is None:
            self.session.frame(self.id).cancel.SetInParent()
            self.session.post()


def _taken(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
