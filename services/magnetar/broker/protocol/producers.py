"""The producers of one Pulsar protocol connection: PRODUCER, SEND, SEND_RECEIPT,
SEND_ERROR and CLOSE_PRODUCER (both ways).

A PRODUCER is served as the gRPC door's OpenProducer: authorization (the connection's
role may produce on the topic), :meth:`BrokerService.get_topic` (which checks ownership
and serving) and :meth:`PersistentTopic.add_producer` (a name in use is ProducerBusy; the
answer carries the last sequence id stored under the name, for deduplication). A
PRODUCER's ``initial_subscription_name`` (pulsar-client's dead-letter producer sends its
policy's) is made first, at the earliest entry, when missing. A SEND's
entry is stored as sent (:func:`magnetar.protocol.stored.stored_entry`) by
:meth:`PersistentTopic.publish`, which does everything else: deduplication, the size
limit, backlog quotas, the delivery-delay limit, and refusing what it could not read back.

Receipts go out in the order of the sends of each producer (the C++ client expects its
oldest pending message to be acknowledged first): a send that settles early waits for
those before it. A resend recognised by deduplication gets a receipt with message id
(-1, -1), as Pulsar's broker sends. A failed send gets SEND_ERROR with the error's
``ServerError``.

Backpressure (Pulsar's ``maxPendingPublishRequestsPerConnection``): past
``max_pending_sends`` sends without a receipt, the connection stops reading its socket
(:meth:`Producers.before_read`) until half of them are answered; the namespace's publish
rate and a ``producer_request_hold`` backlog quota pause the reading the same way, as
they pause the gRPC door's reading of a produce stream.

Access modes (:mod:`magnetar.broker.access`): a PRODUCER's ``producer_access_mode`` and
``topic_epoch`` (sent by a client reconnecting a producer it was given an epoch for) go to
:meth:`PersistentTopic.open_producer`; PRODUCER_SUCCESS carries the topic epoch. A
WaitForExclusive producer that must wait is answered PRODUCER_SUCCESS with
``producer_ready=false`` at once and a second PRODUCER_SUCCESS (ready, with its epoch)
when it holds the topic; a CLOSE_PRODUCER meanwhile takes it out of the line. A producer
fenced out by an ExclusiveWithFencing one gets CLOSE_PRODUCER, as Pulsar's broker sends:
the client reconnects with its epoch and is refused with ProducerFenced.

When the topic stops being served here (unloaded, moved, the broker lost ZooKeeper) the
broker sends CLOSE_PRODUCER: the client looks the topic up again, reconnects and resends
what was not acknowledged (deduplication keeps those stored once).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.broker.access import ProducerAccessMode
from magnetar.broker.authorization import Action, Request
from magnetar.broker.protocol.errors import server_error
from magnetar.broker.protocol.schemas import declare as declare_schema
from magnetar.common.errors import (
    AlreadyExists,
    AuthorizationError,
    InvalidArgument,
    MagnetarError,
    NotOwner,
    ServiceClosed,
)
from magnetar.common.names import check_subscription_name
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.protocol.stored import check_batch_count, check_chunk, check_codec, stored_entry

if TYPE_CHECKING:
    from magnetar.broker.authorizer import Authorizer
    from magnetar.broker.service import BrokerService
    from magnetar.broker.topic import PersistentTopic, PublishResult
    from magnetar.protocol.frames import Frame

log = logging.getLogger(__name__)

DEFAULT_MAX_PENDING_SENDS = 1000
"""Pulsar's ``maxPendingPublishRequestsPerConnection``."""


class ProducerHost(Protocol):
    """What the producers need of their connection."""

    service: BrokerService
    peer: str
    role: str | None

    def write(self, command: pb.BaseCommand) -> None: ...

    def write_bytes(self, frames: bytes) -> None: ...

    def spawn(self, request: Coroutine[Any, Any, None], name: str) -> None: ...

    def topic_name(self, value: str | bytes) -> str: ...


