"""One Pulsar protocol connection: its handshake, keepalive and requests.

The first command must be CONNECT (anything else: ERROR, then the connection closes);
CONNECTED answers it with the lower of the two protocol versions and this broker's
largest message. Served: PING/PONG, PARTITIONED_METADATA and LOOKUP here;
GET_TOPICS_OF_NAMESPACE in :mod:`.topic_list`; GET_SCHEMA and GET_OR_CREATE_SCHEMA in
:mod:`.schemas`; the producers' commands (PRODUCER, SEND,
CLOSE_PRODUCER) in :mod:`.producers`; the consumers' commands in :mod:`.consumers`. Every other command gets an answer saying it is not served (ERROR
NotAllowed, its request id echoed), never silence. Bytes that are not frames get ERROR
and the connection closes.

What the connection writes in one turn of the event loop (the receipts of the sends a
bookie answer settled, the MESSAGEs of a dispatch, the answers to the frames of one
read) goes to the socket as one write, in the order written: each write of a small
frame would otherwise be a system call of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magnetar.broker.authorization import Action
from magnetar.broker.authorizer import admin_request
from magnetar.broker.protocol.authrefresh import AUTH_REFRESH_TIMEOUT_S, CredentialsWatch
from magnetar.broker.protocol.consumers import Consumers
from magnetar.broker.protocol.errors import server_error
from magnetar.broker.protocol.producers import DEFAULT_MAX_PENDING_SENDS, Producers
from magnetar.broker.protocol.schemas import get_or_create_schema, get_schema
from magnetar.broker.protocol.topic_list import get_topics_of_namespace
from magnetar.common.authentication import AuthenticationService, Credentials, as_service
from magnetar.common.errors import (
    AuthenticationError,
    InvalidTopicName,
    MagnetarError,
    ProtocolError,
)
from magnetar.common.names import TopicName
from magnetar.common.tasks import BackgroundTasks
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.protocol.frames import FRAME_PADDING, Frame, FrameDecoder, encode_command

if TYPE_CHECKING:
    from magnetar.broker.authorizer import Authorizer
    from magnetar.broker.service import BrokerService
    from magnetar.common.tokens import TokenAuthenticator

log = logging.getLogger(__name__)

HTTP2_PREFACE = b"PRI * HTTP/2.0"
"""How every HTTP/2 (so gRPC) client opens a connection."""

READ_SIZE = 64 * 1024
DEFAULT_MAX_UNSENT_BYTES = 4 * 1024 * 1024
DEFAULT_WRITE_TIMEOUT_S = 60.0
Type = pb.BaseCommand.Type


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """What every connection of a listener shares."""

    server_version: str
    """Sent in CONNECTED (the C++ client closes a connection whose CONNECTED lacks it)."""
    max_message_size: int
    """Announced in CONNECTED; frames up to this plus FRAME_PADDING are read."""
    keepalive_s: float
    authenticator: AuthenticationService | TokenAuthenticator | None = None
    """None: authentication off (CONNECT's credentials are not looked at)."""
    authorizer: Authorizer | None = None
    """None: authorization off."""
    max_pending_sends: int = DEFAULT_MAX_PENDING_SENDS
    """Sends without a receipt past which the connection stops reading its socket."""
    auth_refresh_timeout_s: float = AUTH_REFRESH_TIMEOUT_S
    """How long a client challenged for fresh credentials (AUTH_CHALLENGE) has to answer."""
    tls: bool = False
    """The listener is the TLS one (``pulsar+ssl://``): lookups send its clients to the
    owner's TLS URL."""
    max_unsent_bytes: int = DEFAULT_MAX_UNSENT_BYTES
    """Bytes written and not yet taken by the client's socket past which the connection
    dispatches nothing more to its consumers and stops reading, until they drain."""
    write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S
    """A connection whose unsent bytes have not drained below the limit for this long is
    closed (a client that never reads)."""


class Connection:
    """One client's socket. :meth:`run` serves it until either side closes it."""

    def __init__(
        self, service: BrokerService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        settings: ConnectionSettings,
    ) -> None:  # fmt: skip
        self.service = service
        self.settings = settings
        self.peer = _peer(writer)
        self.connected = False
        """The handshake is done."""
        self.protocol_version = 0
        self.client_version = ""
        """What the client said it is in CONNECT (``Pulsar-CPP-v3.7.0``, ``Pulsar-Java-v3.3.0``)."""
        self.role: str | None = None
        self._reader = reader
        self._writer = writer
        self._decoder = FrameDecoder(settings.max_message_size + FRAME_PADDING)
        self._requests = BackgroundTasks(f"pulsar connection {self.peer}")
        self._awaiting_pong = False
        self._reading_paused = False
        """Reading is held by the producers' backpressure: the client cannot be heard."""
        self._closed = False
        self.credentials: CredentialsWatch | None = None
        """The expiry of the credentials CONNECT brought (authentication on)."""
        self._transport = writer.transport
        # Past the high-water mark the transport pauses this protocol and drain() waits.
        self._transport.set_write_buffer_limits(high=settings.max_unsent_bytes)
        self._draining: asyncio.Task[None] | None = None
        """Waits for what the client has not read to drain (None: under the limit)."""
        self._out: list[bytes] = []
        """Frames written this turn of the event loop, not yet handed to the socket."""
        self._out_bytes = 0
        self.producers = Producers(self, settings.authorizer, settings.max_pending_sends, settings.max_message_size)
        self._handlers: dict[int, Callable[[Frame], None]] = {
            Type.CONNECT: self._connect_again,
            Type.PING: lambda _: self._write(commands.pong()),
            Type.PONG: lambda _: None,  # hearing anything is what keepalive wants
            Type.PARTITIONED_METADATA: self._spawn(self._partitioned_metadata),
            Type.LOOKUP: self._spawn(self._lookup),
            Type.GET_TOPICS_OF_NAMESPACE: self._spawn(lambda frame: get_topics_of_namespace(self, frame)),
            Type.GET_SCHEMA: self._spawn(lambda frame: get_schema(self, frame)),
            Type.GET_OR_CREATE_SCHEMA: self._spawn(lambda frame: get_or_create_schema(self, frame)),
            **self.producers.handlers(),
        }
        self.consumers = Consumers(self, settings.max_message_size)
        self._handlers.update(self.consumers.handlers())

    # -- the socket -------------------------------------------------------------------------
    async def run(self) -> None:
        """Read and answer frames until the peer closes, a frame is not one, the peer
        falls silent past its keepalive, or :meth:`close`."""
        keepalive = asyncio.create_task(self._keepalive(), name=f"keepalive:{self.peer}")
        try:
            while not self._closed:
                data = await self._reader.read(READ_SIZE)
                if not data:
                    break
                self._awaiting_pong = False
                try:
                    frames = self._decoder.feed(data)
                except ProtocolError as exc:
                    if data.startswith(HTTP2_PREFACE):
                        # The SDK (or another gRPC client) given this port: the ERROR frame
                        # below is not HTTP/2, which the client reports as such
                        # (common.grpcutil: NotGrpcServer).
                        log.info("pulsar connection %s is a gRPC (HTTP/2) client: this port serves Pulsar's binary "
                                 "protocol, gRPC is on the broker's gRPC port; closing it", self.peer)  # fmt: skip
                    else:
                        log.info("pulsar connection %s sent bytes that are not a frame (%s); closing it", self.peer, exc.message)
                    self._write(commands.error(0, server_error(exc), exc.message))
                    break
                for frame in frames:
                    if self._closed:
                        break
                    self._handle(frame)
                self._flush()
                await self._writer.drain()
                self._reading_paused = True
                try:
                    await self.producers.before_read()  # backpressure: pending sends, rates, quotas
                finally:
                    self._reading_paused = False
        except ConnectionError:
            pass  # the peer went away
        finally:
            keepalive.cancel()
            draining = self._draining
            if draining is not None:
                draining.cancel()
            await self._requests.close()
            try:
                self.close()
            finally:  # whatever closing the socket raised, the handles leave their topics
                self.consumers.close_all()
                await asyncio.gather(keepalive, *([draining] if draining else []), return_exceptions=True)

    def close(self, abort: bool = False) -> None:
        """Close the socket (:meth:`run` ends); ``abort``: without sending what is unsent.
        The producers leave their topics whatever the socket does (a producer left behind
        would refuse its client's reconnect as ProducerBusy)."""
        try:
            if abort:
                self._transport.abort()
            else:
                self._flush()
                self._writer.close()
        finally:
            self._closed = True
            self.producers.close()

    @property
    def writable(self) -> bool:
        """What the client has not read yet is under ``max_unsent_bytes``: consumers may
        be sent more."""
        return self._draining is None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def authorizer(self) -> Authorizer | None:
        return self.settings.authorizer

    def _write(self, command: pb.BaseCommand) -> None:
        if not self._closed:
            self._queue(encode_command(command))

    write = _write
    """(for the command handlers of other modules)"""

    def spawn(self, request: Coroutine[Any, Any, None], name: str) -> None:
        """Serve ``request`` in a task owned by the connection (cancelled when it closes)."""
        if self._closed:
            request.close()
        else:
            self._requests.spawn(request, name=f"{name}:{self.peer}")

    def write_bytes(self, frames: bytes) -> None:
        """Whole encoded frames (MESSAGEs)."""
        if not self._closed and frames:
            self._queue(frames)

    def _queue(self, frame: bytes) -> None:
        """Write ``frame`` with whatever else is written this turn (see the module docstring);
        at once when what waits would pass ``max_unsent_bytes`` (the bound is on what the
        client has not read, wherever it waits)."""
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(frame)
        self._out_bytes += len(frame)
        if self._out_bytes + self._transport.get_write_buffer_size() > self.settings.max_unsent_bytes:
            self._flush()

    def _flush(self) -> None:
        if self._out:
            out, self._out = self._out, []
            self._out_bytes = 0
            # A socket the peer closed is gone already (uvloop raises on a write to it; the
            # read loop sees the end and closes the connection).
            if not self._closed and not self._transport.is_closing():
                self._writer.write(out[0] if len(out) == 1 else b"".join(out))
                self._watch_unsent()

    def _watch_unsent(self) -> None:
        """Past ``max_unsent_bytes`` unsent: hold the consumers' permits until the client
        reads (Pulsar's permits alone allow 2^32 messages), and close the connection if
        it does not within ``write_timeout_s``."""
        if self._draining is None and self._transport.get_write_buffer_size() > self.settings.max_unsent_bytes:
            self._draining = asyncio.get_running_loop().create_task(self._drain(), name=f"drain:{self.peer}")
            self.consumers.hold_permits()

    async def _drain(self) -> None:
        try:
            async with asyncio.timeout(self.settings.write_timeout_s):
                await self._writer.drain()
        except TimeoutError:
            unsent = self._transport.get_write_buffer_size()
            log.warning(
                "pulsar connection %s has not read what it was sent for %g s (%d bytes unsent); closing it",
                self.peer, self.settings.write_timeout_s, unsent,
            )  # fmt: skip
            self._draining = None
            self.close(abort=True)
            return
        except ConnectionError:
            self._draining = None
            return
        self._draining = None
        if not self._closed:
            self.consumers.release_permits()

    def _refuse_and_close(self, command: pb.BaseCommand, why: str) -> None:
        log.info("pulsar connection %s: %s; closing it", self.peer, why)
        self._write(command)
        self.close()

    refuse_and_close = _refuse_and_close

    async def _keepalive(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.settings.keepalive_s)
            if not self.connected:
                self._refuse_and_close(
                    commands.error(0, pb.NotAllowedError, f"no CONNECT within {self.settings.keepalive_s:g} s"),
                    "no handshake within the keepalive interval",
                )
            elif self._reading_paused:
                # The producers' backpressure holds the reading: the client's PINGs and
                # PONGs wait unread in the socket, so its silence says nothing. Alive,
                # unless the socket broke (a PING written to a client that is gone fails).
                if self._transport.is_closing():
                    log.info("pulsar connection %s went away while its reading was paused; closing it", self.peer)
                    self.close()
                else:
                    self._awaiting_pong = False
                    self._write(commands.ping())
            elif self._awaiting_pong:
                log.info("pulsar connection %s silent past its keepalive of %g s; closing it", self.peer, self.settings.keepalive_s)
                self.close()
            else:
                self._awaiting_pong = True
                self._write(commands.ping())

    # -- commands ---------------------------------------------------------------------------
    def _handle(self, frame: Frame) -> None:
        if not self.connected:
            if frame.command.type == Type.CONNECT:
                self._connect(frame.command.connect)
            else:
                self._refuse_and_close(
                    commands.error(commands.request_id(frame.command), pb.NotAllowedError, f"{frame.type_name} before CONNECT: the first command must be CONNECT"),
                    f"{frame.type_name} before CONNECT",
                )  # fmt: skip
            return
        handler = self._handlers.get(frame.command.type)
        if handler is not None:
            handler(frame)
        else:
            self._not_served(frame)

    def _connect(self, connect: pb.CommandConnect) -> None:
        """CONNECT: authenticate (when on) with the door-neutral authentication service —
        ``token`` and ``basic`` auth data, the TLS listener's verified client certificate
        (``tls``), or nothing (the anonymous role, when one is set) — then CONNECTED."""
        authenticator = self.settings.authenticator
        if authenticator is None:
            self._connected(connect)
            return
        service = as_service(authenticator)
        try:
            credentials = Credentials.of_method(connect.auth_method_name, connect.auth_data, self._peer_certificate())
        except AuthenticationError as exc:
            self._refuse_and_close(commands.error(0, pb.AuthenticationError, exc.message), f"authentication failed: {exc.message}")
            return
        if service.is_costly(credentials):  # a password to hash: off the event loop
            self._requests.spawn(self._authenticate_slowly(connect, service, credentials), name=f"CONNECT:{self.peer}")
            return
        self._authenticated(connect, service, credentials, lambda: service.authenticate(credentials))

    async def _authenticate_slowly(self, connect: pb.CommandConnect, service: AuthenticationService, credentials: Credentials) -> None:
        try:
            role = await asyncio.to_thread(service.authenticate, credentials)
        except AuthenticationError as exc:
            self._refuse_and_close(commands.error(0, pb.AuthenticationError, exc.message), f"authentication failed: {exc.message}")
            return
        self._authenticated(connect, service, credentials, lambda: role)

    def _authenticated(
        self, connect: pb.CommandConnect, service: AuthenticationService, credentials: Credentials, role: Callable[[], str],
    ) -> None:  # fmt: skip
        if self._closed:
            return
        try:
            self.role = role()
        except AuthenticationError as exc:
            self._refuse_and_close(commands.error(0, pb.AuthenticationError, exc.message), f"authentication failed: {exc.message}")
            return
        self._connected(connect)
        # Credentials that expire are challenged then (AUTH_CHALLENGE / AUTH_RESPONSE).
        self.credentials = CredentialsWatch(
            self, service, self.settings.server_version, timeout_s=self.settings.auth_refresh_timeout_s,
            certificate=credentials.certificate,
        )  # fmt: skip
        self._handlers[Type.AUTH_RESPONSE] = self.credentials.auth_response
        self.credentials.connected(connect, credentials)

    def _connected(self, connect: pb.CommandConnect) -> None:
        self.protocol_version = min(connect.protocol_version, commands.PROTOCOL_VERSION)
        self.client_version = connect.client_version
        self._write(commands.connected(self.settings.server_version, self.protocol_version, self.settings.max_message_size))
        self.connected = True
        log.debug("pulsar connection %s: %s, protocol %d", self.peer, connect.client_version, self.protocol_version)

    def _peer_certificate(self) -> bytes | None:
        """The client certificate the TLS listener verified (DER), None without one."""
        ssl_object = self._writer.get_extra_info("ssl_object")
        return ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None

    def _connect_again(self, frame: Frame) -> None:
        self._write(commands.error(0, pb.NotAllowedError, "this connection is connected already"))

    def _spawn(self, request: Callable[[Frame], Coroutine[Any, Any, None]]) -> Callable[[Frame], None]:
        """A handler that serves ``request`` in a task of its own, so that a slow one
        (a lookup waiting on ZooKeeper) holds up no other command."""

        def handle(frame: Frame) -> None:
            if not self._closed:
                self._requests.spawn(request(frame), name=f"{frame.type_name}:{self.peer}")

        return handle

    def topic_name(self, value: str | bytes) -> str:
        """The full name of the topic a command names. Raises: InvalidTopicName."""
        return self._topic(value)

    def _topic(self, value: str | bytes) -> str:
        if not isinstance(value, str):  # proto2 hands over a string that is not UTF-8 as bytes
            raise InvalidTopicName(f"topic name {value!r} is not UTF-8")
        return str(TopicName.parse(value))

    # What the consumers' handlers (.consumers) use of their connection.
    spawn_handler = _spawn

    async def _may_look_up(self, topic: str) -> None:
        if self.settings.authorizer is not None:
            await self.settings.authorizer.check(self.role, admin_request(Action.LOOKUP, topic=topic))
        self.service.check_serving(f"lookup of {topic}")

    async def _partitioned_metadata(self, frame: Frame) -> None:
        request = frame.command.partitionMetadata
        try:
            topic = self._topic(request.topic)
            await self._may_look_up(topic)
            # Pulsar's clients ask before producing or subscribing: a missing topic of a
            # namespace that auto-creates partitioned topics is created now.
            answer = commands.partitioned_metadata(request.request_id, await self.service.client_partitions(topic))
        except MagnetarError as exc:
            answer = commands.partitioned_metadata_failed(request.request_id, server_error(exc), exc.message)
        except Exception as exc:
            log.exception("partitioned metadata of %r failed", request.topic)
            answer = commands.partitioned_metadata_failed(request.request_id, pb.UnknownError, f"internal error: {exc!r}")
        self._write(answer)

    async def _lookup(self, frame: Frame) -> None:
        request = frame.command.lookupTopic
        rid = request.request_id
        try:
            topic = self._topic(request.topic)
            await self._may_look_up(topic)
            owner = await self.service.lookup(topic)
            urls = await self.service.pulsar_urls_of(owner)
            if not (urls.url_tls if self.settings.tls else urls.url):
                kind = "pulsar+ssl://" if self.settings.tls else "pulsar://"
                answer = commands.lookup_failed(
                    rid, pb.ServiceNotReady, f"{topic} is served by broker {owner}, which does not serve Pulsar's protocol at a {kind} URL"
                )
            else:
                # The owner's own record says so: the answer is authoritative. Both URLs
                # go out; the client takes the one of its kind (Pulsar's brokers do the same).
                answer = commands.lookup(
                    rid, urls.url, redirect=owner != self.service.broker_id, authoritative=True, url_tls=urls.url_tls
                )
        except MagnetarError as exc:
            answer = commands.lookup_failed(rid, server_error(exc), exc.message)
        except Exception as exc:
            log.exception("lookup of %r failed", request.topic)
            answer = commands.lookup_failed(rid, pb.UnknownError, f"internal error: {exc!r}")
        self._write(answer)

    def _not_served(self, frame: Frame) -> None:
        name = frame.type_name
        if commands.body(frame.command) is None and frame.command.type not in (Type.PING, Type.PONG):
            code, message = pb.UnsupportedVersionError, f"{name} is not supported by this broker"
        else:
            code, message = pb.NotAllowedError, f"{name} is not served by this broker yet"
        self._write(commands.error(commands.request_id(frame.command), code, message))


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)

