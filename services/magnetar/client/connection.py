"""Service URL parsing, shared broker channels, topic lookup and reconnect backoff."""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from magnetar.common.errors import (
    InvalidConfiguration,
    InvalidUrl,
    MagnetarError,
    NotConnected,
    NotFound,
)
from magnetar.common.grpcauth import BEARER, with_authorization, with_token
from magnetar.common.grpcutil import (
    CLIENT_CHANNEL_OPTIONS,
    cancels_this_task,
    from_rpc_error,
    stream_rpc_error,
)
from magnetar.common.retry import Backoff as _PolicyBackoff
from magnetar.common.retry import RetryPolicy
from magnetar.common.tls import ClientTls, aio_channel, channel_credentials, https_context
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc

from .framed import FramedSessionTransport
from .schemas import WriterSchemas
from .streamopen import open_stream

if TYPE_CHECKING:
    from .session import ClientSession, SessionStream

log = logging.getLogger(__name__)

DEFAULT_PORT = 6660
_SCHEMES = ("magnetar://", "pulsar://", "magnetar+ssl://", "pulsar+ssl://")
_TLS_SCHEMES = ("magnetar+ssl://", "pulsar+ssl://")
LOOKUP_ATTEMPT_TIMEOUT_S = 5.0
FRAMED_RETRY_S = 60.0
"""After a broker's framed session listener could not be reached, its sessions use the
``Session`` RPC for this long before the listener is tried again."""
T = TypeVar("T")


@dataclass(frozen=True)
class TopicOwner:
    """The broker serving a topic, as a lookup answers it."""

    address: str
    """``host:port`` of its gRPC door (``magnetar://``)."""
    pulsar_url: str = ""
    """Its ``pulsar://host:port`` ("": it serves no Pulsar protocol)."""
    pulsar_url_tls: str = ""
    """Its ``pulsar+ssl://host:port`` ("": none)."""


