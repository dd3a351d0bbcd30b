"""The public consumer: one partition consumer per partition, merged into one queue.

A consumer of several topics (Pulsar's multi-topics consumer) is the same class: every
partition of every listed topic feeds the one queue. Acks, nacks and retries of a
``Message`` go to the partition consumer of ``message.topic_name()``; a bare
``MessageId`` does not say its topic, so only a consumer of one topic takes it.

Every ``auto_update_partitions_interval_seconds`` the consumer looks for new partitions
of its partitioned topics and subscribes them (Pulsar's ``autoUpdatePartitions``);
readers keep the partitions they started with.

A pattern consumer (Pulsar's PatternMultiTopicsConsumer) is one too: its topics are those
of the pattern's namespace that match (:mod:`.pattern`), and every
``pattern_auto_discovery_period`` it lists the namespace again, joins the topics that
appeared (from their earliest message: they were created after it subscribed) and leaves
the ones deleted (their queued messages are dropped, their acks ignored).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta

from magnetar.common.errors import (
    AlreadyClosed,
    CumulativeAcknowledgementNotAllowedError,
    InvalidArgument,
    InvalidConfiguration,
    MagnetarError,
    OperationNotSupported,
)
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.common.names import TopicName

from .autoupdate import PartitionsAutoUpdate, check_interval
from .connection import ConnectionPool
from .listener import Listener, run_listener
from .message import Message
from .options import (
    ConsumerBatchReceivePolicy,
    ConsumerConfig,
    ConsumerDeadLetterPolicy,
    ConsumerType,
    InitialPosition,
)
from .partition_consumer import PartitionConsumer, Queued
from .pattern import TopicsPattern
from .receive_queue import ReceiveQueue
from .retry import parse_delay_levels, reconsume_delay_ms

log = logging.getLogger(__name__)

MessageOrId = Message | MessageId
SeekTarget = MessageId | int  # a message id, or a publish time in ms since the epoch
Topics = str | list[str] | tuple[str, ...] | re.Pattern[str]  # one topic, several, or a pattern


def _id_of(msg: MessageOrId) -> MessageId:
    if isinstance(msg, Message):
        return msg.message_id()
    if isinstance(msg, MessageId):
        return msg
    raise TypeError(f"expected a Message or a MessageId, not {type(msg).__name__}")


def topic_names(topics: object) -> list[str]:
    """The full names of the topics ``subscribe`` was given: one name, or a list or tuple.

    Raises:
        InvalidArgument: neither a str nor a list or tuple of str (a pattern is parsed
            by :func:`.pattern.parse_pattern`), an empty list, a topic listed twice (after normalising the
            name), or a partitioned topic listed with one of its partitions.
        InvalidTopicName: a name that is not valid.
    """
    if isinstance(topics, str):
        return [str(TopicName.parse(topics))]
    if not isinstance(topics, list | tuple):
        raise InvalidArgument(
            f"subscribe takes a topic name, a list of them or a compiled pattern, not {type(topics).__name__}"
        )
    if not topics:
        raise InvalidArgument("subscribe needs at least one topic; the list is empty")
    names: dict[TopicName, None] = {}
    for topic in topics:
        if not isinstance(topic, str):
            raise InvalidArgument(f"a topic name is a str, not {type(topic).__name__}")
        name = TopicName.parse(topic)
        if name in names:
            raise InvalidArgument(f"topic {name} is listed twice")
        names[name] = None
    for name in names:
        if name.is_partition and name.partitioned_topic_name in names:
            raise InvalidArgument(f"{name} is a partition of {name.partitioned_topic_name}, which is listed too")
    return [str(n) for n in names]


BatchLimits = tuple[int, int, float | None]  # max messages, max bytes (0: none), timeout in s (None: none)


def batch_limits(conf: ConsumerConfig) -> BatchLimits:
    """What one ``batch_receive`` takes under ``conf.batch_receive_policy`` (None: the
    default policy): ``max_num_message`` capped at ``receiver_queue_size``, as Pulsar
    caps it, and that cap also when the policy sets no count limit (so a batch is
    complete once the queue holds what a partition can send without new permits).

    Raises:
        InvalidArgument: the policy is not a :class:`ConsumerBatchReceivePolicy`.
    """
    policy = conf.batch_receive_policy
    if policy is None:
        policy = ConsumerBatchReceivePolicy()
    if not isinstance(policy, ConsumerBatchReceivePolicy):
        raise InvalidConfiguration(f"batch_receive_policy must be a ConsumerBatchReceivePolicy, not {type(policy).__name__}")
    cap = max(1, conf.receiver_queue_size)
    max_items = min(policy.max_num_message, cap) if policy.max_num_message > 0 else cap
    timeout_s = policy.timeout_ms / 1000 if policy.timeout_ms > 0 else None
    return max_items, max(0, policy.max_num_bytes), timeout_s


def _payload_size(item: Queued) -> int:
    return len(item[1].data())


Grant = tuple[PartitionConsumer, Message, int]  # a partition, its last message taken, how many


def split_batch(batch: list[Queued]) -> tuple[list[Message], list[Grant]]:
    """The messages of a taken batch, and per partition its latest message and count
    (for :meth:`PartitionConsumer.batch_taken`), in C-speed passes over the batch."""
    messages = [m for _, m in batch]
    if not batch:
        return messages, []
    last = dict(batch)  # each partition's last message (later pairs win)
    if len(last) == 1:
        return messages, [(owner, msg, len(batch)) for owner, msg in last.items()]
    counts = Counter(owner for owner, _ in batch)
    return messages, [(owner, msg, counts[owner]) for owner, msg in last.items()]


def grant_batch(grants: list[Grant]) -> None:
    """On the loop: give the permits of a taken batch back (one Flow per partition)."""
    for owner, last, count in grants:
        owner.batch_taken(last, count)


class Consumer:
    """Receives the messages of one subscription of one or more topics (every partition).

    With several topics, :meth:`topic` is their names joined with ``","``, a bare
    :class:`MessageId` is refused where a message is named (pass the :class:`Message`),
    and :meth:`seek` takes a time, ``MessageId.earliest`` or ``MessageId.latest`` only.
    """

    def __init__(
        self, topics: str | list[str], conf: ConsumerConfig, partitions: list[PartitionConsumer],
        queue: ReceiveQueue[Queued], retry: list[PartitionConsumer] | None = None,
        delay_levels_ms: list[int] | None = None, pattern: TopicsPattern | None = None,
    ) -> None:
        self._topics = [topics] if isinstance(topics, str) else list(topics)
        self._pattern = pattern
        self._topic = pattern.text if pattern is not None else ",".join(self._topics)
        self._multi = pattern is not None or len(self._topics) > 1
        self._conf = conf
        self._partitions = partitions
        self._queue = queue
        self._retry = retry or []
        self._retry_by_topic = {p.topic: p for p in self._retry}
        self._by_topic = {p.topic: p for p in self._partitions + self._retry}
        self._delay_levels_ms = delay_levels_ms or []
        self._batch = batch_limits(conf)
        self._closed = False
        self._listened = False  # a message_listener takes every message
        self._listener: asyncio.Task[None] | None = None
        self._pool: ConnectionPool | None = None
        self._consumer_name = ""
        self._counts: dict[str, int] = {}  # partitioned topics listed: their partition counts
        self._auto_update: PartitionsAutoUpdate | None = None
        self._discovery: PartitionsAutoUpdate | None = None  # a pattern consumer's
        self._changing = asyncio.Lock()  # one change of partitions or topics at a time
        self._left: set[str] = set()  # partitions of topics a pattern consumer left

    def _watch_partitions(self, pool: ConnectionPool, consumer_name: str, counts: dict[str, int]) -> None:
        """Subscribe the partitions the topics in ``counts`` grow, from now on."""
        self._pool, self._consumer_name, self._counts = pool, consumer_name, counts
        self._auto_update = PartitionsAutoUpdate(
            f"consumer {self._conf.subscription_name} on {self._topic}",
            self._conf.auto_update_partitions_interval_seconds, self._add_partitions,
        )
        self._auto_update.start()

    async def _add_partitions(self) -> None:
        async with self._changing:
            await self._add_partitions_now()

    async def _add_partitions_now(self) -> None:
        """Subscribe each partition a listed partitioned topic has beyond ours; its
        messages go to the one queue. The broker created the subscription on every new
        partition at its start when the topic grew, so nothing published there is
        missed (a new subscription starts at ``initial_position``)."""
        assert self._pool is not None
        for name, have in list(self._counts.items()):
            count = await self._pool.partitions(name)
            if count <= have or self._closed or name not in self._counts:
                continue
            base = TopicName.parse(name)
            added = [
                PartitionConsumer(self._pool, str(base.partition(i)), i, self._conf, self._consumer_name, self._queue)
                for i in range(have, count)
            ]
            for p in added:
                p.tolerate_deletion = self._pattern is not None
            # Known before they start: a message of one may be received and acked while
            # the others still subscribe.
            self._partitions.extend(added)  # one topic: partition i stays at index i
            self._by_topic.update((p.topic, p) for p in added)
            try:
                await _start(added)
            except BaseException:
                self._forget(added)
                raise
            if self._closed:  # closed while they subscribed
                await _close(added)
                return
            self._counts[name] = count
            log.info("consumer on %s: %d partitions now (was %d)", name, count, have)

    # -- pattern consumers ----------------------------------------------------------------
    def _watch_pattern(self) -> None:
        """List the pattern's namespace every ``pattern_auto_discovery_period``, from now on."""
        self._discovery = PartitionsAutoUpdate(
            f"pattern consumer {self._conf.subscription_name} on {self._topic}",
            self._conf.pattern_auto_discovery_period, self._discover, doing="topic discovery",
        )
        self._discovery.start()

    async def _discover(self) -> None:
        """Join the topics that match now and left out, leave those no longer there.
        A topic that cannot be subscribed now is tried again at the next discovery."""
        assert self._pool is not None and self._pattern is not None
        found = self._pattern.matching(await self._pool.list_topics(str(self._pattern.namespace), self._pattern.mode))
        async with self._changing:
            if self._closed:
                return
            now = set(found)
            gone = [t for t in self._topics if t not in now]
            if gone:
                await self._leave(gone)
            have = set(self._topics)
            await self._join([t for t in found if t not in have])

    async def _join(self, topics: list[str]) -> None:
        """Subscribe ``topics`` (found after the consumer subscribed, so from their
        earliest message: what was published there since they were created is not
        missed; an existing subscription keeps its position)."""
        if not topics:
            return
        assert self._pool is not None
        conf = dataclasses.replace(self._conf, initial_position=InitialPosition.Earliest)
        results = await asyncio.gather(*(self._join_one(t, conf) for t in topics), return_exceptions=True)
        if self._closed:  # closed while they subscribed
            await _close([p for group in results if not isinstance(group, BaseException) for p in group])
            return
        for topic, result in zip(topics, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("consumer on %s: subscribing %s failed (tried again at the next discovery): %r",
                            self._topic, topic, result)  # fmt: skip
            else:
                log.info("consumer on %s: joined %s", self._topic, topic)

    async def _join_one(self, topic: str, conf: ConsumerConfig) -> list[PartitionConsumer]:
        """Subscribe ``topic``'s partitions, known to the consumer before they start (a
        message of one may be received and acked while the others still subscribe)."""
        assert self._pool is not None
        group = await _partition_consumers(self._pool, topic, conf, self._consumer_name, self._queue, True)
        self._topics.append(topic)
        self._partitions.extend(group)
        self._by_topic.update((p.topic, p) for p in group)
        self._left.difference_update(p.topic for p in group)
        try:
            await _start(group)
        except BaseException:
            self._topics.remove(topic)
            self._forget(group)
            raise
        if group[0].partition >= 0:
            self._counts[topic] = len(group)
        return group

    def _forget(self, partitions: list[PartitionConsumer]) -> None:
        """Drop partition consumers that did not start (they are closed)."""
        ids = {id(p) for p in partitions}
        self._partitions[:] = [p for p in self._partitions if id(p) not in ids]
        for p in partitions:
            if self._by_topic.get(p.topic) is p:
                del self._by_topic[p.topic]

    async def _leave(self, topics: list[str]) -> None:
        """Close the partition consumers of ``topics`` (deleted) and drop their queued messages."""
        names = set(topics)
        gone = [p for p in self._partitions if _base_topic(p) in names]
        ids = {id(p) for p in gone}
        self._partitions[:] = [p for p in self._partitions if id(p) not in ids]
        for p in gone:
            self._by_topic.pop(p.topic, None)
            self._left.add(p.topic)
        for topic in topics:
            self._topics.remove(topic)
            self._counts.pop(topic, None)
        await _close(gone, flush=False)  # the topic is gone: nothing to acknowledge there (closing drops its queued messages)
        log.info("consumer on %s: left %s (deleted)", self._topic, ", ".join(topics))

    def _of_topic_left(self, message: MessageOrId) -> bool:
        """A message of a topic this pattern consumer left (deleted): nothing to ack."""
        return bool(self._left) and isinstance(message, Message) and message.topic_name() in self._left

    @classmethod
    async def create(
        cls,
        pool: ConnectionPool,
        topics: Topics | TopicsPattern,
        conf: ConsumerConfig,
    ) -> Consumer:
        """Subscribe every partition of ``topics`` (one name, or a list or tuple of names:
        see :func:`topic_names`; or a :class:`TopicsPattern`: the matching topics of its
        namespace now, possibly none), all into one queue; with ``enable_retry`` also each
        retry letter topic the broker named (once each; same subscription, from its
        earliest message). All or nothing: on any failure what was opened is closed.

        Raises:
            OperationNotSupported: ``enable_retry`` with a pattern.
        """
        pattern = topics if isinstance(topics, TopicsPattern) else None
        if pattern is not None:
            if conf.enable_retry:
                raise OperationNotSupported(
                    "enable_retry is not supported with a pattern subscription (its retry letter topics would be "
                    "topics of the pattern's namespace); subscribe a list of topics instead"
                )
            names = pattern.matching(await pool.list_topics(str(pattern.namespace), pattern.mode))
        else:
            names = topic_names(topics)
        batch_limits(conf)  # refuse a bad policy before subscribing anything
        count = conf.dead_letter_policy.max_redeliver_count if conf.dead_letter_policy else None
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or not 1 <= count < 2**32):
            raise InvalidConfiguration(f"max_redeliver_count must be an integer >= 1, not {count!r}")
        levels = parse_delay_levels(conf.retry_delay_levels) if conf.enable_retry else []
        if conf.auto_update_partitions:
            check_interval(conf.auto_update_partitions_interval_seconds)
        queue: ReceiveQueue[Queued] = ReceiveQueue()
        consumer_name = conf.consumer_name or secrets.token_hex(4)
        groups = await _subscribe_all(pool, [(n, conf) for n in names], consumer_name, queue, pattern is not None)
        partitions = [p for group in groups for p in group]
        retry: list[PartitionConsumer] = []
        if conf.enable_retry:
            try:
                targets = retry_targets(conf, names, groups)
                retry = [p for group in await _subscribe_all(pool, targets, consumer_name, queue) for p in group]
            except BaseException:
                await _close(partitions)
                raise
        consumer = cls(names, conf, partitions, queue, retry, levels, pattern=pattern)
        consumer._pool, consumer._consumer_name = pool, consumer_name
        counts = {n: len(g) for n, g in zip(names, groups, strict=True) if g[0].partition >= 0}
        if conf.auto_update_partitions and not conf.non_durable and (counts or pattern is not None):
            consumer._watch_partitions(pool, consumer_name, counts)
        if pattern is not None and conf.pattern_auto_discovery_period > 0:
            consumer._watch_pattern()
        return consumer

    # -- Pulsar's accessors ------------------------------------------------------------
    def topic(self) -> str:
        """The topic's full name; for a consumer of several topics, their full names in
        the order given, joined with ``","`` (:meth:`topics` lists them)."""
        return self._topic

    def topics(self) -> list[str]:
        """The full names of the topics subscribed to, in the order given (without the
        retry letter topics); a pattern consumer's: those it has now, in the order found."""
        return list(self._topics)

    def subscription_name(self) -> str:
        return self._conf.subscription_name

    def consumer_name(self) -> str:
        return self._partitions[0].consumer_name if self._partitions else self._consumer_name

    def is_connected(self) -> bool:
        return all(p.connected for p in self._partitions + self._retry)

    def has_reached_end_of_topic(self) -> bool:
        """True once the topic was terminated and the broker has sent every message of
        it (of every partition) to this consumer (Pulsar's ``hasReachedEndOfTopic``;
        messages may still wait in the receive queue). A seek makes it False again."""
        return bool(self._partitions) and all(p.reached_end_of_topic for p in self._partitions)

    @property
    def partitions(self) -> list[PartitionConsumer]:
        return self._partitions

    @property
    def reads_compacted(self) -> bool:
        return self._conf.is_read_compacted

    def queued(self) -> int:
        """How many received messages wait in the receive queue."""
        return len(self._queue)

    def _partition_of(self, mid: MessageId) -> PartitionConsumer:
        if len(self._partitions) == 1:
            return self._partitions[0]
        if not 0 <= mid.partition() < len(self._partitions):
            raise InvalidArgument(f"message id {mid} names no partition of {self._topic}")
        return self._partitions[mid.partition()]

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed(f"consumer on {self._topic} is closed")

    def _check_receivable(self) -> None:
        self._check_open()
        if self._listened:
            raise InvalidConfiguration(
                f"cannot receive on the consumer on {self._topic}: its message_listener gets every message"
            )

    # -- listener ------------------------------------------------------------------------
    def reserve_for_listener(self) -> None:
        """From now on a listener takes every message: ``receive`` and ``batch_receive``
        raise InvalidConfiguration (as pulsar-client's). The blocking client's listener
        thread takes them with ``take_blocking(listener=True)``."""
        self._listened = True

    def listen(self, fn: Listener, handle: object, next_message: Callable[[], Awaitable[Message]] | None = None) -> None:
        """Call ``fn(handle, message)`` on the loop for each message (see
        :mod:`magnetar.client.listener`); the task is this consumer's, ended by close.
        ``next_message``: how to take one (a reader's, which keeps its read position)."""
        self.reserve_for_listener()
        self._listener = asyncio.create_task(
            run_listener(next_message or self._receive, fn, handle, f"consumer on {self._topic}"),
            name=f"listener:{self._topic}",
        )

    # -- receiving -----------------------------------------------------------------------
    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message.

        Raises:
            Timeout: no message within ``timeout_millis`` (None: wait for ever).
        """
        self._check_receivable()
        return await self._receive(timeout_millis)

    async def _receive(self, timeout_millis: int | None = None) -> Message:
        self._check_open()
        owner, msg = await self._queue.get(None if timeout_millis is None else timeout_millis / 1000)
        owner.message_taken(msg)
        return msg

    def take_blocking(self, timeout_millis: int | None = None, *, listener: bool = False) -> Queued:
        """The next queued (partition, message), waited for in the calling thread.

        For the blocking client: call from any thread but the loop's, and have the loop
        run ``partition.message_taken(message)`` afterwards (it grants the permit back).
        ``listener``: the blocking client's listener thread takes it.
        """
        if listener:
            self._check_open()
        else:
            self._check_receivable()
        return self._queue.get_blocking(None if timeout_millis is None else timeout_millis / 1000)

    async def batch_receive(self) -> list[Message]:
        """The messages received, taken at once under the ``batch_receive_policy``
        (Pulsar's ``batch_receive``; a list instead of a ``Messages`` object).

        Returns as soon as the queued messages reach ``max_num_message`` (capped at
        ``receiver_queue_size``) or ``max_num_bytes`` of payload, or once ``timeout_ms``
        has passed since the call, with what arrived by then: possibly an empty list
        (never a Timeout). A batch holds at most ``max_num_message`` messages and at most
        ``max_num_bytes`` (but at least one message, whatever its size), in arrival
        order; acknowledge each as usual. Every message keeps its topic (multi-topic and
        partitioned consumers).

        Raises:
            ServiceClosed: the consumer is closed.
            InvalidConfiguration: the consumer has a message listener.
        """
        self._check_receivable()
        max_items, max_bytes, timeout_s = self._batch
        batch = await self._queue.get_batch(max_items, max_bytes, timeout_s, _payload_size, self.grant_held)
        messages, grants = split_batch(batch)
        grant_batch(grants)
        return messages

    def take_batch_blocking(self, on_wait: Callable[[], None] | None = None) -> list[Queued]:
        """A batch of queued (partition, message) under the policy, waited for in the
        calling thread (see :meth:`batch_receive`).

        For the blocking client: call from any thread but the loop's; have the loop run
        :func:`grant_batch` of :func:`split_batch`'s grants afterwards, and
        :meth:`grant_held` when ``on_wait`` is called (the batch has to wait).
        """
        self._check_receivable()
        max_items, max_bytes, timeout_s = self._batch
        return self._queue.get_batch_blocking(max_items, max_bytes, timeout_s, _payload_size, on_wait)

    def grant_held(self) -> None:
        """Grant every partition's held-back permits now (see ``PartitionConsumer.grant_held``)."""
        for p in self._partitions + self._retry:
            p.grant_held()

    def target_of(self, message: MessageOrId) -> tuple[PartitionConsumer, MessageId]:
        """The partition consumer that owns ``message`` and its id (checks both; pure).

        A message of the retry letter topic is known by its topic: pass the Message (a
        bare MessageId names the subscribed topic's partitions). On a consumer of several
        topics every message is known by its topic: a bare MessageId is refused.

        Raises:
            InvalidArgument: a MessageId on a consumer of several topics, a Message of a
                topic this consumer is not subscribed to (several topics), or an id that
                names no partition (one topic).
        """
        self._check_open()
        mid = _id_of(message)
        if self._multi:
            if not isinstance(message, Message):
                raise InvalidArgument(
                    f"a MessageId does not say which of the {len(self._topics)} topics of this consumer it "
                    "belongs to: pass the Message"
                )
            owner = self._by_topic.get(message.topic_name())
            if owner is None:
                raise InvalidArgument(f"message of {message.topic_name()} is not from a topic of this consumer")
            return owner, mid
        if self._retry and isinstance(message, Message):
            owner = self._retry_by_topic.get(message.topic_name())
            if owner is not None:
                return owner, mid
        return self._partition_of(mid), mid

    async def acknowledge(self, message: MessageOrId) -> None:
        """Acknowledge one message (an entry is acked once all its messages are)."""
        if self._of_topic_left(message):
            return
        owner, mid = self.target_of(message)
        owner.ack(mid)

    async def get_last_message_id(self) -> MessageId:
        """The id of the topic's last message, as the broker stores it (pulsar-client's
        ``Consumer.get_last_message_id``): in a batch, the index of its last message;
        ``entry_id() == -1`` when the topic has no message yet.

        Raises:
            OperationNotSupported: a consumer of a partitioned topic or of several topics
                (pulsar-client's multi-topics consumer refuses it the same way; subscribe a
                partition by its name to ask it).
            AlreadyClosed: the consumer is closed.
        """
        self._check_open()
        (only,) = self._partitions if len(self._partitions) == 1 else (None,)
        if self._multi or only is None or only.topic != self._topics[0]:
            raise OperationNotSupported(
                f"get_last_message_id is not supported on {self._topic}: a partitioned topic or several topics "
                "(as in pulsar-client); ask each partition by its name"
            )
        last = await only.pool.last_message_id(only.topic, self._conf.is_read_compacted)
        return MessageId.trusted(last.partition, last.ledger_id, last.entry_id, last.batch_index)

    async def acknowledge_cumulative(self, message: MessageOrId) -> None:
        """Acknowledge this message and every earlier one of its partition."""
        self._check_open()
        if self._conf.consumer_type in (ConsumerType.Shared, ConsumerType.KeyShared):
            raise CumulativeAcknowledgementNotAllowedError("cumulative acknowledgement is not allowed on Shared and KeyShared subscriptions")
        if self._of_topic_left(message):
            return
        owner, mid = self.target_of(message)
        owner.ack_cumulative(mid)

    async def negative_acknowledge(self, message: MessageOrId) -> None:
        """Have the message (its whole entry) redelivered after the negative-ack delay
        (with ``negative_ack_redelivery_backoff``: the backoff's for the message's
        redelivery count; a bare MessageId counts 0)."""
        if self._of_topic_left(message):
            return
        owner, mid = self.target_of(message)
        owner.nack(mid, message.redelivery_count() if isinstance(message, Message) else 0)

    async def reconsume_later(
        self, message: Message, delay: timedelta | int | None = None, *, level: int | None = None
    ) -> None:
        """Consume ``message`` again later: the broker acknowledges it and publishes a
        copy, delayed, to the retry letter topic (this consumer is subscribed to it);
        after ``max_redeliver_count`` retries the copy goes to the dead letter topic.

        ``delay``: a timedelta or milliseconds, 1 s to 864,000 s. ``level``: delay level
        n of ``retry_delay_levels`` (1 is the first). Neither: the message's next level
        (1 s on the first retry, 5 s on the second, …). The copy's properties carry
        ``REAL_TOPIC``, ``ORIGIN_MESSAGE_ID``, ``RETRY_TOPIC``, ``RECONSUMETIMES`` and
        ``DELAY_TIME``. On Exclusive and Failover subscriptions the message is
        redelivered at once instead (no delay, no retry topic).

        Raises:
            InvalidArgument: no ``enable_retry``, both a delay and a level, or one out of
                range (nothing changed).
            OperationNotSupported: a chunked message (nothing changed).
            MagnetarError: the broker's refusal (typed), NotConnected, Timeout; the
                message then stays unacknowledged and is negatively acknowledged: it
                comes back after ``negative_ack_redelivery_delay_ms``.
        """
        if not isinstance(message, Message):
            raise TypeError(f"reconsume_later takes a received Message, not {type(message).__name__}")
        if not self._conf.enable_retry:
            raise InvalidArgument("reconsume_later needs a consumer subscribed with enable_retry=True")
        if isinstance(message.message_id(), ChunkMessageId):
            # The broker moves entries; a chunked message is several (not built yet).
            raise OperationNotSupported(
                f"reconsume_later of a chunked message ({message.message_id()}) is not supported; "
                "negative_acknowledge it to have it delivered again"
            )
        delay_ms = reconsume_delay_ms(message, self._delay_levels_ms, delay, level)
        owner, mid = self.target_of(message)
        await owner.reconsume_later(mid, delay_ms)

    async def redeliver_unacknowledged_messages(self) -> None:
        self._check_open()
        for p in self._partitions + self._retry:
            p.redeliver_all()

    async def seek(self, message_id_or_timestamp: SeekTarget) -> None:
        """Move the subscription: to a message id, or to the first message published at
        or after a time (an int, ms since the epoch).

        After a seek to an id, the first message received is the one after it, or that
        message itself when the consumer was made with ``start_message_id_inclusive``
        (pulsar-client's startMessageIdInclusive): the broker starts again at the id's
        entry and this consumer drops what comes before (as pulsar-client's consumer).

        Every consumer of the subscription drops what it had received and not taken
        and starts again from there. On a partitioned topic a time,
        ``MessageId.earliest`` and ``MessageId.latest`` move every partition; another id
        moves the partition it names. On a consumer of several topics a time,
        ``MessageId.earliest`` and ``MessageId.latest`` move every partition of every
        topic (not the retry letter topics); another id is refused.

        Raises:
            InvalidArgument: a negative time, an id that names no partition, or an id
                other than earliest and latest on a consumer of several topics.
            MagnetarError: the broker's refusal (typed), NotConnected, Timeout.
        """
        self._check_open()
        target = message_id_or_timestamp
        if self._multi and isinstance(target, MessageId) and target not in (MessageId.earliest, MessageId.latest):
            raise InvalidArgument(
                "a consumer of several topics seeks to a time, MessageId.earliest or MessageId.latest, "
                f"not to the message id {target}"
            )
        await seek_partitions(self._topic, self._partitions, message_id_or_timestamp)

    async def unsubscribe(self) -> None:
        """Delete the subscription (every partition's) and close this consumer.

        Raises:
            MagnetarError: the broker's refusal (typed; e.g. other consumers are still
                attached), NotConnected, Timeout. When no partition was unsubscribed
                the consumer stays open; otherwise it is closed.
        """
        self._check_open()
        everything = self._partitions + self._retry
        results = await asyncio.gather(*(p.unsubscribe() for p in everything), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if not results or len(errors) < len(results):  # a pattern consumer may have no topic
            await self.close()
        if errors:
            raise errors[0]

    async def close(self) -> None:
        """Send pending acks and close every partition's stream."""
        await self._close(flush=True)

    async def _close(self, flush: bool) -> None:
        """``flush=False`` (``Client.shutdown``): drop pending acks, cut the streams."""
        if self._closed:
            return
        self._closed = True
        listener, self._listener = self._listener, None
        if listener is not None and listener is not asyncio.current_task():  # a listener may close its consumer
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        if self._discovery is not None:
            await self._discovery.close()
        if self._auto_update is not None:
            await self._auto_update.close()
        await asyncio.gather(*(p.close(flush) for p in self._partitions + self._retry))
        self._queue.fail(AlreadyClosed(f"consumer on {self._topic} is closed"))


async def seek_partitions(topic: str, partitions: list[PartitionConsumer], target: SeekTarget) -> None:
    """Seek the partitions ``target`` concerns (see :meth:`Consumer.seek`)."""
    if isinstance(target, MessageId):
        if target in (MessageId.earliest, MessageId.latest) or len(partitions) == 1:
            chosen, mid, ts = partitions, target, None
        elif 0 <= target.partition() < len(partitions):
            chosen, mid, ts = [partitions[target.partition()]], target, None
        else:
            raise InvalidArgument(f"message id {target} names no partition of {topic}")
    elif isinstance(target, int) and not isinstance(target, bool):
        if target < 0:
            raise InvalidArgument(f"a seek time is ms since the epoch, not {target}")
        chosen, mid, ts = partitions, None, target
    else:
        raise TypeError(f"seek takes a MessageId or a timestamp in ms (int), not {type(target).__name__}")
    results = await asyncio.gather(*(p.seek(mid, ts) for p in chosen), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r


def retry_targets(
    conf: ConsumerConfig, names: list[str], groups: list[list[PartitionConsumer]]
) -> list[tuple[str, ConsumerConfig]]:
    """The retry letter topics to subscribe with ``enable_retry``, each once, with its
    config: from its earliest message, under the policy the broker resolved for the first
    topic naming it. ``groups[i]`` are the subscribed partition consumers of ``names[i]``;
    a retry topic that is one of ``names`` is subscribed already.

    Raises:
        MagnetarError: the broker named no retry letter topic for one of the topics.
    """
    targets: dict[str, ConsumerConfig] = {}
    for name, group in zip(names, groups, strict=True):
        policy = group[0].dead_letter_policy
        if policy is None or not policy.retry_letter_topic:
            raise MagnetarError(f"the broker named no retry letter topic for {name}; is it older than this client?")
        retry_topic = str(TopicName.parse(policy.retry_letter_topic))
        if retry_topic in targets or retry_topic in names:
            continue
        targets[retry_topic] = dataclasses.replace(
            conf,
            initial_position=InitialPosition.Earliest,
            start_message_id=None,
            dead_letter_policy=ConsumerDeadLetterPolicy(
                max_redeliver_count=policy.max_redeliver_count, dead_letter_topic=policy.dead_letter_topic,
                retry_letter_topic=policy.retry_letter_topic,
                initial_subscription_name=policy.initial_subscription_name,
            ),
        )
    return list(targets.items())


async def _close(partitions: list[PartitionConsumer], flush: bool = True) -> None:
    await asyncio.gather(*(p.close(flush) for p in partitions), return_exceptions=True)


def _base_topic(p: PartitionConsumer) -> str:
    """The topic ``p`` was subscribed for: its partitioned topic's name, or its own."""
    return str(TopicName.parse(p.topic).partitioned_topic_name) if p.partition >= 0 else p.topic


def _failure(task: asyncio.Task[list[PartitionConsumer]]) -> BaseException | None:
    return asyncio.CancelledError() if task.cancelled() else task.exception()


async def _abandon(tasks: list[asyncio.Task[list[PartitionConsumer]]]) -> None:
    """Cancel the subscribes still going on and close what the others opened."""
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)
    await _close([p for task in tasks if _failure(task) is None for p in task.result()])


async def _subscribe_all(
    pool: ConnectionPool, targets: list[tuple[str, ConsumerConfig]], consumer_name: str, queue: ReceiveQueue[Queued],
    tolerate_deletion: bool = False,
) -> list[list[PartitionConsumer]]:
    """:func:`_subscribe` every (topic, config) at once: the partition consumers of each
    topic, in order. All or nothing: at the first failure (or a cancellation) the other
    subscribes are cancelled, every partition consumer opened is closed, and the error
    raised (the first in ``targets`` order when several failed)."""
    if not targets:
        return []
    tasks = [asyncio.create_task(_subscribe(pool, t, c, consumer_name, queue, tolerate_deletion)) for t, c in targets]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        await _abandon(tasks)
        raise
    errors = [e for e in (_failure(t) for t in tasks if t.done()) if e is not None]
    if errors:
        await _abandon(tasks)
        raise errors[0]
    return [task.result() for task in tasks]


async def _partition_consumers(
    pool: ConnectionPool, topic: str, conf: ConsumerConfig, consumer_name: str, queue: ReceiveQueue[Queued],
    tolerate_deletion: bool = False,
) -> list[PartitionConsumer]:
    """Partition consumers of every partition of ``topic`` (the topic itself when it is
    not partitioned), not started. ``tolerate_deletion``: a pattern consumer's (see
    ``PartitionConsumer.tolerate_deletion``)."""
    name = TopicName.parse(topic)
    count = await pool.partitions(str(name), auto_create=True)
    topics = [(str(name), -1)] if count == 0 else [(str(name.partition(i)), i) for i in range(count)]
    partitions = [PartitionConsumer(pool, t, i, conf, consumer_name, queue) for t, i in topics]
    for p in partitions:
        p.tolerate_deletion = tolerate_deletion
    return partitions


async def _start(partitions: list[PartitionConsumer]) -> None:
    """Start (subscribe) them all; on failure none is left open."""
    try:
        await asyncio.gather(*(p.start() for p in partitions))
    except BaseException:
        await asyncio.gather(*(p.close() for p in partitions), return_exceptions=True)
        raise


async def _subscribe(
    pool: ConnectionPool, topic: str, conf: ConsumerConfig, consumer_name: str, queue: ReceiveQueue[Queued],
    tolerate_deletion: bool = False,
) -> list[PartitionConsumer]:
    """:func:`_partition_consumers` of ``topic``, subscribed; none is left open on failure."""
    partitions = await _partition_consumers(pool, topic, conf, consumer_name, queue, tolerate_deletion)
    await _start(partitions)
    return partitions
