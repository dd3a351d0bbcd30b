"""The consumers of one Pulsar protocol connection: SUBSCRIBE, FLOW, MESSAGE, ACK,
REDELIVER_UNACKNOWLEDGED_MESSAGES, SEEK, GET_LAST_MESSAGE_ID, UNSUBSCRIBE and
CLOSE_CONSUMER.

Each consumer is a core :class:`BrokerConsumer` on the topic's subscription; the door
translates commands into calls on the subscription (``flow``, ``ack``, ``ack_batch``,
``send_back``, ``reset_cursor``) and each core :class:`Delivery` into a MESSAGE frame
(:mod:`magnetar.protocol.messages`). Ownership, subscription types, acks, redelivery
counts and delays are the core's. Permits bound what is sent: the core sends a consumer
no more messages than the FLOWs it got allow. A FLOW may allow 2^32 messages, so the
connection bounds it too: while more than ``max_unsent_bytes`` it wrote are unread by
the client, its consumers' permits are held back from the core (:meth:`Consumers.hold_permits`)
and given back when the client has read (:meth:`Consumers.release_permits`).

The broker closes a consumer itself (CLOSE_CONSUMER, the client looks the topic up and
subscribes again) when its topic stops being served here, when its subscription is
deleted, and after a SEEK (as Pulsar does: the consumers of the subscription start again
from the new position with fresh permits).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.broker.authorization import Action, Request
from magnetar.broker.consumer import BrokerConsumer, Delivery
from magnetar.broker.entry import check_batch_size, view_entry
from magnetar.broker.protocol.errors import server_error
from magnetar.broker.protocol.schemas import declare as declare_schema
from magnetar.broker.subscription import check_read_compacted
from magnetar.broker.subscription_type import InitialPosition, KeySharedPolicy, SubscriptionType
from magnetar.common import masks
from magnetar.common.errors import ConsumerBusy, InvalidArgument, MagnetarError
from magnetar.common.message_id import MessageId, message_id_sentinel
from magnetar.common.names import check_subscription_name
from magnetar.managedledger.position import Position
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands, messages
from magnetar.protocol.frames import Frame

if TYPE_CHECKING:
    from magnetar.broker.authorizer import Authorizer
    from magnetar.broker.service import BrokerService
    from magnetar.broker.subscription import Subscription
    from magnetar.broker.topic import PersistentTopic

log = logging.getLogger(__name__)

Type = pb.BaseCommand.Type


class ConsumerConnection(Protocol):
    """What the consumers use of their connection (``connection.Connection``)."""

    service: BrokerService
    peer: str
    role: str | None
    protocol_version: int
    client_version: str

    @property
    def authorizer(self) -> Authorizer | None:
        """None: authorization off."""

    @property
    def closed(self) -> bool: ...

    @property
    def writable(self) -> bool:
        """The client has read enough of what it was sent for more to go out."""

    def write(self, command: pb.BaseCommand) -> None: ...

    def write_bytes(self, frames: bytes) -> None: ...

    def spawn(self, request: Coroutine[Any, Any, None], name: str) -> None: ...

    def spawn_handler(self, request: Callable[[Frame], Coroutine[Any, Any, None]]) -> Callable[[Frame], None]: ...

    def topic_name(self, value: str | bytes) -> str: ...


@dataclass(eq=False)
class ProtocolConsumer:
    """A consumer of this connection: the client's id for it and the core's consumer."""

    consumer_id: int
    topic: PersistentTopic
    subscription: Subscription
    core: BrokerConsumer
    sizes: dict[Position, int] = field(default_factory=dict)
    """Messages in each entry delivered and not wholly acknowledged (a batch-index ACK
    carries no batch size)."""
    withheld: int = 0
    """Permits the client gave that the core has not been given yet: held while the
    connection's unsent bytes are over their limit."""
    failover: bool = False
    active: bool | None = None
    """What the core said last (Failover): sent once the client knows the consumer."""
    reached_end: bool = False
    """The core said the topic ended: REACHED_END_OF_TOPIC, once the client knows the consumer."""


def understands_end_of_topic(conn: ConsumerConnection) -> bool:
    """Whether the client handles REACHED_END_OF_TOPIC: protocol v9 and later (as Pulsar's
    broker checks), except the C++ client (and those built on it: pulsar-client for
    Python, Node.js, C): its connection has no case for the command, takes it for an
    invalid message and closes the connection -- its consumer would reconnect and be
    told again, forever. Its readers learn the end from GET_LAST_MESSAGE_ID instead
    (``has_message_available``)."""
    return conn.protocol_version >= 9 and not conn.client_version.startswith("Pulsar-CPP")


