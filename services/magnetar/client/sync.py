"""The blocking client (``magnetar.Client``): the asyncio client run on a private loop.

Every client owns one event loop in a daemon thread; most blocking methods submit the
asyncio method to it (``asyncio.run_coroutine_threadsafe``) and wait. The per-message
paths do not: ``send_async``, ``send``, ``acknowledge`` and taking a received message
post small calls to an outbox (a deque) that the loop drains, waking the loop once per
burst, and ``receive`` and ``batch_receive`` pop from the consumer's receive queue
directly (it is thread-safe in that mode; a batch posts its permits once).
``send_async`` callbacks run on the loop's thread, so they must not block (nor call
blocking methods of this client: that would wait for the thread they run on).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from magnetar.common.errors import AlreadyClosed, MagnetarError, ProducerQueueIsFull, ServiceClosed
from magnetar.common.eventloop import loop_factory
from magnetar.common.message_id import MessageId
from magnetar.schema import Schema

from . import aio
from .auth import AuthenticationBasic, AuthenticationTLS, AuthenticationToken
from .consumer import Topics, grant_batch, split_batch
from .listener import Listener, ListenerThread, check_listener
from .message import Message
from .options import (
    CONSUMER_DEFAULTS,
    PRODUCER_DEFAULTS,
    BatchingType,
    CompressionType,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    KeySharedMode,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
    check_replication_clusters,
)
from .partition_producer import PartitionProducer
from .producer import SendCallback
from .redelivery_backoff import MultiplierRedeliveryBackoff

__all__ = [
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "BatchingType",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "HashingScheme",
    "InitialPosition",
    "MultiplierRedeliveryBackoff",
    "KeySharedMode",
    "Message",
    "MessageId",
    "PartitionsRoutingMode",
    "ProducerAccessMode",
    "RegexSubscriptionMode",
    "Producer",
    "Reader",
    "Result",
]
T = TypeVar("T")
aio_log = logging.getLogger("magnetar.client.producer")


def forwarded(args: dict[str, Any], **changed: Any) -> dict[str, Any]:
    """A blocking method's arguments (its ``locals()`` taken first thing), to call the
    asyncio method of the same signature with: ``self`` left out, ``changed`` put in.
    tests/unit/test_sdk_signatures.py keeps the signatures equal."""
    return {k: v for k, v in args.items() if k != "self"} | changed


class _LoopThread:
    def __init__(self) -> None:
        self.loop = loop_factory()()  # uvloop's when installed (magnetar.common.eventloop)
        # Calls posted from other threads, run in order on the loop (see post()).
        self._outbox: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._scheduled = False
        self._thread = threading.Thread(target=self._main, name="magnetar-client", daemon=True)
        self._thread.start()

    def on_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def post(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop soon, without waiting; calls run in post order.

        The loop is woken only when no drain is scheduled yet, so a burst of posts
        costs one ``call_soon_threadsafe``.
        """
        if self.loop.is_closed():
            raise AlreadyClosed("the client is closed")
        self._outbox.append((fn, args))
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError as exc:  # the loop closed meanwhile
                raise AlreadyClosed("the client is closed") from exc

    def drain(self) -> None:
        """Run every posted call (on the loop). Clears the flag first: a post racing
        with the last pop schedules another drain instead of being left behind."""
        self._scheduled = False
        outbox = self._outbox
        while outbox:
            fn, args = outbox.popleft()
            fn(*args)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        # Let cancelled tasks finish before the loop closes.
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.loop.is_closed() or not self._thread.is_alive():
            coro.close()
            raise AlreadyClosed("the client is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("blocking client methods cannot be called from a send_async callback")
        return asyncio.run_coroutine_threadsafe(self._after_drain(coro), self.loop).result()

    async def _after_drain(self, coro: Coroutine[Any, Any, T]) -> T:
        self.drain()  # what was posted before this call happens before it
        return await coro

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)