def parse_service_url(url: str) -> list[str]:
    """``"magnetar://h1:6660,h2"``, ``"h:6660"`` → ``["h1:6660", "h2:6660"]`` (also
    ``pulsar://``, and ``magnetar+ssl://``/``pulsar+ssl://`` for TLS)."""
    rest = url.strip()
    for scheme in _SCHEMES:
        if rest.startswith(scheme):
            rest = rest[len(scheme) :]
            break
    else:
        if "://" in rest:
            raise InvalidUrl(f"unsupported service URL scheme in {url!r}: use magnetar://host:port or magnetar+ssl://host:port")
    rest = rest.rstrip("/")
    hosts = []
    for part in rest.split(","):
        part = part.strip()
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        if not sep or "]" in port:  # no port (or a bare IPv6 literal)
            host, port = part, str(DEFAULT_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidUrl(f"bad host:port {part!r} in service URL {url!r}")
        hosts.append(f"{host}:{port}")
    if not hosts:
        raise InvalidUrl(f"no broker address in service URL {url!r}")
    return hosts


def url_uses_tls(url: str) -> bool:
    """Whether the service URL asks for TLS (``magnetar+ssl://``, ``pulsar+ssl://``)."""
    return url.strip().startswith(_TLS_SCHEMES)


def sdk_tls(
    service_url: str,
    *,
    use_tls: bool = False,
    trust_certs_file_path: str | None = None,
    allow_insecure_connection: bool = False,
    validate_hostname: bool = True,
    certificate_file_path: str | None = None,
    private_key_file_path: str | None = None,
) -> ClientTls | None:
    """The TLS settings of a client from pulsar-client's options (None: plain text).

    TLS is on with a ``+ssl`` URL or ``use_tls``; the other options count only then.

    Raises:
        InvalidArgument: an option gRPC cannot honour: it always verifies the server's
            certificate chain and host name, so neither check can be turned off.
    """
    if not (use_tls or url_uses_tls(service_url)):
        return None
    if allow_insecure_connection:
        raise InvalidConfiguration(
            "tls_allow_insecure_connection is not supported: gRPC always verifies the server's certificate;"
            " pass the CA that signed it as tls_trust_certs_file_path"
        )
    if not validate_hostname:
        raise InvalidConfiguration(
            "tls_validate_hostname=False is not supported: gRPC always checks that the server's certificate"
            " names the host in the service URL; connect by a name or address the certificate lists"
        )
    return ClientTls(trust_certs_file_path or "", certificate_file_path or "", private_key_file_path or "")


# Reopening a stream: 0.1 s doubling to 5 s, each wait 0-10 % shorter at random; no limit
# (the first open adds the operation timeout as its deadline).
RECONNECT_RETRY = RetryPolicy(delay_s=0.1, multiplier=2.0, max_delay_s=5.0, jitter=0.1)


class Backoff(_PolicyBackoff):
    """:data:`RECONNECT_RETRY`'s waits (or others like it): 0.1 s, 0.2 s, … capped at 5 s."""

    def __init__(self, initial_s: float = 0.1, max_s: float = 5.0, multiplier: float = 2.0) -> None:
        super().__init__(RetryPolicy(delay_s=initial_s, multiplier=multiplier, max_delay_s=max_s, jitter=0.1))


def is_retriable(exc: BaseException) -> bool:
    return isinstance(exc, MagnetarError) and exc.retriable


class ConnectionPool:
    """One gRPC channel per broker address, shared by every producer and consumer.

    Channels are created lazily inside the running event loop, with TLS when ``tls`` is
    given or the URL is a ``+ssl`` one (then trusting the system's roots). With a
    ``token`` source, every call and stream made through :meth:`stub` carries
    ``authorization: Bearer <token>``, the source asked anew each time; with an
    ``authorization`` source (which wins), the header it gives (``Bearer …``, ``Basic …``),
    and the role ``original_principal`` gives, if any, as the role it acts for (the
    gateway, for a caller it knows by its client certificate).
    """

    def __init__(
        self, service_url: str, operation_timeout_s: float = 30.0, *, tls: ClientTls | None = None,
        token: Callable[[], str] | None = None, authorization: Callable[[], str] | None = None,
        original_principal: Callable[[], str | None] | None = None, sessions: bool = True,
    ) -> None:
        """Args: sessions: producers and consumers share one session per broker
        (:mod:`.session`); False: each opens its own ``Produce`` or ``Consume`` stream.
        The session goes to the broker's framed session listener when its lookups
        advertise one (:attr:`framed`), else to its ``Session`` RPC.

        Raises: InvalidArgument: a bad service URL, or TLS files that cannot be read.
        """
        self.service_hosts = parse_service_url(service_url)
        self.operation_timeout_s = operation_timeout_s
        self.token = token
        self.authorization = authorization
        self.original_principal = original_principal
        self.tls = tls if tls is not None else (ClientTls() if url_uses_tls(service_url) else None)
        if self.tls is not None:
            channel_credentials(self.tls)  # read the files now: a wrong path fails here, once
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, pb_grpc.BrokerStub] = {}
        self.sessions = sessions
        self._sessions: dict[str, ClientSession] = {}
        self._streams_only: set[str] = set()  # brokers without the Session RPC
        self.framed = True
        """Sessions use brokers' framed session listeners (False: the ``Session`` RPC only)."""
        self._session_addresses: dict[str, str] = {}  # broker address -> its framed session host:port
        self._framed_failed: dict[str, float] = {}  # broker address -> when its listener could not be reached
        self._ssl_context: Any = None
        self._next_host = itertools.count(random.randrange(len(self.service_hosts)))
        self.closed = False
        self.writer_schemas = WriterSchemas(self.get_schema)
        """The schema versions this client's consumers fetched (see :mod:`.schemas`)."""

    def stub(self, address: str) -> pb_grpc.BrokerStub:
        if self.closed:
            raise NotConnected("the client is closed")
        stub = self._stubs.get(address)
        if stub is None:
            channel = aio_channel(address, self.tls, CLIENT_CHANNEL_OPTIONS)
            self._channels[address] = channel
            plain = pb_grpc.BrokerStub(channel)
            if self.authorization is not None:
                stub = with_authorization(plain, self.authorization, self.original_principal)
            else:
                stub = with_token(plain, self.token)
            self._stubs[address] = stub
        return stub

    async def unary(self, address: str, call: Callable[[pb_grpc.BrokerStub], Awaitable[T]]) -> T:
        """``call(stub)`` on the broker at ``address``, its error typed.

        Raises:
            MagnetarError: the broker's error, or NotConnected/Timeout.
        """
        try:
            return await call(self.stub(address))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, f"broker {address}") from exc

    async def on_service_hosts(self, what: str, call: Callable[[pb_grpc.BrokerStub, str], Awaitable[T]]) -> T:
        """Run a unary call on the service hosts in turn until one answers.

        A host that cannot answer now (unreachable, timed out, or a retriable refusal
        such as a broker cut off from ZooKeeper) is skipped for the next one; each
        attempt is limited to ``LOOKUP_ATTEMPT_TIMEOUT_S``, so one stopped broker among
        the hosts does not hold the lookup for the whole operation timeout.
        """
        last: MagnetarError | None = None
        hosts = self.service_hosts
        if not hosts:
            raise NotConnected(f"no broker to ask ({what}): none is registered; start a broker")
        first = next(self._next_host)  # each call starts at the next host, then tries all
        for k in range(len(hosts)):
            host = hosts[(first + k) % len(hosts)]
            try:
                return await call(self.stub(host), host)
            except grpc.RpcError as exc:
                last = from_rpc_error(exc, f"broker {host} ({what})")
                if not last.retriable:
                    raise last from exc
        assert last is not None
        raise last

    @property
    def attempt_timeout_s(self) -> float:
        """The deadline of one lookup attempt on one host."""
        return min(self.operation_timeout_s, LOOKUP_ATTEMPT_TIMEOUT_S)

    async def lookup(self, topic: str) -> str:
        """The ``host:port`` of the broker that serves ``topic``."""

        async def call(stub: pb_grpc.BrokerStub, host: str) -> str:
            resp = await stub.Lookup(pb.LookupRequest(topic=topic), timeout=self.attempt_timeout_s)
            return self._owner_found(resp, host)

        return await self.on_service_hosts(f"lookup {topic}", call)

    async def lookup_owner(self, topic: str) -> TopicOwner:
        """The broker that serves ``topic``, with where it serves Pulsar's protocol."""

        async def call(stub: pb_grpc.BrokerStub, host: str) -> TopicOwner:
            resp = await stub.Lookup(pb.LookupRequest(topic=topic), timeout=self.attempt_timeout_s)
            return TopicOwner(self._owner_found(resp, host), resp.pulsar_service_url, resp.pulsar_service_url_tls)

        return await self.on_service_hosts(f"lookup {topic}", call)

    def _owner_found(self, resp: pb.LookupResponse, host: str) -> str:
        """The owner a lookup answered, remembering where it serves framed sessions."""
        address = resp.broker_address or host
        if resp.session_address:
            self._session_addresses[address] = resp.session_address
        else:
            self._session_addresses.pop(address, None)
        return address

    async def partitions(self, topic: str, auto_create: bool = False) -> int:
        """How many partitions ``topic`` has (0: not partitioned). ``auto_create``: a
        producer's or consumer's question (a missing topic may be created partitioned,
        as its namespace's autoTopicCreation says)."""

        async def call(stub: pb_grpc.BrokerStub, host: str) -> int:
            req = pb.PartitionedTopicMetadataRequest(topic=topic, auto_create=auto_create)
            resp = await stub.GetPartitionedTopicMetadata(req, timeout=self.attempt_timeout_s)
            return int(resp.partitions)

        return await self.on_service_hosts(f"partitions of {topic}", call)

    async def list_topics(self, namespace: str, mode: int = 0) -> list[str]:
        """The topics of ``namespace`` of ``mode``'s domains (0 persistent, 1
        non-persistent, 2 both: pulsar-client's RegexSubscriptionMode): a partitioned topic
        by its base name, the others by theirs (what a pattern subscription looks through).

        Raises:
            NamespaceNotFound, AuthorizationError (``lookup`` on the namespace), NotConnected, Timeout.
        """

        async def call(stub: pb_grpc.BrokerStub, host: str) -> list[str]:
            req = pb.ListTopicsRequest(namespace=namespace, mode=mode)  # type: ignore[arg-type]
            return list((await stub.ListTopics(req, timeout=self.attempt_timeout_s)).names)

        return await self.on_service_hosts(f"topics of {namespace}", call)

    async def last_message_id(self, topic: str, read_compacted: bool = False) -> pb.MessageIdData:
        request = pb.GetLastMessageIdRequest(topic=topic, read_compacted=read_compacted)
        resp = await self.unary(
            await self.lookup(topic), lambda stub: stub.GetLastMessageId(request, timeout=self.operation_timeout_s)
        )
        return resp.message_id

    async def get_schema(self, topic: str, version: int | None = None) -> pb.GetSchemaResponse | None:
        """A version of ``topic``'s schema (None: the latest); None when it has none
        (or not that version). Any broker answers (schemas are kept in ZooKeeper)."""
        request = pb.GetSchemaRequest(topic=topic, version=version)

        async def call(stub: pb_grpc.BrokerStub, host: str) -> pb.GetSchemaResponse:
            return await stub.GetSchema(request, timeout=self.attempt_timeout_s)

        try:
            return await self.on_service_hosts(f"schema of {topic}", call)
        except NotFound:
            return None

    def open_produce(self, address: str, target: str) -> BrokerStream | SessionStream:
        """A new producer's stream to the broker at ``address``: a handle on the session
        with it, or (without sessions) a ``Produce`` stream of its own."""
        if self.uses_session(address):
            return self.session(address).open_handle("produce", target)
        return BrokerStream(self.stub(address).Produce(), target)

    def open_consume(self, address: str, target: str) -> BrokerStream | SessionStream:
        """A new consumer's stream to the broker at ``address`` (see :meth:`open_produce`)."""
        if self.uses_session(address):
            return self.session(address).open_handle("consume", target)
        return BrokerStream(self.stub(address).Consume(), target)

    def uses_session(self, address: str) -> bool:
        """Whether producers and consumers on the broker at ``address`` get a session's handle."""
        return self.sessions and address not in self._streams_only

    def session(self, address: str) -> ClientSession:
        """The session with the broker at ``address``, opened on first use and again
        after it broke."""
        session = self._sessions.get(address)
        if session is None:
            # It builds on this module's stream errors.
            from .session import ClientSession, GrpcSessionTransport

            target = f"broker {address}"
            framed = self._framed_transport(address, target)
            transport = framed if framed is not None else GrpcSessionTransport(self.stub(address).Session(), target)
            session = ClientSession(transport, target, self._session_broke)
            self._sessions[address] = session
        return session

    def _framed_transport(self, address: str, target: str) -> FramedSessionTransport | None:
        """A framed session connection to the broker at ``address``; None when it
        advertises no listener, or it could not be reached lately."""
        session_address = self._session_addresses.get(address) if self.framed else None
        if not session_address:
            return None
        failed = self._framed_failed.get(address)
        if failed is not None:
            if time.monotonic() - failed < FRAMED_RETRY_S:
                return None
            del self._framed_failed[address]
        if self.closed:
            raise NotConnected("the client is closed")
        if self.authorization is not None:
            header = self.authorization()
        else:
            header = BEARER + self.token() if self.token is not None else ""
        principal = (self.original_principal() if self.original_principal is not None else None) or ""
        tls = self.tls
        if tls is not None and self._ssl_context is None:
            self._ssl_context = https_context(tls)
        return FramedSessionTransport(
            session_address, target, tls=self._ssl_context if tls is not None else None,
            server_hostname=(tls.target_name_override or None) if tls is not None else None,
            authorization=header, original_principal=principal, timeout_s=self.attempt_timeout_s,
        )  # fmt: skip

    def _session_broke(self, session: ClientSession) -> None:
        for address, held in list(self._sessions.items()):
            if held is session:
                del self._sessions[address]
                if session.unsupported:
                    if isinstance(session.transport, FramedSessionTransport):
                        self._framed_failed[address] = time.monotonic()
                    else:
                        self._streams_only.add(address)

    async def close(self) -> None:
        self.closed = True
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        channels, self._channels, self._stubs = self._channels, {}, {}
        await asyncio.gather(*(ch.close() for ch in channels.values()), return_exceptions=True)


