"""The framed session listener: accepts the SDK's sessions on ``session_port`` (TLS when
the broker's gRPC port has it) and serves each with a
:class:`~magnetar.broker.session.handles.BrokerSession`, as the ``Session`` RPC does.

The wire (proto/magnetar/v1/broker.proto, "The framed session"): frames of a 4-byte
big-endian length and a message (:mod:`magnetar.common.frames`). The client's first
frame, a ``FramedSessionConnect``, carries what the gRPC door reads from a call's
metadata (the ``authorization`` value, the original principal); it is checked by the
gRPC door's own authentication check, and the role it gives is the one the session's
producers and consumers are authorized as. Then each ``SessionRequest`` frame is handed
to the session and each ``SessionResponse`` it yields goes out as a frame. A closed
connection is a cancelled session: its producers and consumers are detached.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from magnetar.broker.session.handles import BrokerSession, StreamServer
from magnetar.common.authentication import Credentials
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.frames import FrameDecoder, encode, keep_alive
from magnetar.common.grpcauth import CALLER_ROLE
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig
    from magnetar.common.grpcauth import AuthenticationInterceptor

log = logging.getLogger(__name__)

READ_BYTES = 256 * 1024
"""The most one socket read takes: every frame it completes is served at once."""

def session_address(config: BrokerConfig) -> str:
    """The ``host:port`` of this broker's framed session listener that others reach
    (``advertised_address``'s host, else ``host``); "" when it is off."""
    if not config.session_port:
        return ""
    host = config.advertised_address.rsplit(":", 1)[0] if config.advertised_address else config.host
    return f"{host}:{config.session_port}"


class FramedSessionListener:
    """The SDK's sessions over framed TCP on ``config.host:config.session_port``.

    Args:
        produce, consume: serve one producer or consumer (the servicer's
            ``produce_stream`` / ``consume_stream``, as the ``Session`` RPC uses).
        authentication: the gRPC door's authentication check (None: authentication off).
        tls: a server context (common/tls.py's ``server_ssl_context``), or None.
    """

    def __init__(
        self, produce: StreamServer, consume: StreamServer, config: BrokerConfig,
        authentication: AuthenticationInterceptor | None = None, *, tls: ssl.SSLContext | None = None,
    ) -> None:  # fmt: skip
        self._produce = produce
        self._consume = consume
        self.host = config.host
        self.port = config.session_port
        self._ssl = tls
        self._authentication = authentication
        self.handshake_timeout_s = config.protocol_keepalive_s
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen.

        Raises:
            MagnetarError: the port cannot be bound.
        """
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self._ssl)
        except OSError as exc:
            raise MagnetarError(f"cannot listen for framed sessions on {self.host}:{self.port}: {exc}") from exc
        log.info("serving framed sessions on %s:%d%s", self.host, self.port, " (TLS)" if self._ssl else "")

    @property
    def connections(self) -> int:
        return len(self._connections)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        keep_alive(writer.get_extra_info("socket"))
        try:
            await self._session(FrameReader(reader), writer, peer)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError) as exc:
            log.debug("framed session %s: %r", peer, exc)
        except Exception:
            log.exception("framed session %s failed", peer)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _session(self, frames: FrameReader, writer: asyncio.StreamWriter, peer: object) -> None:
        try:
            first = await asyncio.wait_for(frames.next(), self.handshake_timeout_s)
        except TimeoutError:
            log.info("framed session %s: no FramedSessionConnect within %g s; closed", peer, self.handshake_timeout_s)
            return
        if first is None:
            return
        try:
            connect = pb.FramedSessionConnect.FromString(first)
            role = await self._role(connect, writer, peer)
        except (MagnetarError, DecodeError) as exc:
            error = exc if isinstance(exc, MagnetarError) else InvalidArgument("the first frame is not a FramedSessionConnect")
            refused = pb.FramedSessionConnected()
            refused.error.code, refused.error.message, refused.error.retriable = error.code, error.message, error.retriable
            writer.write(encode(refused.SerializeToString()))
            await writer.drain()
            return
        # The session's handle tasks are made in this task's context: they are served as this role.
        CALLER_ROLE.set(role)
        writer.write(encode(pb.FramedSessionConnected().SerializeToString()))
        pump = asyncio.create_task(self._pump(BrokerSession(self._produce, self._consume), frames, writer, peer),
                                   name=f"framed-session:{peer}")
        try:
            await pump
        except asyncio.CancelledError:
            if not pump.cancelled():  # this connection is being stopped
                pump.cancel()
                await asyncio.gather(pump, return_exceptions=True)
                raise

    async def _pump(self, session: BrokerSession, frames: FrameReader, writer: asyncio.StreamWriter, peer: object) -> None:
        pump = asyncio.current_task()
        assert pump is not None

        async def requests() -> AsyncIterator[pb.SessionRequest]:
            try:
                while (frame := await frames.next()) is not None:
                    yield pb.SessionRequest.FromString(frame)
            except (ConnectionError, ssl.SSLError, InvalidArgument, DecodeError) as exc:
                log.info("framed session %s: %s; closed", peer, exc)
            # The client went away (or spoke nonsense): its handles go with it, as a
            # cancelled Session call's do.
            pump.cancel()

        async with contextlib.aclosing(session.run(requests())) as responses:
            async for resp in responses:
                writer.write(encode(resp.SerializeToString()))
                await writer.drain()

    async def _role(self, connect: pb.FramedSessionConnect, writer: asyncio.StreamWriter, peer: object) -> str | None:
        if self._authentication is None:
            return None
        ssl_object = writer.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        credentials = Credentials(connect.authorization or None, certificate)
        return await self._authentication.caller_role(
            f"framed session from {peer}", credentials, connect.original_principal or None
        )

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, end every session (their producers and consumers detach) and
        wait, at most ``timeout_s``, for them to end."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), timeout_s)
            self._server = None


class FrameReader:
    """The frames of a stream, cut by a :class:`~magnetar.common.frames.FrameDecoder`
    from reads of up to :data:`READ_BYTES`."""

    __slots__ = ("_reader", "_decoder", "_frames")

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._decoder = FrameDecoder()
        self._frames: deque[memoryview] = deque()

    async def next(self) -> memoryview | None:
        """The next frame's body; None at the end of the stream.

        Raises:
            InvalidArgument: a frame over the limit.
        """
        frames = self._frames
        while not frames:
            data = await self._reader.read(READ_BYTES)
            if not data:
                return None
            frames.extend(self._decoder.feed(data))
        return frames.popleft()
