"""The consumer of one topic or one partition: a ``Consume`` stream feeding a receive queue.

Flow control: after (re)subscribing the consumer grants ``receiver_queue_size``
permits; as the application takes messages it grants them back in halves of the
queue, as Pulsar does. Messages a delivery's ``ack_set`` masks out are not queued and
cost no permits. One writer task sends permits, grouped acks (entry acks and batch-index
masks) and redelivery requests; it runs when something must go now, or on its one timer,
armed only while something waits for a time (grouped acks, negative acks, ack timeouts,
incomplete chunked messages): an idle consumer does not wake. On reconnect, and on a
``CursorReset`` (a seek), the messages still queued from this partition are dropped and
the full queue is granted again; a reset also forgets every ack, nack and ack-timeout of
the old position.

``seek`` and ``unsubscribe`` are requests on the same stream, answered by ``RequestDone``
(:mod:`.requests`). Pending acks are flushed before either, in the same write; while a
seek is in flight, acks taken after it are held back (they may name messages of the old
position) until the answer comes.

A non-durable cursor (a reader's) does not outlive its stream: on reconnect the reader
subscribes again after the last message the application took (the rest of its batch is
skipped here), or at its last seek target when it took nothing since.
"""

from __future__ import annotations

import asyncio
import logging
import time

from magnetar.common import masks
from magnetar.common.errors import (
    AlreadyClosed,
    ConsumerBusy,
    MagnetarError,
    NotConnected,
    TopicNotFound,
    from_code,
)
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.proto.v1 import broker_pb2 as pb

from .acks import AckTracker, PendingAcks, Position
from .chunks import ChunkedMessageAssembler
from .connection import BrokerStream, ConnectionPool
from .handler import ConnectionHandler
from .message import Message, unpack_entry
from .options import ConsumerConfig, ConsumerType
from .receive_queue import ReceiveQueue
from .requests import PendingRequests
from .schemas import MessageDecoder, declared
from .session import SessionStream

log = logging.getLogger(__name__)

Queued = tuple["PartitionConsumer", Message]


