"""The asyncio client (``magnetar.asyncio``): Pulsar's Python client API with async methods.

    import magnetar.asyncio as ma

    client = ma.Client("magnetar://localhost:6660")
    producer = await client.create_producer("orders")
    msg_id = await producer.send(b"payload", partition_key="user-1")
    consumer = await client.subscribe("orders", "billing", consumer_type=ma.ConsumerType.Shared)
    msg = await consumer.receive(timeout_millis=5000)
    await consumer.acknowledge(msg)
    for msg in await consumer.batch_receive():  # a list, under the batch_receive_policy
        await consumer.acknowledge(msg)
    await client.close()
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from datetime import timedelta

from magnetar.common.errors import AlreadyClosed, InvalidArgument, InvalidConfiguration
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName
from magnetar.schema import Schema

from .auth import (
    AuthenticationBasic,
    AuthenticationTLS,
    AuthenticationToken,
    authorization_source,
    tls_identity,
)
from .connection import ConnectionPool, sdk_tls, url_uses_tls
from .consumer import Consumer, Topics, topic_names
from .listener import Listener, check_listener
from .message import Message
from .options import (
    CONSUMER_DEFAULTS,
    PRODUCER_DEFAULTS,
    BatchingType,
    CompressionType,
    ConsumerBatchReceivePolicy,
    ConsumerConfig,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    KeySharedMode,
    PartitionsRoutingMode,
    ProducerAccessMode,
    ProducerConfig,
    RegexSubscriptionMode,
    Result,
    check_batching_type,
    check_chunking,
    check_compression_type,
    check_discovery_period,
    check_hashing_scheme,
    check_initial_sequence_id,
    check_priority_level,
    check_regex_subscription_mode,
    check_subscription_properties,
)
from .pattern import is_pattern, parse_pattern
from .producer import Producer
from .reader import Reader
from .redelivery_backoff import MultiplierRedeliveryBackoff, check_backoff
from .schemas import check_schema

__all__ = [
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "BatchingType",
    "CompressionType",
    "Client",
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


_CONNECTION_TIMEOUT_MS = 10000
"""pulsar-client's default ``connection_timeout_ms``: the one value accepted (and unused)."""


