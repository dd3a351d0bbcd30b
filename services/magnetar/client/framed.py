"""The SDK's session over framed TCP: a broker's ``session_port`` (broker/session/), where
the ``Session`` RPC's messages travel as frames of a 4-byte length and the message,
without gRPC's cost per message.

A :class:`FramedSessionTransport` is what a :class:`~magnetar.client.session.ClientSession`
writes its ``SessionRequest`` messages to and reads ``SessionResponse`` messages from,
as from the ``Session`` call. Each request (what the handles wrote in one loop turn)
leaves as one frame; what a socket read brings is cut into frames and parsed without
copying (:class:`~magnetar.common.frames.FrameDecoder`).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import deque
from typing import Any

from magnetar.common.errors import MagnetarError, NotConnected, from_code
from magnetar.common.frames import HEADER, FrameDecoder, encode, keep_alive
from magnetar.proto.v1 import broker_pb2 as pb

log = logging.getLogger(__name__)


class FramedSessionTransport(asyncio.Protocol):
    """One framed session connection to ``address`` (``host:port``).

    Args:
        address: the broker's advertised ``session_address``.
        target: names the broker in errors.
        tls: a client SSL context (None: plain TCP) and ``server_hostname`` the name its
            certificate is checked for (None: the host).
        authorization: the ``authorization`` value a gRPC call would carry ("": none).
        original_principal: the role a proxy role acts for ("": none).
        timeout_s: how long connecting and the broker's answer to the connect may take.
    """

    unsupported = False
    """Set when the listener could not be reached (or its TLS handshake failed): the
    client's pool uses the ``Session`` RPC with that broker for a while."""

    def __init__(
        self, address: str, target: str, *, tls: ssl.SSLContext | None = None, server_hostname: str | None = None,
        authorization: str = "", original_principal: str = "", timeout_s: float = 10.0,
    ) -> None:  # fmt: skip
        self.address = address
        self.target = target
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder()
        self._accepted = False  # the broker's FramedSessionConnected came, without an error
        self._responses: deque[pb.SessionResponse] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None  # set while the socket's buffer is full
        self._error: MagnetarError | None = None
        self._eof = False
        host, _, port = address.rpartition(":")
        connect = pb.FramedSessionConnect(authorization=authorization, original_principal=original_principal)
        self._connected = asyncio.ensure_future(self._connect(host, int(port), tls, server_hostname, connect, timeout_s))
        self._connected.add_done_callback(_taken)

    async def _connect(self, host: str, port: int, tls: ssl.SSLContext | None, server_hostname: str | None,
                       connect: pb.FramedSessionConnect, timeout_s: float) -> None:  # fmt: skip
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(
                loop.create_connection(lambda: self, host, port, ssl=tls, server_hostname=(server_hostname or host) if tls else None),
                timeout_s,
            )
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            self.unsupported = True
            self._fail(NotConnected(f"cannot reach the framed session of {self.target} at {self.address}: {exc!r}"))
            raise self._error from exc  # type: ignore[misc]
        assert self._transport is not None
        keep_alive(self._transport.get_extra_info("socket"))
        self._transport.write(encode(connect.SerializeToString()))

    @property
    def ssl_object(self) -> ssl.SSLObject | None:
        """The connection's TLS state (None: plain TCP, or not connected yet)."""
        return self._transport.get_extra_info("ssl_object") if self._transport is not None else None

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport subclasses
        if self._error is not None:
            # Closed (or failed) while connecting: Python 3.11's wait_for drops a connection
            # that completes as it is cancelled, so nothing else would close this one.
            transport.close()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except MagnetarError as exc:
            self._fail(NotConnected(f"{self.target} sent a malformed frame: {exc.message}"))
            return
        try:
            for frame in frames:
                if self._accepted:
                    self._responses.append(pb.SessionResponse.FromString(frame))
                    continue
                answer = pb.FramedSessionConnected.FromString(frame)
                if answer.HasField("error"):
                    self._fail(from_code(answer.error.code, answer.error.message))
                    return
                self._accepted = True
        except Exception as exc:  # a message that does not parse: the connection is unusable
            self._fail(NotConnected(f"{self.target} sent a malformed session message: {exc!r}"))
            return
        self._wake()

    def eof_received(self) -> bool | None:
        self._eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        if exc is not None and self._error is None:
            self._error = NotConnected(f"the session with {self.target} broke: {exc!r}")
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)
        self._wake()

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # -- as the Session call ----------------------------------------------------------------
    async def write(self, request: pb.SessionRequest) -> None:
        """Send ``request`` as one frame (waiting while the socket's buffer is full).

        Raises: NotConnected (or the broker's refusal): the connection is gone.
        """
        if not self._connected.done():
            await asyncio.shield(self._connected)
        transport = self._transport
        if self._error is not None or transport is None or transport.is_closing():
            raise self._error or NotConnected(f"the session with {self.target} is closed")
        body = request.SerializeToString()
        transport.writelines((HEADER.pack(len(body)), body))
        if self._drained is not None:
            await self._drained

    async def read(self) -> pb.SessionResponse | None:
        """The next response; None when the broker closed the connection.

        Raises: NotConnected or the broker's refusal of the session (typed).
        """
        responses = self._responses
        while not responses:
            if self._error is not None:
                raise self._error
            if self._eof:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return responses.popleft()

    def cancel(self) -> None:
        """Close the connection (the broker detaches every handle of the session)."""
        if not self._connected.done():
            self._connected.cancel()
        if self._error is None:
            self._error = NotConnected(f"the session with {self.target} was closed")
        if self._transport is not None:
            self._transport.close()
        self._wake()

    def _fail(self, error: MagnetarError) -> None:
        if self._error is None:
            self._error = error
        if self._transport is not None:
            self._transport.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _taken(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()