class _Room:
    """Messages of one partition producer in flight from this facade (sent, not done).

    ``submitted`` counts in the caller threads (``next()`` of a count is atomic),
    ``completed`` only on the loop, so neither needs a lock; a caller that must wait
    for room sleeps on ``cond``, which the loop notifies only when someone waits.
    """

    __slots__ = ("limit", "_submitted", "submitted", "completed", "waiting", "cond")

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._submitted = itertools.count(1)
        self.submitted = 0
        self.completed = 0
        self.waiting = 0
        self.cond = threading.Condition(threading.Lock())

    def full(self) -> bool:
        return self.submitted - self.completed >= self.limit

    def take(self) -> None:
        self.submitted = next(self._submitted)

    def release(self) -> None:
        self.completed += 1
        if self.waiting:
            with self.cond:
                self.cond.notify_all()

    def wait(self, usable: Callable[[], None]) -> None:
        with self.cond:
            self.waiting += 1
            try:
                while self.full():
                    usable()
                    self.cond.wait(0.1)
            finally:
                self.waiting -= 1


class Producer:
    def __init__(self, runner: _LoopThread, producer: aio.Producer) -> None:
        self._runner = runner
        self._run = runner.run
        self._producer = producer
        self._conf = producer._conf
        self._rooms: dict[int, _Room] = {}

    def topic(self) -> str:
        return self._producer.topic()

    def producer_name(self) -> str:
        return self._producer.producer_name()

    def last_sequence_id(self) -> int:
        return self._producer.last_sequence_id()

    def is_connected(self) -> bool:
        return self._producer.is_connected()

    def send(
        self,
        content: Any,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> MessageId:
        """Send one message and block until the broker stored it; returns its id.

        Raises:
            ProducerQueueIsFull: ``max_pending_messages`` sends are pending and
                ``block_if_queue_full`` is off (with it, this blocks until there is room).
        """
        args = forwarded(locals())
        if self._runner.on_loop():
            raise RuntimeError("blocking client methods cannot be called from a send_async callback")
        done: concurrent.futures.Future[MessageId] = concurrent.futures.Future()

        def outcome(res: object, mid: MessageId | None) -> None:
            if isinstance(res, BaseException):
                done.set_exception(res)
            else:
                done.set_result(mid)  # type: ignore[arg-type]

        self.send_async(**args, callback=outcome)
        return done.result()

    def send_async(
        self,
        content: Any,
        callback: SendCallback | None,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> None:
        """Queue one message; ``callback(res, msg_id)`` runs on the client's thread.

        A full queue (``max_pending_messages`` sends pending) blocks this thread with
        ``block_if_queue_full``. Without it, as in Pulsar, it does not raise: nothing is
        sent and ``callback(ProducerQueueIsFull, None)`` runs on the client's thread (the
        error ``== Result.ProducerQueueIsFull``). Without a callback, which would leave
        nothing to tell, it raises :class:`~magnetar.ProducerQueueIsFull`.

        Raises:
            MessageTooBig, InvalidArgument, TypeError: bad input, or ``replication_clusters``
                given (nothing is sent).
            ServiceClosed: the producer is closed (or the error that failed it).
        """
        check_replication_clusters(replication_clusters)
        target, msg, delayed = self._producer._route(
            content, properties, partition_key, event_timestamp, deliver_at, deliver_after, ordering_key,
        )
        target._check_usable()
        room = self._rooms.get(id(target))
        if room is None:
            room = self._rooms.setdefault(id(target), _Room(self._conf.max_pending_messages))
        if room.full():
            if not self._conf.block_if_queue_full:
                full = ProducerQueueIsFull(f"producer queue is full: {room.limit} messages pending on {target.topic}")
                if callback is None:
                    raise full
                self._runner.post(_call, callback, full, None)  # the outcome, on the loop as any other
                return
            if self._runner.on_loop():
                raise RuntimeError("a full queue cannot block in a send_async callback")
            room.wait(target._check_usable)
        room.take()
        try:
            self._runner.post(_submit, target, msg, delayed, sequence_id, callback, room)
        except BaseException:
            room.completed += 1
            raise

    def flush(self) -> None:
        self._run(self._producer.flush())

    def close(self) -> None:
        self._run(self._producer.close())


def _submit(
    target: PartitionProducer,
    msg: Any,
    delayed: bool,
    sequence_id: int | None,
    callback: SendCallback | None,
    room: _Room,
) -> None:
    """On the loop: hand one posted message to its partition producer."""
    try:
        fut = target.send_message(msg, sequence_id=sequence_id, alone=delayed)
    except MagnetarError as exc:  # closed or failed after the caller's check
        room.release()
        if callback is not None:
            _call(callback, exc, None)
        return

    def done(f: asyncio.Future[MessageId]) -> None:
        room.release()
        if callback is None:
            return
        if f.cancelled():
            _call(callback, MagnetarError("send cancelled"), None)
        elif (exc := f.exception()) is not None:
            _call(callback, exc, None)
        else:
            _call(callback, Result.Ok, f.result())

    fut.add_done_callback(done)


def _call(callback: SendCallback, res: object, mid: MessageId | None) -> None:
    try:
        callback(res, mid)
    except Exception:
        aio_log.exception("send_async callback failed")


class Consumer:
    def __init__(self, runner: _LoopThread, consumer: aio.Consumer) -> None:
        self._runner = runner
        self._run = runner.run
        self._consumer = consumer
        self._listener: ListenerThread | None = None

    def _listen(self, fn: Listener) -> None:
        self._consumer.reserve_for_listener()
        self._listener = ListenerThread(self._take_for_listener, fn, self, f"consumer on {self.topic()}")

    def _take_for_listener(self) -> Message:
        owner, msg = self._consumer.take_blocking(None, listener=True)
        self._runner.post(owner.message_taken, msg)
        return msg

    def topic(self) -> str:
        """The topic; for a consumer of several topics their names joined with ``","``."""
        return self._consumer.topic()

    def topics(self) -> list[str]:
        """The full names of the topics subscribed to, in the order given."""
        return self._consumer.topics()

    def subscription_name(self) -> str:
        return self._consumer.subscription_name()

    def consumer_name(self) -> str:
        return self._consumer.consumer_name()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def has_reached_end_of_topic(self) -> bool:
        """See :meth:`magnetar.client.consumer.Consumer.has_reached_end_of_topic`."""
        return self._consumer.has_reached_end_of_topic()

    def receive(self, timeout_millis: int | None = None) -> Message:
        """Block for the next message; raises ``magnetar.Timeout`` after ``timeout_millis``."""
        if self._runner.on_loop():
            raise RuntimeError("blocking client methods cannot be called from a send_async callback")
        owner, msg = self._consumer.take_blocking(timeout_millis)
        self._runner.post(owner.message_taken, msg)
        return msg

    def batch_receive(self) -> list[Message]:
        """Block for a batch of messages under the ``batch_receive_policy``: a list,
        possibly empty after the policy's timeout (see
        :meth:`magnetar.client.consumer.Consumer.batch_receive`). Acknowledge each."""
        if self._runner.on_loop():
            raise RuntimeError("blocking client methods cannot be called from a send_async callback")
        batch = self._consumer.take_batch_blocking(self._grant_held)
        messages, grants = split_batch(batch)
        if grants:
            self._runner.post(grant_batch, grants)
        return messages

    def _grant_held(self) -> None:
        self._runner.post(self._consumer.grant_held)

    def acknowledge(self, message: Message | MessageId) -> None:
        """Queue the ack (acks go out grouped) without waiting for the client's thread."""
        owner, mid = self._consumer.target_of(message)
        self._runner.post(owner.ack, mid)

    def get_last_message_id(self) -> MessageId:
        """The id of the topic's last message (see
        :meth:`magnetar.client.consumer.Consumer.get_last_message_id`)."""
        return self._run(self._consumer.get_last_message_id())

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._run(self._consumer.acknowledge_cumulative(message))

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._run(self._consumer.negative_acknowledge(message))

    def reconsume_later(self, message: Message, delay: timedelta | int | None = None, *, level: int | None = None) -> None:
        """Consume the message again later through the retry letter topic (see
        :meth:`magnetar.client.consumer.Consumer.reconsume_later`)."""
        self._run(self._consumer.reconsume_later(message, delay, level=level))

    def redeliver_unacknowledged_messages(self) -> None:
        self._run(self._consumer.redeliver_unacknowledged_messages())

    def seek(self, message_id_or_timestamp: MessageId | int) -> None:
        """Move the subscription to a message id or a publish time (ms since the epoch)."""
        self._run(self._consumer.seek(message_id_or_timestamp))

    def unsubscribe(self) -> None:
        """Delete the subscription and close this consumer."""
        self._run(self._consumer.unsubscribe())
        self._join_listener()

    def close(self) -> None:
        """Send pending acks and close; the listener thread, if any, ends."""
        self._run(self._consumer.close())
        self._join_listener()

    def _join_listener(self) -> None:
        if self._listener is not None:
            self._listener.join(10)


class Reader:
    def __init__(self, runner: _LoopThread, reader: aio.Reader) -> None:
        self._run = runner.run
        self._reader = reader
        self._listener: ListenerThread | None = None

    def _listen(self, fn: Listener) -> None:
        self._reader.reserve_for_listener()
        self._listener = ListenerThread(lambda: self._run(self._reader._next(None)), fn, self, f"reader on {self.topic()}")

    def topic(self) -> str:
        return self._reader.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        return self._run(self._reader.read_next(timeout_millis))

    def has_message_available(self) -> bool:
        return self._run(self._reader.has_message_available())

    def seek(self, message_id_or_timestamp: MessageId | int) -> None:
        """Move the reader to a message id or a publish time (ms since the epoch)."""
        self._run(self._reader.seek(message_id_or_timestamp))

    def is_connected(self) -> bool:
        return self._reader.is_connected()

    def has_reached_end_of_topic(self) -> bool:
        """See :meth:`magnetar.client.reader.Reader.has_reached_end_of_topic`."""
        return self._reader.has_reached_end_of_topic()

    def close(self) -> None:
        """Close; the listener thread, if any, ends."""
        self._run(self._reader.close())
        if self._listener is not None:
            self._listener.join(10)


class Client:
    """A blocking client: the same methods as :class:`magnetar.asyncio.Client`, not async.

    Args:
        service_url: ``"magnetar://host:port"``, ``"host:port"`` or several hosts
            separated by commas; ``"magnetar+ssl://…"`` for TLS (``pulsar://`` as in
            :class:`magnetar.asyncio.Client`: the gRPC port, never the Pulsar one).
        authentication: an :class:`AuthenticationToken`, :class:`AuthenticationBasic`
            or :class:`AuthenticationTLS` (None: anonymous).
        operation_timeout_seconds: limit for lookups, creating producers, subscribing.
        use_tls, tls_*: TLS options as :class:`magnetar.asyncio.Client` takes them.
    """

    def __init__(
        self,
        service_url: str,
        *,
        authentication: object | None = None,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10000,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = True,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
    ) -> None:
        self._runner = _LoopThread()

        args = forwarded(locals())

        async def make() -> aio.Client:
            return aio.Client(**args)

        try:
            self._client = self._runner.run(make())
        except BaseException:
            self._runner.stop()
            raise

    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Schema = PRODUCER_DEFAULTS.schema,
        initial_sequence_id: int | None = PRODUCER_DEFAULTS.initial_sequence_id,
        send_timeout_millis: int = PRODUCER_DEFAULTS.send_timeout_millis,
        max_pending_messages: int = PRODUCER_DEFAULTS.max_pending_messages,
        block_if_queue_full: bool = PRODUCER_DEFAULTS.block_if_queue_full,
        batching_enabled: bool = PRODUCER_DEFAULTS.batching_enabled,
        batching_max_messages: int = PRODUCER_DEFAULTS.batching_max_messages,
        batching_max_allowed_size_in_bytes: int = PRODUCER_DEFAULTS.batching_max_allowed_size_in_bytes,
        batching_max_publish_delay_ms: int = PRODUCER_DEFAULTS.batching_max_publish_delay_ms,
        batching_type: BatchingType = PRODUCER_DEFAULTS.batching_type,
        message_routing_mode: PartitionsRoutingMode = PRODUCER_DEFAULTS.message_routing_mode,
        hashing_scheme: HashingScheme = PRODUCER_DEFAULTS.hashing_scheme,
        properties: Mapping[str, str] | None = None,
        compression_type: CompressionType = PRODUCER_DEFAULTS.compression_type,
        max_message_size: int = PRODUCER_DEFAULTS.max_message_size,
        auto_update_partitions: bool = PRODUCER_DEFAULTS.auto_update_partitions,
        auto_update_partitions_interval_seconds: float = PRODUCER_DEFAULTS.auto_update_partitions_interval_seconds,
        access_mode: ProducerAccessMode = PRODUCER_DEFAULTS.access_mode,
        chunking_enabled: bool = PRODUCER_DEFAULTS.chunking_enabled,
    ) -> Producer:
        """Open a producer on ``topic`` (see :meth:`magnetar.asyncio.Client.create_producer`)."""
        producer = self._runner.run(self._client.create_producer(**forwarded(locals())))
        return Producer(self._runner, producer)

    def subscribe(
        self,
        topic: Topics,
        subscription_name: str,
        consumer_type: ConsumerType = CONSUMER_DEFAULTS.consumer_type,
        schema: Schema = CONSUMER_DEFAULTS.schema,
        consumer_name: str | None = None,
        receiver_queue_size: int = CONSUMER_DEFAULTS.receiver_queue_size,
        priority_level: int = CONSUMER_DEFAULTS.priority_level,
        initial_position: InitialPosition = CONSUMER_DEFAULTS.initial_position,
        negative_ack_redelivery_delay_ms: int = CONSUMER_DEFAULTS.negative_ack_redelivery_delay_ms,
        unacked_messages_timeout_ms: int | None = None,
        enable_retry: bool = CONSUMER_DEFAULTS.enable_retry,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
        retry_delay_levels: str | Sequence[timedelta | int] = CONSUMER_DEFAULTS.retry_delay_levels,
        batch_receive_policy: ConsumerBatchReceivePolicy | None = CONSUMER_DEFAULTS.batch_receive_policy,
        auto_update_partitions: bool = CONSUMER_DEFAULTS.auto_update_partitions,
        auto_update_partitions_interval_seconds: float = CONSUMER_DEFAULTS.auto_update_partitions_interval_seconds,
        message_listener: Listener | None = None,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
        max_pending_chunked_message: int = CONSUMER_DEFAULTS.max_pending_chunked_message,
        auto_ack_oldest_chunked_message_on_queue_full: bool = CONSUMER_DEFAULTS.auto_ack_oldest_chunked_message_on_queue_full,
        expire_time_of_incomplete_chunked_message_ms: int = CONSUMER_DEFAULTS.expire_time_of_incomplete_chunked_message_ms,
        start_message_id_inclusive: bool = CONSUMER_DEFAULTS.start_message_id_inclusive,
        pattern_auto_discovery_period: float = CONSUMER_DEFAULTS.pattern_auto_discovery_period,
        regex_subscription_mode: RegexSubscriptionMode = CONSUMER_DEFAULTS.regex_subscription_mode,
        is_pattern_topic: bool = False,
        is_read_compacted: bool = CONSUMER_DEFAULTS.is_read_compacted,
        negative_ack_redelivery_backoff: MultiplierRedeliveryBackoff | None = None,
        subscription_properties: Mapping[str, str] | None = None,
    ) -> Consumer:
        """Subscribe to ``topic``, to a list or tuple of topics with one consumer, or to
        the topics a pattern matches (``re.compile(...)``; see
        :meth:`magnetar.asyncio.Client.subscribe`). ``message_listener``:
        ``fn(consumer, message)`` called on a listener thread of the consumer's own for each
        message, in order (:mod:`magnetar.client.listener`); ``receive`` is then refused."""
        check_listener(message_listener, "message_listener")
        consumer = Consumer(self._runner, self._runner.run(self._client.subscribe(**forwarded(locals(), message_listener=None))))
        if message_listener is not None:
            consumer._listen(message_listener)
        return consumer

    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Schema = CONSUMER_DEFAULTS.schema,
        reader_name: str | None = None,
        receiver_queue_size: int = CONSUMER_DEFAULTS.receiver_queue_size,
        subscription_role_prefix: str | None = None,
        start_message_id_inclusive: bool = CONSUMER_DEFAULTS.start_message_id_inclusive,
        reader_listener: Listener | None = None,
        is_read_compacted: bool = CONSUMER_DEFAULTS.is_read_compacted,
    ) -> Reader:
        """Read ``topic`` from ``start_message_id`` (see :mod:`magnetar.client.reader`)."""
        check_listener(reader_listener, "reader_listener")
        reader = Reader(self._runner, self._runner.run(self._client.create_reader(**forwarded(locals(), reader_listener=None))))
        if reader_listener is not None:
            reader._listen(reader_listener)
        return reader

    def get_topic_partitions(self, topic: str) -> list[str]:
        return self._runner.run(self._client.get_topic_partitions(topic))

    def close(self) -> None:
        """Close every producer and consumer, the connections, and the client's thread."""
        try:
            self._runner.run(self._client.close())
        except ServiceClosed:
            pass
        finally:
            self._runner.stop()

    def shutdown(self) -> None:
        """Close every producer, consumer and reader at once, without waiting for what is
        in flight (see :meth:`magnetar.asyncio.Client.shutdown`), and the client's thread.
        Later calls raise AlreadyClosed."""
        try:
            self._runner.run(self._client.shutdown())
        except ServiceClosed:
            pass
        finally:
            self._runner.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