@dataclass(eq=False)
class ProtocolProducer:
    """One producer of the connection (``producer_id`` is the client's)."""

    producer_id: int
    name: str
    topic: PersistentTopic
    last_sequence_id: int
    """What PRODUCER_SUCCESS said: the highest sequence id stored under the name (-1: none)."""
    schema_version: bytes | None = None
    """The version of the schema it declared (None: none)."""
    topic_epoch: int | None = None
    """The topic epoch PRODUCER_SUCCESS said (None: none)."""
    publisher: Any = None
    """Its registration in the topic (removed only while it is still the one under the name)."""
    pending: deque[tuple[int, int, asyncio.Future[PublishResult]]] = field(default_factory=deque)
    """(sequence id, highest sequence id, outcome) of each send not answered yet, in order."""
    closed: bool = False


class Producers:
    """PRODUCER, SEND and CLOSE_PRODUCER on one connection."""

    def __init__(
        self, host: ProducerHost, authorizer: Authorizer | None, max_pending_sends: int = DEFAULT_MAX_PENDING_SENDS,
        max_message_size: int = 5 * 1024 * 1024,
    ) -> None:  # fmt: skip
        self.host = host
        self.max_message_size = max_message_size
        self.authorizer = authorizer
        self.max_pending_sends = max_pending_sends
        self.by_id: dict[int, ProtocolProducer] = {}
        self._opening: set[int] = set()
        self._waiting: dict[int, asyncio.Task[Any]] = {}  # WaitForExclusive producers in line
        self.pending = 0
        """Sends of this connection without a receipt yet."""
        self._room: asyncio.Event | None = None
        self._sent: dict[ProtocolProducer, list[int]] = {}  # messages, bytes since the last read
        self._closed = False

    def handlers(self) -> dict[int, Callable[[Frame], None]]:
        """The connection's handlers for the commands served here."""
        Type = pb.BaseCommand.Type
        return {Type.PRODUCER: self._producer, Type.SEND: self.send, Type.CLOSE_PRODUCER: self._close_producer}

    # -- PRODUCER ---------------------------------------------------------------------------
    def _producer(self, frame: Frame) -> None:
        request = frame.command.producer
        self.host.spawn(self._open(request), name=f"PRODUCER {request.producer_id}:{self.host.peer}")

    async def _open(self, request: pb.CommandProducer) -> None:
        rid, pid = request.request_id, request.producer_id
        existing = self.by_id.get(pid)
        if existing is not None:  # the client asked again (its request timed out): the same answer
            self.host.write(commands.producer_success(
                rid, existing.name, existing.last_sequence_id, existing.schema_version, existing.topic_epoch))
            return
        if pid in self._opening:
            self.host.write(commands.error(rid, pb.ServiceNotReady, f"producer {pid} is being created on this connection"))
            return
        self._opening.add(pid)
        try:
            answer = await self._create(request)
        except MagnetarError as exc:
            answer = commands.error(rid, server_error(exc), exc.message)
        except Exception as exc:
            log.exception("PRODUCER on %r failed", request.topic)
            answer = commands.error(rid, pb.UnknownError, f"internal error: {exc!r}")
        finally:
            self._opening.discard(pid)
            self._waiting.pop(pid, None)
        self.host.write(answer)

    async def _create(self, request: pb.CommandProducer) -> pb.BaseCommand:
        service = self.host.service
        topic_name = self.host.topic_name(request.topic)
        mode = ProducerAccessMode.of(request.producer_access_mode)
        epoch = request.topic_epoch if request.HasField("topic_epoch") else None
        if request.encrypted:
            raise InvalidArgument("encrypted messages are not served by this broker")
        keep_for = request.initial_subscription_name if request.HasField("initial_subscription_name") else ""
        if keep_for:
            check_subscription_name(keep_for)
        if self.authorizer is not None:
            await self.authorizer.check(self.host.role, Request(Action.PRODUCE, topic_name))
            if keep_for:  # a subscription made here keeps a backlog: the role must be one that may consume it
                await self.authorizer.check(self.host.role, Request(Action.CONSUME, topic_name, keep_for))
        topic = await service.get_topic(topic_name)
        schema_version = await declare_schema(service, topic_name, request.schema if request.HasField("schema") else None)
        if self._closed:
            raise ServiceClosed("the connection is closing")
        if keep_for and keep_for not in topic.subscriptions:
            try:  # Pulsar's initialSubscriptionName: made at the earliest entry, before any send
                await topic.create_subscription(keep_for, "earliest")
            except AlreadyExists:
                pass
        name = request.producer_name if request.HasField("producer_name") and request.producer_name else service.new_producer_name()
        producer: ProtocolProducer | None = None

        def on_close(error: MagnetarError) -> None:
            if producer is not None:
                self._closed_by_broker(producer, error)

        def on_queued() -> None:
            task = asyncio.current_task()
            if task is not None:
                self._waiting[request.producer_id] = task
            log.info("pulsar connection %s: producer %s waits for exclusive access to %s", self.host.peer, name, topic.name)
            self.host.write(commands.producer_success(request.request_id, name, -1, schema_version, producer_ready=False))

        admitted = await topic.open_producer(name, on_close, mode, epoch, on_queued)
        if self._closed:
            topic.remove_producer(name, admitted.publisher)
            raise ServiceClosed("the connection is closing")
        last = admitted.last_sequence_id
        producer = ProtocolProducer(request.producer_id, name, topic, last, schema_version, admitted.topic_epoch, admitted.publisher)
        self.by_id[request.producer_id] = producer
        self._watch_access(producer)
        log.debug("pulsar connection %s: producer %s (%d) on %s", self.host.peer, name, request.producer_id, topic.name)
        return commands.producer_success(request.request_id, name, last, schema_version, admitted.topic_epoch)

    def _watch_access(self, producer: ProtocolProducer) -> None:
        """While the producer is open, ask again every recheck interval (as the gRPC
        door's produce stream); refused (a grant revoked), the broker closes it, and the
        client's new PRODUCER gets AuthorizationError."""
        authorizer, role = self.authorizer, self.host.role
        if authorizer is None or role in authorizer.superusers:
            return
        request = Request(Action.PRODUCE, producer.topic.name)

        async def watch() -> None:
            while not producer.closed:
                await asyncio.sleep(authorizer.recheck_interval_s)
                try:
                    allowed = await authorizer.allowed(role, request)
                except MagnetarError as exc:  # ZooKeeper away: the last decision stands
                    log.info("could not check %r's access to %s again: %s", role, request.what(), exc.message)
                    continue
                if not allowed and not producer.closed:
                    log.warning("refused: role %r may no longer %s; its producer is closed", role, request.what())
                    self._closed_by_broker(producer, AuthorizationError(f"role {role!r} is no longer authorized to {request.what()}"))

        self.host.spawn(watch(), name=f"access:{producer.name}")

    # -- SEND -------------------------------------------------------------------------------
    def send(self, frame: Frame) -> None:
        """Store a SEND's entry; its receipt goes out when it is stored (in order)."""
        send = frame.command.send
        pid, seq = send.producer_id, send.sequence_id
        if frame.checksum_error is not None:
            self.host.write(commands.send_error(pid, seq, pb.ChecksumError, frame.checksum_error.message))
            return
        producer = self.by_id.get(pid)
        if producer is None:
            self.host.write(commands.send_error(pid, seq, pb.NotAllowedError, f"no producer {pid} on this connection"))
            return
        if not self.host.service.serving():
            self._closed_by_broker(producer, self.host.service.not_serving(f"producer {producer.name} on {producer.topic.name}"))
            return
        metadata = frame.metadata
        assert metadata is not None  # the decoder gives one unless the checksum failed
        try:
            # Before the core reads the entry back: a count of 2^31 is refused by the
            # metadata alone, before a batch is decompressed or walked.
            check_codec(metadata, frame.metadata_bytes)
            check_batch_count(metadata, self.max_message_size)
            chunk = check_chunk(metadata, len(frame.payload), self.max_message_size)
        except InvalidArgument as exc:
            self.host.write(commands.send_error(pid, seq, server_error(exc), exc.message))
            return
        count = send.num_messages
        # As Pulsar's broker: a send claims the sequence ids up to its highest_sequence_id
        # when it gives one, else only its own. A batch's messages need not be numbered one
        # by one: a key-based batch of pulsar-client holds one key's messages (0, 12 while
        # another key's batch holds 1, 13); taking 0..1 for the first would make the second
        # a "resend" and drop it.
        highest = max(seq, send.highest_sequence_id, metadata.highest_sequence_id)
        entry = stored_entry(frame.metadata_bytes, frame.payload, frame.checksum)
        # Sent without batching nor compression, the entry is one message whose checksum
        # and metadata the decoder checked: the core need not check it again. A
        # compressed one is decompressed by the core's check (a corrupt or lying payload
        # gets SEND_ERROR, nothing stored).
        published = producer.topic.publish(
            producer.name, entry, count, seq, highest, maybe_delayed=metadata.HasField("deliver_at_time"),
            checked=count == 1 and not metadata.HasField("num_messages_in_batch") and not metadata.compression,
            chunk=chunk,
        )  # fmt: skip
        producer.pending.append((seq, highest, published))
        self.pending += 1
        if producer.topic.publish_limiter is not None or producer.topic.may_hold_producers:
            sent = self._sent.setdefault(producer, [0, 0])
            sent[0] += count
            sent[1] += len(entry)
        published.add_done_callback(lambda _: self._answer(producer))

    def _answer(self, producer: ProtocolProducer) -> None:
        """Write the receipts of the producer's oldest sends that are settled."""
        pending = producer.pending
        while pending and pending[0][2].done():
            seq, highest, published = pending.popleft()
            self.pending -= 1
            exc = published.exception() if not published.cancelled() else NotOwner("the topic is closing")
            if producer.closed:
                continue
            pid = producer.producer_id
            if exc is not None:
                error = exc if isinstance(exc, MagnetarError) else MagnetarError(repr(exc))
                if not isinstance(exc, MagnetarError):
                    log.error("send of producer %s on %s failed: %r", producer.name, producer.topic.name, exc)
                self.host.write(commands.send_error(pid, seq, server_error(error), error.message))
                continue
            result = published.result()
            ledger, entry = result.position if result.position is not None else (-1, -1)
            self.host.write_bytes(commands.send_receipt_frame(pid, seq, highest, ledger, entry, producer.topic.partition))
        if self._room is not None and self.pending <= self.max_pending_sends // 2:
            self._room.set()

    async def before_read(self) -> None:
        """Wait until the connection may read its socket again: fewer than the limit of
        sends pending, and each producer that sent since the last read within its topic's
        publish rate and backlog quota."""
        if self._sent:
            sent, self._sent = self._sent, {}
            for producer, (messages, size) in sent.items():
                topic = producer.topic
                if producer.closed:
                    continue
                if topic.publish_limiter is not None:
                    await topic.throttle_publish(producer.name, messages, size)
                if topic.may_hold_producers:
                    await topic.hold_while_over_quota(producer.name)
        while self.pending >= self.max_pending_sends and not self._closed:
            self._room = asyncio.Event()
            await self._room.wait()
            self._room = None

    # -- CLOSE_PRODUCER -----------------------------------------------------------------------
    def _close_producer(self, frame: Frame) -> None:
        request = frame.command.close_producer
        # Closed as of this command: a SEND after it is for no producer (SEND_ERROR), not
        # one stored whose receipt the closing would drop.
        producer = self.by_id.pop(request.producer_id, None)
        waiting = self._waiting.pop(request.producer_id, None)
        if waiting is not None:  # a WaitForExclusive producer leaves the line
            waiting.cancel()
        self.host.spawn(self._close(producer, request.request_id), name=f"CLOSE_PRODUCER {request.producer_id}")

    async def _close(self, producer: ProtocolProducer | None, request_id: int) -> None:
        if producer is not None:
            try:
                # As Pulsar's broker: what was sent before the close is answered first.
                outcomes = [published for _, _, published in producer.pending]
                if outcomes:
                    await asyncio.wait(outcomes)
            finally:
                self._forget(producer)  # also when the connection closes meanwhile
        self.host.write(commands.success(request_id))

    def _closed_by_broker(self, producer: ProtocolProducer, error: MagnetarError) -> None:
        """The topic is no longer served here: tell the client (it looks the topic up again
        and reconnects); receipts not written by now are not written."""
        if producer.closed:
            return
        log.info("pulsar connection %s: closing producer %s on %s: %s", self.host.peer, producer.name, producer.topic.name, error.message)
        self._forget(producer)
        self.host.write(commands.close_producer(producer.producer_id))

    def _forget(self, producer: ProtocolProducer) -> None:
        producer.closed = True
        if self.by_id.get(producer.producer_id) is producer:
            del self.by_id[producer.producer_id]
        producer.topic.remove_producer(producer.name, producer.publisher)
        self._sent.pop(producer, None)

    def close(self) -> None:
        """The connection is gone: every producer leaves its topic."""
        self._closed = True
        for waiting in self._waiting.values():
            waiting.cancel()
        for producer in list(self.by_id.values()):
            self._forget(producer)
        if self._room is not None:
            self._room.set()