class Consumers:
    """The consumers of ``connection``, keyed by the client's consumer id."""

    def __init__(self, connection: ConsumerConnection, max_message_size: int = 5 * 1024 * 1024) -> None:
        self.connection = connection
        self.max_message_size = max_message_size
        """The most messages an entry can hold: a batch size an ACK claims beyond it is a lie."""
        self.consumers: dict[int, ProtocolConsumer] = {}
        self._subscribing: set[int] = set()

    def handlers(self) -> dict[int, Callable[[Frame], None]]:
        spawn = self.connection.spawn_handler
        return {
            Type.SUBSCRIBE: spawn(self._subscribe),
            Type.FLOW: self._guarded(self._flow),
            Type.ACK: self._guarded(self._ack),
            Type.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._guarded(self._redeliver),
            Type.CLOSE_CONSUMER: self._close_consumer,
            Type.UNSUBSCRIBE: spawn(self._unsubscribe),
            Type.SEEK: spawn(self._seek),
            Type.GET_LAST_MESSAGE_ID: spawn(self._last_message_id),
        }

    def close_all(self) -> None:
        """The connection is gone: every consumer leaves its subscription (what it held is
        delivered again, counted as a redelivery)."""
        consumers, self.consumers = self.consumers, {}
        for c in consumers.values():
            c.subscription.remove_consumer(c.core)

    def hold_permits(self) -> None:
        """The client is not reading: take back the permits the core has not used, so
        that nothing more is dispatched to this connection (a FLOW may give 2^32)."""
        for c in self.consumers.values():
            unused = c.core.permits
            if unused > 0:
                c.core.permits -= unused
                c.withheld += unused

    def release_permits(self) -> None:
        """The client has read: give the core back the permits held."""
        for c in list(self.consumers.values()):
            if c.withheld:
                withheld, c.withheld = c.withheld, 0
                c.subscription.flow(c.core, withheld)

    # -- helpers ----------------------------------------------------------------------
    def _get(self, consumer_id: int, command: str) -> ProtocolConsumer:
        c = self.consumers.get(consumer_id)
        if c is None:
            raise InvalidArgument(f"{command}: no consumer {consumer_id} on this connection")
        return c

    def _guarded(self, handler: Callable[[Frame], None]) -> Callable[[Frame], None]:
        """A handler whose bad input is answered with ERROR (the connection goes on)."""

        def handle(frame: Frame) -> None:
            try:
                handler(frame)
            except MagnetarError as exc:
                log.info("pulsar connection %s: %s refused: %s", self.connection.peer, frame.type_name, exc.message)
                self.connection.write(commands.error(commands.request_id(frame.command), server_error(exc), exc.message))

        return handle

    # -- SUBSCRIBE --------------------------------------------------------------------
    async def _subscribe(self, frame: Frame) -> None:
        s = frame.command.subscribe
        rid, cid = s.request_id, s.consumer_id
        conn = self.connection
        if cid in self.consumers:  # the client asks again for one it has: it has it
            conn.write(commands.success(rid))
            return
        if cid in self._subscribing:
            conn.write(commands.error(rid, pb.ServiceNotReady, f"consumer {cid} is being subscribed already"))
            return
        self._subscribing.add(cid)
        try:
            consumer = await self._attach(s)
        except MagnetarError as exc:
            log.info("pulsar connection %s: SUBSCRIBE %s to %r refused: %s", conn.peer, s.subscription, s.topic, exc.message)
            conn.write(commands.error(rid, server_error(exc), exc.message))
            return
        except Exception as exc:
            log.exception("SUBSCRIBE %s to %r failed", s.subscription, s.topic)
            conn.write(commands.error(rid, pb.UnknownError, f"internal error: {exc!r}"))
            return
        finally:
            self._subscribing.discard(cid)
        if conn.closed:  # the socket closed while subscribing: nobody reads this consumer
            consumer.subscription.remove_consumer(consumer.core)
            return
        self.consumers[cid] = consumer
        conn.write(commands.success(rid))
        if consumer.active is not None:
            self._tell_active(consumer, consumer.active)
        if consumer.reached_end:
            self._tell_end_of_topic(consumer)
        self._watch_access(consumer, Request(Action.CONSUME, consumer.topic.name, s.subscription))

    def _watch_access(self, consumer: ProtocolConsumer, request: Request) -> None:
        """While the consumer is attached, ask again every recheck interval (as the gRPC
        door's consume stream and this door's producers); refused (a grant revoked), the
        broker closes it, and the client's new SUBSCRIBE gets AuthorizationError."""
        conn = self.connection
        authorizer, role = conn.authorizer, conn.role
        if authorizer is None or role in authorizer.superusers:
            return

        def attached() -> bool:
            return self.consumers.get(consumer.consumer_id) is consumer and not conn.closed

        async def watch() -> None:
            while attached():
                await asyncio.sleep(authorizer.recheck_interval_s)
                try:
                    allowed = await authorizer.allowed(role, request)
                except MagnetarError as exc:  # ZooKeeper away: the last decision stands
                    log.info("could not check %r's access to %s again: %s", role, request.what(), exc.message)
                    continue
                if not allowed and attached():
                    log.warning("refused: role %r may no longer %s; its consumer is closed", role, request.what())
                    self._closed_by_broker(consumer, f"role {role!r} is no longer authorized to {request.what()}")
                    return

        conn.spawn(watch(), name=f"access:consumer {consumer.consumer_id}")

    async def _attach(self, s: pb.CommandSubscribe) -> ProtocolConsumer:
        conn = self.connection
        service = conn.service
        if not isinstance(s.subscription, str):
            raise InvalidArgument(f"subscription name {s.subscription!r} is not UTF-8")
        check_subscription_name(s.subscription)
        topic_name = conn.topic_name(s.topic)
        try:
            sub_type = SubscriptionType(s.subType)
            initial = InitialPosition(s.initialPosition)
        except ValueError as exc:
            raise InvalidArgument(f"SUBSCRIBE: {exc}") from None
        key_shared = None
        if sub_type == SubscriptionType.Key_Shared and s.HasField("keySharedMeta"):
            m = s.keySharedMeta
            key_shared = KeySharedPolicy.of(
                m.keySharedMode, [(r.start, r.end) for r in m.hashRanges], m.allowOutOfOrderDelivery
            )  # fmt: skip
        if conn.authorizer is not None:
            await conn.authorizer.check(conn.role, Request(Action.CONSUME, topic_name, s.subscription))
        service.check_serving(f"subscribe to {topic_name}")
        topic = await service.get_topic(topic_name)
        await declare_schema(service, topic_name, s.schema if s.HasField("schema") else None, consumer=True)
        start, inclusive = None, False
        if s.HasField("start_message_id"):
            mid = s.start_message_id
            ledger, entry = commands.position_of(mid)
            wanted = MessageId(topic.partition, ledger, entry, -1)
            start = topic.position_of(wanted)
            # The client drops what precedes its start id (inclusive or not) at entry and
            # batch-index level: the broker starts at the entry itself.
            inclusive = message_id_sentinel(wanted) is None
        if s.read_compacted:  # refused before the subscription is made
            check_read_compacted(sub_type, topic)
        subscription = await topic.subscribe(
            s.subscription, sub_type, initial, start=start, inclusive=inclusive, durable=s.durable,
            properties={kv.key: kv.value for kv in s.subscription_properties},
        )  # fmt: skip
        cid = s.consumer_id
        holder: list[ProtocolConsumer] = []
        core = BrokerConsumer(
            s.consumer_name or service.new_producer_name(), s.priority_level,
            sink=lambda out: self._deliver(holder[0], out),
            on_reset=lambda: self._closed_by_broker(holder[0], "its subscription was moved (seek)", later=True),
            on_close=lambda exc: self._closed_by_broker(holder[0], exc.message),
            on_active=lambda active: self._tell_active(holder[0], active),
            on_end_of_topic=lambda: self._tell_end_of_topic(holder[0]),
            # Pulsar's maxUnackedMessagesPerConsumer: Shared and Key_Shared only.
            max_unacked=service.config.max_unacked_messages_per_consumer
            if sub_type in (SubscriptionType.Shared, SubscriptionType.Key_Shared) else 0,
            key_shared=key_shared,
            read_compacted=s.read_compacted,
        )  # fmt: skip
        consumer = ProtocolConsumer(cid, topic, subscription, core, failover=sub_type == SubscriptionType.Failover)
        holder.append(consumer)
        subscription.add_consumer(core, sub_type)
        return consumer

    # -- MESSAGE ----------------------------------------------------------------------
    def _deliver(self, consumer: ProtocolConsumer, out: list[Delivery]) -> None:
        conn = self.connection
        if not conn.service.serving():  # the topic is being unloaded: nothing goes out
            return
        partition = consumer.topic.partition
        frames = []
        for d in out:
            data = d.entry
            if messages.is_pulsar_entry(data):
                message = data
            else:
                metadata, payload = messages.metadata_and_payload(view_entry(data))
                message = messages.checksummed(metadata, payload)
            command = pb.BaseCommand(type=Type.MESSAGE)
            m = command.message
            m.consumer_id = consumer.consumer_id
            m.message_id.ledgerId, m.message_id.entryId = d.position[0], d.position[1]
            m.message_id.partition = partition
            m.redelivery_count = d.redelivery_count
            if d.skipped:
                m.ack_set.extend(messages.ack_set_words(masks.full_mask(d.messages) & ~d.skipped, d.messages))
            consumer.sizes[d.position] = d.messages
            frames.append(messages.message_frame(command, message))
        conn.write_bytes(b"".join(frames))

    def _tell_active(self, consumer: ProtocolConsumer, active: bool) -> None:
        """ACTIVE_CONSUMER_CHANGE (Failover only, as Pulsar), once SUCCESS has gone out."""
        consumer.active = active
        if consumer.failover and self.consumers.get(consumer.consumer_id) is consumer:
            self.connection.write(pb.BaseCommand(
                type=Type.ACTIVE_CONSUMER_CHANGE,
                active_consumer_change=pb.CommandActiveConsumerChange(consumer_id=consumer.consumer_id, is_active=active),
            ))  # fmt: skip

    def _tell_end_of_topic(self, consumer: ProtocolConsumer) -> None:
        """REACHED_END_OF_TOPIC (the topic was terminated and the consumer has got every
        message), once SUCCESS has gone out."""
        consumer.reached_end = True
        if self.consumers.get(consumer.consumer_id) is consumer and understands_end_of_topic(self.connection):
            self.connection.write(pb.BaseCommand(
                type=Type.REACHED_END_OF_TOPIC,
                reachedEndOfTopic=pb.CommandReachedEndOfTopic(consumer_id=consumer.consumer_id),
            ))  # fmt: skip

    def _closed_by_broker(self, consumer: ProtocolConsumer, why: str, later: bool = False) -> None:
        """Tell the client its consumer is closed (it subscribes again) and detach it."""
        if self.consumers.get(consumer.consumer_id) is not consumer:
            return
        del self.consumers[consumer.consumer_id]
        log.info("pulsar connection %s: closing consumer %d: %s", self.connection.peer, consumer.consumer_id, why)
        self.connection.write(pb.BaseCommand(
            type=Type.CLOSE_CONSUMER, close_consumer=pb.CommandCloseConsumer(consumer_id=consumer.consumer_id, request_id=0),
        ))  # fmt: skip
        if later:  # called while the subscription goes over its consumers
            asyncio.get_running_loop().call_soon(consumer.subscription.remove_consumer, consumer.core)
        else:
            consumer.subscription.remove_consumer(consumer.core)

    # -- FLOW, ACK, REDELIVER ---------------------------------------------------------
    def _flow(self, frame: Frame) -> None:
        flow = frame.command.flow
        c = self._get(flow.consumer_id, "FLOW")
        if self.connection.writable:
            c.subscription.flow(c.core, flow.messagePermits)
        else:
            c.withheld += flow.messagePermits

    def _ack(self, frame: Frame) -> None:
        ack = frame.command.ack
        try:
            c = self._get(ack.consumer_id, "ACK")
            self._apply_ack(c, ack)
        except MagnetarError as exc:
            if ack.HasField("request_id"):
                self.connection.write(_ack_response(ack, server_error(exc), exc.message))
                return
            raise
        if ack.HasField("request_id"):
            self.connection.write(_ack_response(ack))

    def _apply_ack(self, c: ProtocolConsumer, ack: pb.CommandAck) -> None:
        whole: list[Position] = []
        partial: list[tuple[Position, int, int]] = []
        for mid in ack.message_id:
            position = Position(*commands.position_of(mid))
            if mid.ack_set:
                # The size the consumer was sent; else (acked after a nack sent the entry
                # back) the client's, which must be one an entry can have: a mask of 2^31
                # bits would stall the broker and be stored in the cursor.
                size = c.sizes.get(position) or mid.batch_size
                if not size:
                    raise InvalidArgument(f"ACK of messages of entry {position}, which was not delivered to this consumer")
                check_batch_size(position, size, self.max_message_size)  # the core's bound, before a mask is built
                acked = masks.full_mask(size) & ~messages.mask_of_ack_set(mid.ack_set)
                if acked == masks.full_mask(size):
                    whole.append(position)
                elif acked:
                    partial.append((position, size, acked))
            elif position[1] >= 0:  # a cumulative ack of entry -1: nothing of the ledger yet
                whole.append(position)
        if ack.ack_type == pb.CommandAck.Cumulative:
            if partial:  # acked through the entry before, and some messages of this one
                position = partial[0][0]
                before = [p for p in c.core.pending if p < position]
                if before:
                    c.subscription.ack(c.core, [max(before)], cumulative=True)
                c.subscription.ack_batch(c.core, partial)
            elif whole:
                c.subscription.ack(c.core, whole, cumulative=True)
        else:
            if whole:
                c.subscription.ack(c.core, whole, cumulative=False)
            if partial:
                c.subscription.ack_batch(c.core, partial)
        _forget_released(c)

    def _redeliver(self, frame: Frame) -> None:
        r = frame.command.redeliverUnacknowledgedMessages
        c = self._get(r.consumer_id, "REDELIVER_UNACKNOWLEDGED_MESSAGES")
        ids = [Position(*commands.position_of(m)) for m in r.message_ids]
        c.subscription.send_back(c.core, ids or None)
        _forget_released(c)

    # -- closing ----------------------------------------------------------------------
    def _close_consumer(self, frame: Frame) -> None:
        close = frame.command.close_consumer
        c = self.consumers.pop(close.consumer_id, None)
        if c is not None:
            c.subscription.remove_consumer(c.core)
        self.connection.write(commands.success(close.request_id))  # closing one that is gone is done

    async def _unsubscribe(self, frame: Frame) -> None:
        u = frame.command.unsubscribe
        try:
            c = self._get(u.consumer_id, "UNSUBSCRIBE")
            others = [o for o in c.subscription.consumers if o is not c.core]
            if others:
                raise ConsumerBusy(
                    f"subscription {c.subscription.name!r} on {c.topic.name} has other consumers; cannot unsubscribe"
                )
            del self.consumers[u.consumer_id]
            c.subscription.remove_consumer(c.core)
            if c.subscription.durable:
                await c.topic.delete_subscription(c.subscription.name, force=True)
        except MagnetarError as exc:
            self.connection.write(commands.error(u.request_id, server_error(exc), exc.message))
            return
        self.connection.write(commands.success(u.request_id))

    # -- SEEK, GET_LAST_MESSAGE_ID ----------------------------------------------------
    async def _seek(self, frame: Frame) -> None:
        seek = frame.command.seek
        try:
            c = self._get(seek.consumer_id, "SEEK")
            if seek.HasField("message_id"):
                ledger, entry = commands.position_of(seek.message_id)
                position = c.topic.position_of(MessageId(c.topic.partition, ledger, entry, -1))
            elif seek.HasField("message_publish_time"):
                position = await c.topic.position_for_time(seek.message_publish_time)
            else:
                raise InvalidArgument("SEEK needs a message id or a publish time")
            self.connection.service.check_serving(f"seek on {c.topic.name}")
            await c.subscription.reset_cursor(position)
        except MagnetarError as exc:
            self.connection.write(commands.error(seek.request_id, server_error(exc), exc.message))
            return
        self.connection.write(commands.success(seek.request_id))

    async def _last_message_id(self, frame: Frame) -> None:
        g = frame.command.getLastMessageId
        try:
            c = self._get(g.consumer_id, "GET_LAST_MESSAGE_ID")
            ledger, entry, batch_index = await c.topic.last_message_id(c.core.read_compacted)
        except MagnetarError as exc:
            self.connection.write(commands.error(g.request_id, server_error(exc), exc.message))
            return
        response = pb.CommandGetLastMessageIdResponse(
            request_id=g.request_id, last_message_id=commands.message_id(ledger, entry, c.topic.partition, batch_index),
        )  # fmt: skip
        mark = c.subscription.cursor.mark_delete_position
        if mark is not None:
            response.consumer_mark_delete_position.CopyFrom(commands.message_id(mark[0], mark[1], c.topic.partition))
        self.connection.write(pb.BaseCommand(type=Type.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=response))


def _forget_released(c: ProtocolConsumer) -> None:
    """Drop the sizes of entries the consumer no longer holds (delivered again, they are
    recorded again)."""
    if len(c.sizes) > len(c.core.pending):
        for p in [p for p in c.sizes if p not in c.core.pending]:
            del c.sizes[p]


def _ack_response(ack: pb.CommandAck, code: pb.ServerError | None = None, message: str = "") -> pb.BaseCommand:
    response = pb.CommandAckResponse(consumer_id=ack.consumer_id, request_id=ack.request_id)
    if code is not None:
        response.error = code
        response.message = commands.error_text(message)
    return pb.BaseCommand(type=Type.ACK_RESPONSE, ackResponse=response)