class Client:
    """A connection to a Magnetar cluster; creates producers, consumers and readers.

    Args:
        service_url: ``"magnetar://host:port"``, ``"host:port"``, or several hosts
            separated by commas (any of them answers lookups); ``"magnetar+ssl://…"``
            (or ``"pulsar+ssl://…"``) for TLS. ``pulsar://`` is kept as an alias of
            ``magnetar://`` (gRPC, port 6660 by default), so a Pulsar-style URL without
            a port works; a URL naming a broker's Pulsar protocol port (6650), which
            serves pulsar-client, fails at once with :class:`NotGrpcServer` saying so.
        operation_timeout_seconds: limit for lookups, opening producers and
            subscribing (retriable failures are retried until then).
        authentication: an :class:`AuthenticationToken` or :class:`AuthenticationBasic`
            sent with every call, or an :class:`AuthenticationTLS` client certificate
            (None: anonymous: the brokers' anonymous role, or authentication off).
        connection_timeout_ms: not supported (gRPC connects lazily and
            ``operation_timeout_seconds`` bounds every wait, connecting included): a value
            other than the default is refused with InvalidArgument.
        use_tls: TLS with a plain ``magnetar://`` URL (as a ``+ssl`` URL).
        tls_trust_certs_file_path: PEM file of the CAs trusted to sign the brokers'
            certificates (default: the system's roots).
        tls_allow_insecure_connection: not supported (gRPC always verifies the
            certificate): True is refused with InvalidArgument.
        tls_validate_hostname: the broker's certificate must name the host dialled;
            gRPC always checks it, so False is refused (pulsar-client's default is False).
        tls_private_key_file_path, tls_certificate_file_path: a client certificate for
            brokers that require one (mTLS).

    Raises:
        InvalidArgument: a bad URL, an unsupported TLS option, unreadable TLS files, a
            ``connection_timeout_ms`` other than the default.
    """

    def __init__(
        self,
        service_url: str,
        *,
        authentication: object | None = None,
        operation_timeout_seconds: float = 30,
        connection_timeout_ms: int = _CONNECTION_TIMEOUT_MS,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = True,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
    ) -> None:
        if connection_timeout_ms != _CONNECTION_TIMEOUT_MS:
            raise InvalidConfiguration(
                f"connection_timeout_ms={connection_timeout_ms!r} is not supported: gRPC connects lazily "
                "and operation_timeout_seconds bounds every wait, connecting included; set that instead"
            )
        header = authorization_source(authentication)
        certificate, key = tls_identity(authentication, tls_certificate_file_path, tls_private_key_file_path)
        if isinstance(authentication, AuthenticationTLS) and not (use_tls or url_uses_tls(service_url)):
            raise InvalidConfiguration("AuthenticationTLS needs TLS: use a +ssl URL or use_tls=True")
        tls = sdk_tls(
            service_url, use_tls=use_tls, trust_certs_file_path=tls_trust_certs_file_path,
            allow_insecure_connection=tls_allow_insecure_connection, validate_hostname=tls_validate_hostname,
            certificate_file_path=certificate, private_key_file_path=key,
        )  # fmt: skip
        self._pool = ConnectionPool(service_url, operation_timeout_seconds, tls=tls, authorization=header)
        self._producers: weakref.WeakSet[Producer] = weakref.WeakSet()
        self._consumers: weakref.WeakSet[Consumer] = weakref.WeakSet()
        self._readers: weakref.WeakSet[Reader] = weakref.WeakSet()
        self._closed = False

    @classmethod
    def sharing(cls, pool: ConnectionPool) -> Client:
        """A client over an existing connection pool (its channels and service hosts): the
        gateway's SDK client shares its admin client's. Closing either closes the pool."""
        client = cls(",".join(pool.service_hosts) or "127.0.0.1", operation_timeout_seconds=pool.operation_timeout_s)
        client._pool = pool
        return client

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the client is closed")

    @property
    def service_hosts(self) -> list[str]:
        return list(self._pool.service_hosts)

    async def create_producer(
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
        """Open a producer on ``topic`` (on every partition of a partitioned topic).

        ``initial_sequence_id``: the first message's sequence id is this + 1 (default: the
        broker's last for the producer name + 1), on every partition, as pulsar-client;
        sends numbered at or below what the broker stored under the name are dropped as
        duplicates.

        Messages with a partition key go to ``partition_for_key(key, partitions)``
        (Murmur3, the one ``hashing_scheme`` taken); others round robin by batching
        window, or all to one random partition with ``UseSinglePartition``.

        ``access_mode`` (pulsar-client's ``ProducerAccessMode``): ``Shared`` (default),
        ``Exclusive`` (refused with ProducerFenced when another producer is there),
        ``WaitForExclusive`` (this call returns once the others are gone) or
        ``ExclusiveWithFencing`` (the others are fenced out: their sends fail with
        ProducerFenced). An exclusive producer that reconnects keeps its topic epoch:
        when another took the topic meanwhile it is fenced (ProducerFenced) for good.

        ``schema`` (a :mod:`magnetar.schema` schema, default ``BytesSchema()``): what
        ``send`` encodes values with; declared to the broker when the producer opens
        (bytes declare nothing), and its version carried by every entry written.
        ``chunking_enabled`` (batching must be off, as in pulsar-client): a message over
        ``max_message_size`` is sent as chunks of at most that size, each stored as an
        entry; with ``compression_type`` the whole payload is compressed first and the
        compressed bytes cut. The send completes with a ``ChunkMessageId`` (first and
        last chunk) once the last chunk is stored.
        ``batching_type`` (pulsar-client's ``BatchingType``): ``Default``, a batch holds
        any messages; ``KeyBased``, one batch per key (ordering key, else partition key;
        messages with neither together), flushed by the same limits counted over all
        keys, so a Key_Shared consumer is handed each batch whole.

        ``compression_type``: each batch's messages are compressed together with that
        codec as Pulsar's producers compress them (the batch's header is not), and every
        consumer door, pulsar-client's included, reads them decompressed.

        Raises:
            InvalidConfiguration: a ``hashing_scheme`` other than ``Murmur3_32Hash``, an
                ``initial_sequence_id`` other than None or an int >= 0, an unknown
                ``access_mode``, ``compression_type`` or ``batching_type``.
            InvalidTopicName, TopicNotFound, ProducerBusy, ProducerFenced, NotConnected, Timeout.
            IncompatibleSchema: the topic's schema does not accept ``schema``.
            TypeError: ``schema`` is not a :class:`magnetar.schema.Schema`.
        """
        self._check_open()
        check_hashing_scheme(hashing_scheme)
        check_initial_sequence_id(initial_sequence_id)
        check_chunking(batching_enabled, chunking_enabled)
        conf = ProducerConfig(
            producer_name=producer_name,
            initial_sequence_id=initial_sequence_id,
            batching_enabled=batching_enabled,
            batching_max_messages=batching_max_messages,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            batching_type=check_batching_type(batching_type),
            send_timeout_millis=send_timeout_millis,
            max_pending_messages=max_pending_messages,
            block_if_queue_full=block_if_queue_full,
            message_routing_mode=message_routing_mode,
            hashing_scheme=hashing_scheme,
            max_message_size=max_message_size,
            properties=dict(properties or {}),
            compression_type=check_compression_type(compression_type),
            auto_update_partitions=auto_update_partitions,
            auto_update_partitions_interval_seconds=auto_update_partitions_interval_seconds,
            access_mode=ProducerAccessMode.of(access_mode),
            schema=check_schema(schema),
            chunking_enabled=chunking_enabled,
        )
        producer = await Producer.create(self._pool, topic, conf)
        self._producers.add(producer)
        return producer

    async def subscribe(
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
        """Subscribe to ``topic`` (every partition of a partitioned topic).

        ``topic`` may be a list or tuple of topic names: one consumer then receives the
        messages of all of them (Pulsar's multi-topics consumer), every topic subscribed
        under ``subscription_name`` with the same options. Acknowledge its messages by
        :class:`Message` (a bare :class:`MessageId` does not name its topic); see
        :class:`magnetar.client.consumer.Consumer`.

        ``topic`` may be a pattern: a compiled expression (``re.compile("persistent://t/ns/orders-.*")``),
        or its text with ``is_pattern_topic=True`` (pulsar-client's asyncio form). The
        consumer then takes every topic of the pattern's namespace whose name (without
        its domain) the expression matches whole, a partitioned topic as its partitions,
        possibly none at first; every ``pattern_auto_discovery_period`` seconds (0: never)
        it joins the matching topics created since, from their earliest message, and
        leaves the deleted ones (see :mod:`magnetar.client.pattern` and docs/client.md,
        "Pattern subscriptions"). ``regex_subscription_mode``: PersistentOnly (default),
        NonPersistentOnly or AllTopics (the non-persistent topics are those loaded on
        the brokers now, and the partitions of partitioned ones). ``topic()`` is the pattern; ``topics()`` the
        topics it has now.

        ``batch_receive_policy`` says what one ``consumer.batch_receive()`` returns (see
        :class:`ConsumerBatchReceivePolicy`; None: its defaults).

        ``schema`` (default ``BytesSchema()``): what ``Message.value()`` decodes payloads
        with (see docs/client.md, "Schemas"); declared to the broker on subscribing.

        ``key_shared_policy``: on a KeyShared subscription, a
        :class:`ConsumerKeySharedPolicy` (None: AutoSplit); ignored by the other types.

        Chunked messages are reassembled (their id a ``ChunkMessageId``; acks, negative
        acks and seeks act on every chunk): ``max_pending_chunked_message`` incomplete
        ones are held (0: no limit; the oldest is dropped for a new one, its chunks acked
        with ``auto_ack_oldest_chunked_message_on_queue_full``), and one incomplete after
        ``expire_time_of_incomplete_chunked_message_ms`` is dropped and acked.
        ``start_message_id_inclusive`` (pulsar-client's): whether a ``seek`` to a message
        id gives that message again. Off (the default), the first message after a seek is
        the one after the id; on, the id's own (see :meth:`Consumer.seek`).

        ``is_read_compacted`` (pulsar-client's): read the topic's compacted view (the
        latest message of each key, as the last ``topics compact`` left it) up to its
        horizon, then the topic's messages after it; Exclusive and Failover only.

        ``message_listener``: ``fn(consumer, message)`` called for each message, in order,
        on this event loop (a coroutine function is awaited; see
        :mod:`magnetar.client.listener`); ``receive`` and ``batch_receive`` then raise
        InvalidConfiguration, as pulsar-client's.

        Raises:
            ConsumerBusy: an Exclusive subscription already has a consumer.
            InvalidArgument: ``topic`` is neither a name nor a list or tuple of names, an
                empty list, or a list naming a topic twice; ``batch_receive_policy`` is
                not a :class:`ConsumerBatchReceivePolicy`; a non-zero ``priority_level``
                on a Shared subscription (its dispatcher does not order by priority).
            InvalidTopicName, TopicNotFound, NotConnected, Timeout (of any topic: nothing
                stays subscribed then). InvalidTopicName also for a pattern whose tenant or
                namespace is not a name (a pattern across namespaces).
            InvalidArgument: a pattern that is not a regular expression, or
                ``is_pattern_topic`` with a list.
            InvalidConfiguration: a bad ``regex_subscription_mode`` or
                ``pattern_auto_discovery_period``.
            OperationNotSupported: ``enable_retry`` with a pattern.
            NamespaceNotFound: the pattern's namespace does not exist.
        """
        self._check_open()
        check_listener(message_listener, "message_listener")
        if key_shared_policy is not None and not isinstance(key_shared_policy, ConsumerKeySharedPolicy):
            raise InvalidConfiguration(
                f"key_shared_policy must be a ConsumerKeySharedPolicy, not {type(key_shared_policy).__name__}"
            )
        mode = check_regex_subscription_mode(regex_subscription_mode)
        period = check_discovery_period(pattern_auto_discovery_period)
        topics = parse_pattern(topic, mode) if is_pattern(topic, is_pattern_topic) else topic_names(topic)
        if not subscription_name:
            raise InvalidArgument("subscription_name must not be empty")
        check_priority_level(ConsumerType(consumer_type), priority_level)
        conf = ConsumerConfig(
            subscription_name=subscription_name,
            consumer_type=ConsumerType(consumer_type),
            consumer_name=consumer_name,
            receiver_queue_size=receiver_queue_size,
            priority_level=priority_level,
            initial_position=InitialPosition(initial_position),
            negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            negative_ack_redelivery_backoff=check_backoff(negative_ack_redelivery_backoff),
            subscription_properties=check_subscription_properties(subscription_properties),
            unacked_messages_timeout_ms=unacked_messages_timeout_ms,
            enable_retry=enable_retry,
            dead_letter_policy=dead_letter_policy,
            key_shared_policy=key_shared_policy,
            retry_delay_levels=retry_delay_levels,
            batch_receive_policy=batch_receive_policy,
            start_message_id_inclusive=bool(start_message_id_inclusive),
            is_read_compacted=bool(is_read_compacted),
            auto_update_partitions=auto_update_partitions,
            auto_update_partitions_interval_seconds=auto_update_partitions_interval_seconds,
            schema=check_schema(schema),
            max_pending_chunked_message=max_pending_chunked_message,
            auto_ack_oldest_chunked_message_on_queue_full=auto_ack_oldest_chunked_message_on_queue_full,
            expire_time_of_incomplete_chunked_message_ms=expire_time_of_incomplete_chunked_message_ms,
            pattern_auto_discovery_period=period,
            regex_subscription_mode=mode,
        )
        consumer = await Consumer.create(self._pool, topics, conf)
        self._consumers.add(consumer)
        if message_listener is not None:
            consumer.listen(message_listener, consumer)
        return consumer

    async def create_reader(
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
        """Read ``topic`` from ``start_message_id`` with a non-durable cursor (see
        :mod:`magnetar.client.reader`). ``reader_listener``: ``fn(reader, message)`` for
        each message, as ``message_listener`` of :meth:`subscribe`. ``schema`` and
        ``is_read_compacted``: as :meth:`subscribe`'s.

        Raises:
            InvalidArgument: a specific start id on a partitioned topic.
            InvalidTopicName, TopicNotFound, NotConnected, Timeout.
        """
        self._check_open()
        check_listener(reader_listener, "reader_listener")
        reader = await Reader.create(
            self._pool,
            topic,
            start_message_id,
            schema=check_schema(schema),
            reader_name=reader_name,
            receiver_queue_size=receiver_queue_size,
            subscription_role_prefix=subscription_role_prefix,
            start_message_id_inclusive=start_message_id_inclusive,
            is_read_compacted=bool(is_read_compacted),
        )
        self._readers.add(reader)
        if reader_listener is not None:
            reader.listen(reader_listener, reader)
        return reader

    async def get_topic_partitions(self, topic: str) -> list[str]:
        """The partitions of ``topic`` (the topic itself when it is not partitioned)."""
        self._check_open()
        name = TopicName.parse(topic)
        count = await self._pool.partitions(str(name))
        return [str(name)] if count == 0 else [str(name.partition(i)) for i in range(count)]

    async def close(self) -> None:
        """Close every producer, consumer and reader of this client (producers send what
        is pending, consumers their acks), then the connections. Later calls raise
        AlreadyClosed."""
        await self._close(flush=True)

    async def shutdown(self) -> None:
        """Close every producer, consumer and reader at once, without waiting for what is
        in flight (pulsar-client's ``Client.shutdown``): sends not yet confirmed fail with
        AlreadyClosed, unsent acks are dropped (the broker redelivers those messages), a
        waiting ``receive`` raises AlreadyClosed. Later calls raise AlreadyClosed."""
        await self._close(flush=False)

    async def _close(self, flush: bool) -> None:
        self._closed = True
        closing = [p._close(flush) for p in self._producers]
        closing += [c._close(flush) for c in self._consumers]
        closing += [r._close(flush) for r in self._readers]
        await asyncio.gather(*closing, return_exceptions=True)
        self._producers.clear()
        self._consumers.clear()
        self._readers.clear()
        await self._pool.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