class BrokerStream:
    """One open produce or consume stream to a broker, with the transport (gRPC) kept
    here: the producer's and consumer's state machines see typed messages and
    MagnetarErrors only, so another transport can be slotted in behind this class."""

    def __init__(self, call: grpc.aio.StreamStreamCall, target: str) -> None:
        self._call = call
        self.target = target

    async def open(self, first: Any, timeout_s: float | None) -> Any:
        """Write the opening request and return the broker's first answer (see
        :func:`~magnetar.client.streamopen.open_stream`)."""
        return await open_stream(self, first, timeout_s)

    async def write(self, request: Any) -> None:
        """Raises: the typed error of the broken stream."""
        try:
            with self._cancel_is_a_lost_stream("a write"):
                await self._call.write(request)
        except Exception as exc:
            raise await stream_error(self._call, exc, self.target) from exc

    async def read(self) -> Any | None:
        """The next message; None at the end of the stream.

        Raises: the typed error the stream ended with.
        """
        try:
            with self._cancel_is_a_lost_stream("a read"):
                resp = await self._call.read()
        except grpc.RpcError as exc:
            raise stream_rpc_error(exc, self.target) from exc
        return None if resp is grpc.aio.EOF else resp

    async def done_writing(self) -> None:
        """Half-close: no more requests (the broker then ends the stream).

        Raises: the typed error of the broken stream.
        """
        try:
            with self._cancel_is_a_lost_stream("a half-close"):
                await self._call.done_writing()
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            raise NotConnected(f"the stream to {self.target} is gone: {exc!r}") from exc

    def cancel(self) -> None:
        self._call.cancel()

    @contextmanager
    def _cancel_is_a_lost_stream(self, what: str) -> Iterator[None]:
        """A CancelledError grpc raises because another task cancelled the call is a lost
        stream (see :func:`cancels_this_task`); this task's own cancellation stands."""
        try:
            yield
        except asyncio.CancelledError:
            if cancels_this_task():
                raise
            raise NotConnected(f"the stream to {self.target} was cancelled with {what} in flight") from None


async def stream_error(call: grpc.aio.StreamStreamCall, exc: BaseException, target: str) -> MagnetarError:
    """The typed error behind a failed read or write on a stream."""
    if isinstance(exc, MagnetarError):
        return exc
    if isinstance(exc, grpc.RpcError):
        return stream_rpc_error(exc, target)
    if call.cancelled():  # by our reader, as the stream broke: no status to read
        return NotConnected(f"the stream to {target} was cancelled: {exc!r}")
    try:  # a write on a finished call: reading raises the status it finished with
        await asyncio.wait_for(call.read(), 1.0)
    except grpc.RpcError as rpc_exc:
        return stream_rpc_error(rpc_exc, target)
    except asyncio.CancelledError:
        # grpc's answer to a read on a cancelled call: only ours if this task is being
        # cancelled (else it escaped the writer's handlers and ended the writer task).
        if cancels_this_task():
            raise
    except Exception:
        pass
    return NotConnected(f"the stream to {target} broke: {exc!r}")
