"""The blocking client (``magnetar.Client``): the asyncio client run on a private loop.

Every client owns one event loop in a daemon thread; each blocking method submits the
asyncio method to it (``asyncio.run_coroutine_threadsafe``) and waits. ``send_async``
callbacks run on that thread, so they must not block (nor call blocking methods of
this client: that would wait for the thread they run on).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from magnetar.common.errors import ServiceClosed
from magnetar.common.message_id import MessageId

from . import aio
from .message import Message
from .options import (
    DEFAULT_MAX_MESSAGE_SIZE,
    ConsumerDeadLetterPolicy,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    PartitionsRoutingMode,
)
from .producer import SendCallback

T = TypeVar("T")


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="magnetar-client", daemon=True)
        self._thread.start()

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
            raise ServiceClosed("the client is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("blocking client methods cannot be called from a send_async callback")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)


class Producer:
    def __init__(self, runner: _LoopThread, producer: aio.Producer) -> None:
        self._run = runner.run
        self._producer = producer

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
        content: bytes,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> MessageId:
        """Send one message and block until the broker stored it; returns its id."""
        return self._run(
            self._producer.send(
                content,
                properties=properties,
                partition_key=partition_key,
                sequence_id=sequence_id,
                event_timestamp=event_timestamp,
                deliver_at=deliver_at,
                deliver_after=deliver_after,
            )
        )

    def send_async(
        self,
        content: bytes,
        callback: SendCallback | None,
        properties: Mapping[str, str] | None = None,
        partition_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
    ) -> None:
        """Queue one message; ``callback(res, msg_id)`` runs on the client's thread."""

        async def enqueue() -> None:
            await self._producer.enqueue(
                content,
                callback,
                properties=properties,
                partition_key=partition_key,
                sequence_id=sequence_id,
                event_timestamp=event_timestamp,
                deliver_at=deliver_at,
                deliver_after=deliver_after,
            )

        self._run(enqueue())

    def flush(self) -> None:
        self._run(self._producer.flush())

    def close(self) -> None:
        self._run(self._producer.close())


class Consumer:
    def __init__(self, runner: _LoopThread, consumer: aio.Consumer) -> None:
        self._run = runner.run
        self._consumer = consumer

    def topic(self) -> str:
        return self._consumer.topic()

    def subscription_name(self) -> str:
        return self._consumer.subscription_name()

    def consumer_name(self) -> str:
        return self._consumer.consumer_name()

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    def receive(self, timeout_millis: int | None = None) -> Message:
        """Block for the next message; raises ``magnetar.Timeout`` after ``timeout_millis``."""
        return self._run(self._consumer.receive(timeout_millis))

    def acknowledge(self, message: Message | MessageId) -> None:
        self._run(self._consumer.acknowledge(message))

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        self._run(self._consumer.acknowledge_cumulative(message))

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        self._run(self._consumer.negative_acknowledge(message))

    def redeliver_unacknowledged_messages(self) -> None:
        self._run(self._consumer.redeliver_unacknowledged_messages())

    def unsubscribe(self) -> None:
        self._run(self._consumer.unsubscribe())

    def close(self) -> None:
        self._run(self._consumer.close())


class Reader:
    def __init__(self, runner: _LoopThread, reader: aio.Reader) -> None:
        self._run = runner.run
        self._reader = reader

    def topic(self) -> str:
        return self._reader.topic()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        return self._run(self._reader.read_next(timeout_millis))

    def has_message_available(self) -> bool:
        return self._run(self._reader.has_message_available())

    def is_connected(self) -> bool:
        return self._reader.is_connected()

    def close(self) -> None:
        self._run(self._reader.close())


class Client:
    """A blocking client: the same methods as :class:`magnetar.asyncio.Client`, not async.

    Args:
        service_url: ``"magnetar://host:port"``, ``"host:port"`` or several hosts
            separated by commas.
        operation_timeout_seconds: limit for lookups, creating producers, subscribing.
    """

    def __init__(
        self,
        service_url: str,
        *,
        authentication: object | None = None,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = 10000,
    ) -> None:
        self._runner = _LoopThread()

        async def make() -> aio.Client:
            return aio.Client(
                service_url,
                authentication=authentication,
                operation_timeout_seconds=operation_timeout_seconds,
                connection_timeout_ms=connection_timeout_ms,
            )

        try:
            self._client = self._runner.run(make())
        except BaseException:
            self._runner.stop()
            raise

    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        send_timeout_millis: int = 30000,
        max_pending_messages: int = 1000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = True,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        hashing_scheme: HashingScheme = HashingScheme.Murmur3_32Hash,
        properties: Mapping[str, str] | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> Producer:
        """Open a producer on ``topic`` (see :meth:`magnetar.asyncio.Client.create_producer`)."""
        producer = self._runner.run(
            self._client.create_producer(
                topic,
                producer_name=producer_name,
                send_timeout_millis=send_timeout_millis,
                max_pending_messages=max_pending_messages,
                block_if_queue_full=block_if_queue_full,
                batching_enabled=batching_enabled,
                batching_max_messages=batching_max_messages,
                batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
                batching_max_publish_delay_ms=batching_max_publish_delay_ms,
                message_routing_mode=message_routing_mode,
                hashing_scheme=hashing_scheme,
                properties=properties,
                max_message_size=max_message_size,
            )
        )
        return Producer(self._runner, producer)

    def subscribe(
        self,
        topic: str,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        consumer_name: str | None = None,
        receiver_queue_size: int = 1000,
        priority_level: int = 0,
        initial_position: InitialPosition = InitialPosition.Latest,
        negative_ack_redelivery_delay_ms: int = 60000,
        unacked_messages_timeout_ms: int | None = None,
        enable_retry: bool = False,
        dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
    ) -> Consumer:
        consumer = self._runner.run(
            self._client.subscribe(
                topic,
                subscription_name,
                consumer_type=consumer_type,
                consumer_name=consumer_name,
                receiver_queue_size=receiver_queue_size,
                priority_level=priority_level,
                initial_position=initial_position,
                negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
                unacked_messages_timeout_ms=unacked_messages_timeout_ms,
                enable_retry=enable_retry,
                dead_letter_policy=dead_letter_policy,
            )
        )
        return Consumer(self._runner, consumer)

    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        reader_name: str | None = None,
        receiver_queue_size: int = 1000,
        subscription_role_prefix: str | None = None,
        start_message_id_inclusive: bool = False,
    ) -> Reader:
        """Read ``topic`` from ``start_message_id`` (see :mod:`magnetar.client.reader`)."""
        reader = self._runner.run(
            self._client.create_reader(
                topic,
                start_message_id,
                reader_name=reader_name,
                receiver_queue_size=receiver_queue_size,
                subscription_role_prefix=subscription_role_prefix,
                start_message_id_inclusive=start_message_id_inclusive,
            )
        )
        return Reader(self._runner, reader)

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

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