class PartitionConsumer(ConnectionHandler):
    kind = "consumer"

    def __init__(
        self,
        pool: ConnectionPool,
        topic: str,
        partition: int,
        conf: ConsumerConfig,
        consumer_name: str,
        queue: ReceiveQueue[Queued],
    ) -> None:
        super().__init__(pool, topic)
        self.partition = partition
        self.conf = conf
        self.consumer_name = consumer_name
        self.tolerate_deletion = False
        """A pattern consumer's: the topic's deletion (TopicNotFound) ends this partition
        without failing the queue its other topics share (discovery then leaves it)."""
        self.queue_size = max(1, conf.receiver_queue_size)
        self.acks = AckTracker()
        self.chunks = ChunkedMessageAssembler(
            conf.max_pending_chunked_message, conf.auto_ack_oldest_chunked_message_on_queue_full,
            conf.expire_time_of_incomplete_chunked_message_ms,
        )  # fmt: skip
        self.last_taken: MessageId | None = None
        self.resets = 0  # CursorResets received
        self.reached_end_of_topic = False
        """The broker said the topic was terminated and every message of it was sent here."""
        self._queue = queue
        self._taken = 0  # messages taken by the application since the last Flow
        self._flow = 0  # permits to grant
        self._redeliver: list[Position] = []
        self._redeliver_all = False
        self._nack_due: dict[Position, float] = {}
        self._wakeup = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._writer: asyncio.Task[None] | None = None
        # The writer's one timer: armed only while something is due later (grouped acks,
        # negative acks, ack timeouts, incomplete chunked messages), at the earliest such
        # time (time.monotonic()); an idle consumer has none and never wakes.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._requests = PendingRequests()
        self._seeks = 0  # seeks written and not answered yet: acks are held back
        self._unsubscribe_id = 0
        self.dead_letter_policy: pb.DeadLetterPolicy | None = None
        """The retry/dead-letter policy the broker applies (names resolved)."""
        # A non-durable cursor (a reader) is gone when the stream breaks: it is opened
        # again where the application is, i.e. after the last message it took, or at the
        # last seek target; batch messages up to _skip_through were read already.
        self._restart_at: MessageId | None = None
        self._skip_through: MessageId | None = None
        self._decoder = MessageDecoder.of(conf.schema, topic, pool.writer_schemas)
        # After a seek to an id: the id, whose messages before it (and it too, unless
        # start_message_id_inclusive) are not given to the application, as pulsar-client's
        # startMessageId; armed by the seek's cursor reset, dropped once a later entry comes.
        self._seeking_to: MessageId | None = None
        self._sought: MessageId | None = None

    # -- stream ---------------------------------------------------------------------
    async def _open(self, address: str, target: str) -> BrokerStream | SessionStream:
        call = self.pool.open_consume(address, target)
        subscribe = pb.Subscribe(
            topic=self.topic,
            subscription=self.conf.subscription_name,
            type=int(self.conf.consumer_type),  # type: ignore[arg-type]
            consumer_name=self.consumer_name,
            priority_level=self.conf.priority_level,
            initial_position=int(self.conf.initial_position),  # type: ignore[arg-type]
            receiver_queue_size=self.queue_size,
            non_durable=self.conf.non_durable,
            schema=declared(self.conf.schema),
            read_compacted=self.conf.is_read_compacted,
            subscription_properties=self.conf.subscription_properties,
        )
        subscribe.enable_retry = self.conf.enable_retry
        ks = self.conf.key_shared_policy
        if ks is not None and self.conf.consumer_type == ConsumerType.KeyShared:
            subscribe.key_shared_meta.CopyFrom(
                pb.KeySharedMeta(
                    mode=int(ks.key_shared_mode),  # type: ignore[arg-type]
                    hash_ranges=[pb.HashRange(start=s, end=e) for s, e in ks.sticky_ranges],
                    allow_out_of_order_delivery=ks.allow_out_of_order_delivery,
                )
            )
        policy = self.conf.dead_letter_policy
        if policy is not None:
            subscribe.dead_letter_policy.CopyFrom(
                pb.DeadLetterPolicy(
                    max_redeliver_count=policy.max_redeliver_count or 0,
                    retry_letter_topic=policy.retry_letter_topic or "",
                    dead_letter_topic=policy.dead_letter_topic or "",
                    initial_subscription_name=policy.initial_subscription_name or "",
                )
            )
        start, subscribe.start_message_id_inclusive = self._start_position()
        if start is not None:
            subscribe.start_message_id.CopyFrom(start.to_proto())
        resp = await call.open(pb.ConsumeRequest(subscribe=subscribe), self.pool.operation_timeout_s)
        if resp.HasField("error"):
            call.cancel()
            raise from_code(resp.error.code, resp.error.message)
        if not resp.HasField("subscribed"):
            call.cancel()
            raise MagnetarError(f"{target} answered the subscribe with {resp}")
        subscribed = resp.subscribed
        self.consumer_name = subscribed.consumer_name or self.consumer_name
        if subscribed.HasField("dead_letter_policy"):
            self.dead_letter_policy = subscribed.dead_letter_policy
        return call

    def _start_position(self) -> tuple[MessageId | None, bool]:
        """Where the subscribe asks the cursor to start, and whether inclusive."""
        self._skip_through = None
        if not self.conf.non_durable:
            return self.conf.start_message_id, self.conf.start_message_id_inclusive
        last = self.last_taken
        if last is not None:
            if last.batch_index() < 0:
                return last, False
            self._skip_through = last  # the rest of its batch is still to read
            return last.entry_id_only(), True
        if self._restart_at is not None:
            return self._restart_at, self._restart_at != MessageId.latest
        return self.conf.start_message_id, self.conf.start_message_id_inclusive

    def _connected(self) -> None:
        self._queue.remove_if(lambda item: item[0] is self)  # the broker redelivers them
        self.chunks.clear()  # and the chunks held
        self._taken = 0
        self._flow = self.queue_size
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name=f"consumer-writer:{self.topic}")
        self._wakeup.set()

    def _retry_on_reconnect(self, exc: MagnetarError) -> bool:
        # After a broker failover the old consumer may still hold the subscription.
        return exc.retriable or isinstance(exc, ConsumerBusy)

    async def _read(self, call: BrokerStream | SessionStream) -> MagnetarError:
        try:
            while True:
                resp = await call.read()
                if resp is None:
                    return NotConnected(f"broker {self.broker_address} closed the consume stream")
                kind = resp.WhichOneof("kind")
                if kind == "deliveries":
                    if self._decoder is not None:  # the schema versions they name, fetched once
                        await self._decoder.prepare(resp.deliveries.deliveries)
                    for delivery in resp.deliveries.deliveries:
                        self._on_delivery(delivery)
                elif kind == "reset":
                    self._on_cursor_reset()
                elif kind == "end_of_topic":
                    self.reached_end_of_topic = True
                elif kind == "done":
                    self._on_done(resp.done)
                elif kind == "error":
                    return from_code(resp.error.code, resp.error.message)
        except MagnetarError as exc:
            return exc

    def _on_delivery(self, delivery: pb.Delivery) -> None:
        try:
            messages, batched = unpack_entry(self.topic, self.partition, delivery, self._decoder)
        except MagnetarError:
            log.exception("consumer on %s: dropping an undecodable entry", self.topic)
            self._taken += 1
            return
        # Messages in the ack_set are not for this consumer: the broker charged no
        # permits for them, so none go back. Messages acked here already (a redelivery
        # racing with our acks) were charged: their permits go back.
        not_for_us = masks.from_bytes(delivery.ack_set) if delivery.ack_set else 0
        pos = (delivery.message_id.ledger_id, delivery.message_id.entry_id)
        timeout_ms = self.conf.unacked_messages_timeout_ms
        now = time.monotonic()
        acked = self.acks.on_delivery(pos, len(messages), batched, now, bool(timeout_ms), not_for_us)
        if timeout_ms:
            self._arm(now + timeout_ms / 1000)
        if self._skip_through is not None:
            acked |= self._read_already(pos)
        if self._sought is not None:
            acked |= self._before_start(pos, batched, len(messages))
        if messages and messages[0]._chunk is not None:
            self._on_chunk(messages[0], bool(acked or not_for_us))
            return
        put = self._queue.put
        skip = not_for_us | acked
        if not skip:
            for msg in messages:
                put((self, msg))
            return
        skipped = 0
        for i, msg in enumerate(messages):
            if not skip >> i & 1:
                put((self, msg))
            elif not not_for_us >> i & 1:
                skipped += 1
        if skipped:
            self._grant(skipped)

    def _on_chunk(self, chunk: Message, skip: bool) -> None:
        """A chunk of a chunked message: held until its message is whole (its permit goes
        back at once; the whole message's goes back when it is taken)."""
        self._grant(1)
        if skip:  # acked here already, or not for this consumer
            return
        info = chunk._chunk
        assert info is not None
        done = self.chunks.add(chunk, chunk.message_id(), chunk.data(), info)
        expiry = self.chunks.next_expiry()
        if expiry is not None:
            self._arm(expiry)
        for mid in done.ack:
            self.acks.ack(mid)
        if done.ack:
            self._maybe_flush()
        if done.message is not None:
            first, payload, mid = done.message
            assert isinstance(first, Message)
            self._taken -= 1  # the whole message's permit goes back when it is taken
            self._queue.put((self, first._reassembled(payload, mid)))

    def _read_already(self, pos: Position) -> int:
        """Mask of the messages of ``pos`` a reader took before it reconnected."""
        skip = self._skip_through
        assert skip is not None
        if pos < (skip.ledger_id(), skip.entry_id()):
            return 0
        self._skip_through = None  # the broker is past it now
        return (1 << (skip.batch_index() + 1)) - 1 if pos == (skip.ledger_id(), skip.entry_id()) else 0

    def _before_start(self, pos: Position, batched: bool, count: int) -> int:
        """Mask of the messages of ``pos`` before the id sought (:meth:`seek`), as
        pulsar-client filters them: of the entry sought, a single message when the seek is
        exclusive (``start_message_id_inclusive`` off, the default), and of a batch the
        messages before the batch index sought (and that one too when exclusive); an id
        without a batch index keeps a whole batch."""
        sought = self._sought
        assert sought is not None
        at = (sought.ledger_id(), sought.entry_id())
        if pos != at:
            if pos > at:
                self._sought = None  # the broker is past it now
            return 0
        inclusive = self.conf.start_message_id_inclusive
        if not batched:
            return 0 if inclusive else 1
        through = sought.batch_index() - (1 if inclusive else 0)
        return (1 << min(through + 1, count)) - 1 if through >= 0 else 0

    def _on_cursor_reset(self) -> None:
        """The subscription moved: what we hold is void; start over from the new position."""
        self.reached_end_of_topic = False
        dropped = self._queue.remove_if(lambda item: item[0] is self)
        self.acks.reset()
        self.chunks.clear()
        self._nack_due.clear()
        self._redeliver.clear()
        self._redeliver_all = False
        self._taken = 0
        self._flow = self.queue_size  # the broker starts this consumer from 0 permits
        self.last_taken = self._skip_through = None
        self._sought = self._seeking_to  # None: not our seek (an admin's reset)
        self.resets += 1
        log.debug("consumer on %s: cursor reset, %d queued messages dropped", self.topic, dropped)
        self._wakeup.set()

    # -- flow ------------------------------------------------------------------------
    def message_taken(self, msg: Message) -> None:
        """The application took ``msg`` from the queue: its permit may go back."""
        self.last_taken = msg.message_id()
        self._grant(1)

    def batch_taken(self, last: Message, count: int) -> None:
        """The application took ``count`` messages of this partition at once (a
        ``batch_receive``), ``last`` the latest: their permits, and any held back, go back
        in one Flow now (a batch is already a grouping; holding it until half the queue
        is taken could keep the next batch from filling)."""
        self.last_taken = last.message_id()
        self._flow += self._taken + count
        self._taken = 0
        self._wakeup.set()

    def grant_held(self) -> None:
        """Grant now the permits held back until half the queue is taken: a batch waiting
        for the queue to fill would otherwise wait for messages the broker cannot send."""
        if self._taken:
            self._flow += self._taken
            self._taken = 0
            self._wakeup.set()

    def _grant(self, n: int) -> None:
        self._taken += n
        if self._taken >= max(1, self.queue_size // 2):
            self._flow += self._taken
            self._taken = 0
            self._wakeup.set()

    # -- acks ------------------------------------------------------------------------
    def ack(self, mid: MessageId) -> None:
        for one in _chunks_of(mid):  # a chunked message: every chunk
            if self.acks.ack(one):  # the whole entry is acked: a pending nack of it is moot
                self._nack_due.pop((one.ledger_id(), one.entry_id()), None)
        self._maybe_flush()

    def ack_cumulative(self, mid: MessageId) -> None:
        self.acks.ack_cumulative(mid)
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self.acks.pending >= self.conf.ack_group_max_size or self.conf.ack_group_time_ms <= 0:
            self._wakeup.set()
        elif self.acks.pending:
            self._arm(time.monotonic() + self.conf.ack_group_time_ms / 1000)

    def nack(self, mid: MessageId, redelivery_count: int = 0) -> None:
        """Redeliver ``mid`` after the negative-ack delay: the backoff's for a message
        delivered ``redelivery_count`` times before, else the fixed delay (a bare id
        counts 0, as the Java client's negativeAcknowledge(MessageId))."""
        backoff = self.conf.negative_ack_redelivery_backoff
        delay_ms = backoff.next(redelivery_count) if backoff is not None else self.conf.negative_ack_redelivery_delay_ms
        due = time.monotonic() + delay_ms / 1000
        for one in _chunks_of(mid):  # a chunked message: every chunk
            pos = (one.ledger_id(), one.entry_id())
            self.acks.forget_unacked(pos)
            self._nack_due[pos] = due
        if delay_ms <= 0:
            self._wakeup.set()
        else:
            self._arm(due)

    def redeliver_all(self) -> None:
        """Ask for every unacked message again (the queued ones are dropped and re-granted)."""
        dropped = self._queue.remove_if(lambda item: item[0] is self)
        self._redeliver_all = True
        self._flow += dropped
        self._wakeup.set()

    def _due_redeliveries(self) -> list[Position]:
        expired = self.chunks.expire()  # incomplete chunked messages past their time: acked
        for mid in expired:
            self.acks.ack(mid)
        now = time.monotonic()
        due = [p for p, t in self._nack_due.items() if t <= now]
        for p in due:
            del self._nack_due[p]
        if self.conf.unacked_messages_timeout_ms:
            due.extend(self.acks.expired(now, self.conf.unacked_messages_timeout_ms / 1000))
        return due

    # -- the one writer ---------------------------------------------------------------
    def _arm(self, due: float) -> None:
        """Have the writer run by ``due`` (``time.monotonic()``): the timer moves only
        earlier here; the writer re-arms it for what is left after each run. Before the
        first stream there is no writer: its first run (on connecting) arms what is due."""
        if self._writer is None or self._closed:
            return
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        self._timer_due = due
        self._timer = self._writer.get_loop().call_later(max(0.0, due - time.monotonic()), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._wakeup.set()

    def _next_due(self) -> float | None:
        """The earliest time something held here must go out (None: nothing waits)."""
        dues: list[float] = []
        if self.acks.pending and self.conf.ack_group_time_ms > 0:  # held back by a seek, or a failed write
            dues.append(time.monotonic() + self.conf.ack_group_time_ms / 1000)
        if self._nack_due:
            dues.append(min(self._nack_due.values()))
        if self.conf.unacked_messages_timeout_ms:
            oldest = self.acks.oldest_unacked()
            if oldest is not None:
                dues.append(oldest + self.conf.unacked_messages_timeout_ms / 1000)
        expiry = self.chunks.next_expiry()
        if expiry is not None:
            dues.append(expiry)
        return min(dues) if dues else None

    def _rearm(self) -> None:
        """Set the timer for what is still held after a run of the writer, or none. A
        timer armed for earlier stays (what armed it, e.g. an ack taken during the run,
        keeps its time; if that went out already, the writer runs once for nothing)."""
        due = self._next_due()
        if due is not None:
            self._arm(due)
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _write_loop(self) -> None:
        # Woken by what must go now (permits, a full ack group, a redelivery, a seek's
        # end) or by the timer (see _arm); an idle consumer sleeps here without a timer.
        while not self._closed:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.write_pending()
            except Exception:  # a writer that dies would hang the consumer: log and go on
                log.exception("consumer on %s: sending acks/permits failed", self.topic)
            self._rearm()

    async def write_pending(self, then: pb.ConsumeRequest | None = None) -> None:
        """Send pending acks, redelivery requests and permits, then ``then`` if given.

        Raises:
            NotConnected: ``then`` was given and could not be written (without ``then``
                nothing raises: what failed is kept for the next stream).
        """
        async with self._write_lock:
            call = self._call
            self._redeliver.extend(self._due_redeliveries())
            if call is None:
                if then is not None:
                    raise NotConnected(f"consumer on {self.topic} is not connected (reconnecting)")
                return  # everything stays queued until the stream is back
            hold = then is None and self._seeks > 0
            acks = PendingAcks([], None, []) if hold else self.acks.take()
            requests = self._ack_requests(acks)
            redeliver: list[Position] = []
            if not hold:
                redeliver, self._redeliver = self._redeliver, []
                if self._redeliver_all:
                    self._redeliver_all = False
                    requests.append(pb.ConsumeRequest(redeliver=pb.RedeliverUnacknowledged()))
                elif redeliver:
                    ids = [_entry_id(p, self.partition) for p in dict.fromkeys(redeliver)]
                    requests.append(pb.ConsumeRequest(redeliver=pb.RedeliverUnacknowledged(message_ids=ids)))
            flow, self._flow = self._flow, 0
            if flow:
                requests.append(pb.ConsumeRequest(flow=pb.Flow(permits=flow)))
            if then is not None:
                requests.append(then)
            try:
                for req in requests:
                    await call.write(req)
            except Exception as exc:  # the stream broke: keep the acks for the next stream
                log.debug("consumer on %s: write failed: %r", self.topic, exc)
                self.acks.restore(acks)
                self._redeliver.extend(redeliver)
                self._flow += flow
                if then is not None:
                    if isinstance(exc, MagnetarError):
                        raise
                    raise NotConnected(f"the stream to broker {self.broker_address} broke: {exc!r}") from exc

    def _ack_requests(self, acks: PendingAcks) -> list[pb.ConsumeRequest]:
        requests: list[pb.ConsumeRequest] = []
        if acks.cumulative is not None:
            ack = pb.Ack(type=pb.CUMULATIVE, message_ids=[_entry_id(acks.cumulative, self.partition)])
            requests.append(pb.ConsumeRequest(ack=ack))
        individual, batches = acks.individual, acks.batches
        for i in range(0, max(len(individual), len(batches)), 1000):
            ack = pb.Ack(
                type=pb.INDIVIDUAL,
                message_ids=[_entry_id(p, self.partition) for p in individual[i : i + 1000]],
                batch_acks=[
                    pb.BatchIndexAck(
                        message_id=_entry_id(b.position, self.partition), batch_size=b.batch_size, ack_set=b.ack_set()
                    )
                    for b in batches[i : i + 1000]
                ],
            )
            requests.append(pb.ConsumeRequest(ack=ack))
        return requests

    # -- seek and unsubscribe -------------------------------------------------------------
    async def seek(self, message_id: MessageId | None = None, timestamp_ms: int | None = None) -> None:
        """Move the subscription to ``message_id`` or to the first message published at or
        after ``timestamp_ms``; returns once the broker has done it (and this consumer
        has dropped what it held).

        Raises:
            MagnetarError: the broker's error (typed), NotConnected, Timeout.
        """
        self._check_usable()
        request_id = self._requests.new()
        seek = pb.Seek(request_id=request_id)
        if isinstance(message_id, ChunkMessageId):  # from its first chunk: it comes again whole
            message_id = message_id.first_chunk_message_id()
        if message_id is not None:
            seek.message_id.CopyFrom(message_id.to_proto())
        else:
            seek.timestamp_ms = int(timestamp_ms or 0)
        self._seeks += 1
        if message_id not in (MessageId.earliest, MessageId.latest):
            self._seeking_to = message_id
        try:
            try:
                await self.write_pending(pb.ConsumeRequest(seek=seek))
            except BaseException:
                self._requests.forget(request_id)
                raise
            await self._requests.wait(request_id, self.pool.operation_timeout_s, f"seek on {self.topic}")
            # A reader reconnecting before it reads anything starts at the target again
            # (not after a seek to a time: that has no id; it starts at its start id).
            self._restart_at = message_id
        finally:
            self._seeks -= 1
            self._seeking_to = None
            self._wakeup.set()  # what was held back may go now

    async def unsubscribe(self) -> None:
        """Delete the subscription; once the broker has, this consumer is closed (the
        broker ends the stream; it is not reopened).

        Raises:
            MagnetarError: the broker's error (typed; e.g. other consumers are attached),
                NotConnected, Timeout.
        """
        self._check_usable()
        request_id = self._unsubscribe_id = self._requests.new()
        try:
            await self.write_pending(pb.ConsumeRequest(unsubscribe=pb.Unsubscribe(request_id=request_id)))
        except BaseException:
            self._requests.forget(request_id)
            raise
        await self._requests.wait(request_id, self.pool.operation_timeout_s, f"unsubscribe on {self.topic}")

    async def reconsume_later(self, mid: MessageId, delay_ms: int) -> None:
        """Have the broker move the message to the retry topic (or the DLQ) and ack it;
        returns once it has. On Exclusive/Failover the broker redelivers it at once.

        Raises:
            MagnetarError: the broker's refusal (typed), NotConnected, Timeout. The
                message is then not acknowledged: it is negatively acknowledged, so it
                is delivered again after the negative-ack delay (counted as a
                redelivery), as the application would have had it without the retry.
        """
        self._check_usable()
        request_id = self._requests.new()
        request = pb.ReconsumeLater(request_id=request_id, message_id=mid.to_proto(), delay_ms=delay_ms)
        try:
            try:
                await self.write_pending(pb.ConsumeRequest(reconsume_later=request))
            except BaseException:
                self._requests.forget(request_id)
                raise
            await self._requests.wait(request_id, self.pool.operation_timeout_s, f"reconsume_later on {self.topic}")
        except MagnetarError:
            # Without this the broker keeps the message as held by this consumer, which
            # dropped it: it would not come back until the consumer reconnects. A move
            # that went through all the same (a late answer) acked it first; the broker
            # then ignores the redelivery request.
            self.nack(mid)
            raise
        if self.conf.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            # The broker acked it; so does the tracker, which completes a batch's entry ack.
            self.ack(mid)
        else:
            self.acks.forget_unacked((mid.ledger_id(), mid.entry_id()))

    def _on_done(self, done: pb.RequestDone) -> None:
        error = from_code(done.error.code, done.error.message) if done.HasField("error") else None
        if done.request_id == self._unsubscribe_id and error is None:
            self._closed = True  # the broker ends the stream now: no reconnect
        self._requests.done(done.request_id, error)

    def _disconnected(self) -> None:
        self._requests.fail_all(NotConnected(f"the stream of the consumer on {self.topic} broke"))

    def _fail(self, exc: MagnetarError) -> None:
        self.failed = exc
        self._closed = True
        log.warning("consumer %s on %s failed: %s", self.consumer_name, self.topic, exc)
        self._requests.fail_all(exc)
        if not (self.tolerate_deletion and isinstance(exc, TopicNotFound)):
            self._queue.fail(exc)

    async def _end_stream(self) -> None:
        """Half-close the stream and wait (bounded) until the broker ended it: by then the
        broker has detached this consumer, so an Exclusive subscribe right after the close
        is not refused as busy (Pulsar's CloseConsumer is answered too)."""
        self._closed = True  # the connection task returns at the end of the stream
        call, task = self._call, self._task
        if call is None or task is None:
            return
        try:
            async with self._write_lock:
                await call.done_writing()
            await asyncio.wait_for(asyncio.shield(task), self.pool.operation_timeout_s)
        except (TimeoutError, MagnetarError):
            pass

    async def close(self, flush: bool = True) -> None:
        """Send pending acks, end the stream and stop. ``flush=False`` (``Client.shutdown``):
        cancel the stream at once; acks not sent yet are dropped and the broker redelivers
        those messages, as after a crash."""
        if self._released:
            return
        if flush and self.connected:
            try:
                await asyncio.wait_for(self.write_pending(), self.pool.operation_timeout_s)
            except (TimeoutError, MagnetarError):
                pass
            await self._end_stream()
        await self._stop()
        self._requests.fail_all(AlreadyClosed(f"consumer on {self.topic} closed"))
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        self._queue.remove_if(lambda item: item[0] is self)
        self.failed = self.failed or AlreadyClosed(f"consumer on {self.topic} closed")


def _entry_id(pos: Position, partition: int) -> pb.MessageIdData:
    return pb.MessageIdData(ledger_id=pos[0], entry_id=pos[1], partition=partition, batch_index=-1)


def _chunks_of(mid: MessageId) -> tuple[MessageId, ...]:
    """Every entry of a chunked message (its chunks), or the id itself."""
    return mid.chunk_message_ids() if isinstance(mid, ChunkMessageId) else (mid,)
