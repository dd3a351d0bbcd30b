"""Publishing rows (executor side): the ``magnetar`` writer and the replay job share it.

Columns: ``value`` (binary, required) and optionally ``key`` (string), ``properties``
(map<string,string>), ``event_time`` (timestamp), ``topic`` (per row; else the
``topic`` option), ``producer_name``, ``sequence_id`` (long), and, to acknowledge each
row's source message once its publish is confirmed, ``ack_topic``, ``ack_message_id``
(a chunked source message: every entry it was read from, ``;``-separated, each
acknowledged), ``ack_entry_size`` and ``ack_subscription`` (or the ``ack.subscription``
option).

A value over the max message size (a chunked message read whole) goes as chunks: its
producer name's batching producer is flushed and replaced by a chunking, unbatched one
(Pulsar's producers do not batch and chunk at once), and back for the next value that
fits; one producer per name at a time, so the name's sends stay one ordered stream.

Deduplication: every (target partition, producer name) gets one producer; rows with a
``sequence_id`` not above the producer's last stored one (told by the broker when the
producer opens) are not sent again — they were stored by an earlier attempt — and count
as confirmed. Rows of one producer name must come in increasing ``sequence_id`` order
and in one task (the replay job makes sure). A task returns only after every send is
confirmed and every ack written; any failure raises, so Spark retries the task.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from magnetar.client.options import DEFAULT_MAX_MESSAGE_SIZE

from .options import (
    ACK_SUBSCRIPTION,
    AUTH_TOKEN,
    FAIL_AFTER,
    FAIL_MARKER,
    PRODUCER_NAME,
    SERVICE_URL,
    TOPIC,
    OptionError,
)

WINDOW = 10_000
"""Sends in flight per producer."""
MAX_MESSAGE_SIZE = DEFAULT_MAX_MESSAGE_SIZE
"""Values above it are sent as chunks (the producers' ``max_message_size``)."""


class PublishFailed(RuntimeError):
    """Some sends of a task were not confirmed (nothing of them was acknowledged)."""


class InjectedFailure(RuntimeError):
    """The test hook's failure (``test.failTaskAfter``)."""


@dataclass(frozen=True)
class WriterOptions:
    service_url: str
    topic: str | None
    token: str | None
    producer_prefix: str
    ack_subscription: str | None
    fail_after: int | None = None
    fail_marker: str | None = None
    admin_url: str | None = None
    """With it, rows whose target topic does not exist are counted (``missing``), not sent."""
    skip_without_topic: bool = False
    """Rows without a topic are counted (``no_topic``) instead of failing the task."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriterOptions:
        lowered = {str(k).lower(): str(v) for k, v in options.items()}
        service_url = lowered.get(SERVICE_URL.lower())
        if not service_url:
            raise OptionError(f"option {SERVICE_URL!r} is required (magnetar://host:6660)")
        fail_after = lowered.get(FAIL_AFTER.lower())
        return cls(
            service_url=service_url, topic=lowered.get(TOPIC) or None, token=lowered.get(AUTH_TOKEN.lower()) or None,
            producer_prefix=lowered.get(PRODUCER_NAME.lower()) or f"spark-{uuid.uuid4().hex[:12]}",
            ack_subscription=lowered.get(ACK_SUBSCRIPTION.lower()) or None,
            fail_after=int(fail_after) if fail_after else None, fail_marker=lowered.get(FAIL_MARKER.lower()) or None,
            admin_url=lowered.get("admin.url") if lowered.get("checktargets", "false") == "true" else None,
            skip_without_topic=lowered.get("skiprowswithouttopic", "false") == "true",
        )


@dataclass
class PublishStats:
    sent: int = 0
    """Published and confirmed in this attempt."""
    duplicates: int = 0
    """Stored by an earlier attempt (not sent again)."""
    acked: int = 0
    failed: int = 0
    no_topic: int = 0
    """Rows without a target topic (left alone)."""
    missing: Counter[str] = field(default_factory=Counter)
    """Rows whose target topic does not exist, per topic (left alone)."""
    by_topic: Counter[str] = field(default_factory=Counter)
    """Confirmed (sent + duplicates) per target topic."""
    errors: list[str] = field(default_factory=list)
    publish_s: float = 0.0
    ack_s: float = 0.0


class _Task:
    """One task's producers and ack consumers."""

    def __init__(self, opts: WriterOptions, task_id: int) -> None:
        import magnetar.asyncio as mg

        self.opts = opts
        self.task_id = task_id
        auth = mg.AuthenticationToken(opts.token) if opts.token else None
        self.client = mg.Client(opts.service_url, authentication=auth)
        self.partitions: dict[str, list[str]] = {}
        self.producers: dict[tuple[str, str], tuple[Any, int]] = {}
        self.chunking: set[tuple[str, str]] = set()
        """(partition, name) whose producer is the chunking one."""
        self.consumers: dict[tuple[str, str], Any] = {}
        self.pending: set[asyncio.Future[Any]] = set()
        # (topic, subscription, ledger, entry, messages the entry stands for)
        self.confirmed_entries: list[tuple[str, str, int, int, int]] = []
        self.entry_counts: Counter[tuple[str, str, int, int]] = Counter()
        self.stats = PublishStats()
        self.exists: dict[str, bool] = {}
        self.single: dict[tuple[str, str], tuple[Any, int]] = {}

    async def target_exists(self, topic: str) -> bool:
        if self.opts.admin_url is None:
            self.exists[topic] = True
            return True
        known = self.exists.get(topic)
        if known is None:
            from magnetar.client.rest_admin import RestAdmin
            from magnetar.common.errors import NotFound

            from .gateway import partitions

            async with RestAdmin(self.opts.admin_url, token=self.opts.token) as admin:
                try:
                    await partitions(admin, topic)
                    known = True
                except NotFound:
                    known = False
            self.exists[topic] = known
        return known

    async def target(self, topic: str, key: str | None, seq: int | None, row_index: int) -> str:
        from magnetar.common.keyhash import partition_for_key

        names = self.partitions.get(topic)
        if names is None:
            names = self.partitions[topic] = await self.client.get_topic_partitions(topic)
        if len(names) == 1:
            return names[0]
        if key is not None:
            return names[partition_for_key(key, len(names))]
        return names[(seq if seq is not None else row_index) % len(names)]

    async def producer(self, partition_topic: str, name: str, chunking: bool = False) -> tuple[Any, int]:
        """The producer of ``name`` on the partition and the last sequence id stored under
        that name when it was first opened; ``chunking``: one that chunks (unbatched),
        replacing a batching one (flushed first: the name's sends stay in order)."""
        key = (partition_topic, name)
        entry = self.producers.get(key)
        if entry is not None and chunking != (key in self.chunking):
            await entry[0].flush()
            if self.pending:  # their callbacks (added first) have run once wait() returns
                await asyncio.wait(list(self.pending))
            if self.stats.failed:  # nothing more under this name: a retry must not take the failed send for stored
                raise PublishFailed(f"task {self.task_id}: a send failed before {name} switched producers: "
                                    f"{'; '.join(self.stats.errors)}")
            await entry[0].close()
            self.single = {k: v for k, v in self.single.items() if v[0] is not entry[0]}
        elif entry is not None:
            return entry
        if chunking:
            producer = await self.client.create_producer(
                partition_topic, producer_name=name, batching_enabled=False, chunking_enabled=True,
                max_message_size=MAX_MESSAGE_SIZE, max_pending_messages=WINDOW, block_if_queue_full=True,
            )
            self.chunking.add(key)
        else:
            producer = await self.client.create_producer(
                partition_topic, producer_name=name, batching_enabled=True, batching_max_messages=1000,
                batching_max_publish_delay_ms=5, max_message_size=MAX_MESSAGE_SIZE, max_pending_messages=WINDOW,
                block_if_queue_full=True,
            )
            self.chunking.discard(key)
        # The skip rule keeps the last id stored before this attempt (a replacement sees
        # this attempt's own sends, all above it anyway).
        last = entry[1] if entry is not None else producer.last_sequence_id()
        entry = self.producers[key] = (producer, last)
        return entry

    async def consumer(self, topic: str, subscription: str) -> Any:
        import magnetar.asyncio as mg

        consumer = self.consumers.get((topic, subscription))
        if consumer is None:
            consumer = self.consumers[(topic, subscription)] = await self.client.subscribe(
                topic, subscription, consumer_type=mg.ConsumerType.Shared, receiver_queue_size=1,
            )
        return consumer

    def _confirmed(self, topic: str, ack: _Ack | None, fut: asyncio.Future[Any] | None) -> None:
        if fut is not None:
            self.pending.discard(fut)
            if fut.cancelled() or fut.exception() is not None:
                self.stats.failed += 1
                if len(self.stats.errors) < 5:
                    self.stats.errors.append(repr(fut.exception()) if not fut.cancelled() else "cancelled")
                return
            self.stats.sent += 1
        else:
            self.stats.duplicates += 1
        self.stats.by_topic[topic] += 1
        if ack is None:
            return
        ack_topic, sub, entries, size = ack
        if len(entries) > 1:  # a chunked message: every chunk's entry, counted once
            self.confirmed_entries.extend(
                (ack_topic, sub, ledger, entry, int(i == len(entries) - 1)) for i, (ledger, entry) in enumerate(entries)
            )
            return
        key = (ack_topic, sub, *entries[0])
        self.entry_counts[key] += 1
        if self.entry_counts[key] >= size:
            del self.entry_counts[key]
            self.confirmed_entries.append((*key, size))

    async def flush_acks(self) -> None:
        from magnetar.common.message_id import MessageId

        started = time.monotonic()
        entries, self.confirmed_entries = self.confirmed_entries, []
        for topic, subscription, ledger, entry, size in entries:
            consumer = await self.consumer(topic, subscription)
            await consumer.acknowledge(MessageId(ledger_id=ledger, entry_id=entry, partition=-1, batch_index=-1))
            self.stats.acked += size
        self.stats.ack_s += time.monotonic() - started

    async def close(self) -> None:
        """Close the ack consumers first (a close writes the pending acks and waits until the
        broker ended the stream, i.e. processed them), then the producers."""
        started = time.monotonic()
        await asyncio.gather(*(c.close() for c in self.consumers.values()))
        self.stats.ack_s += time.monotonic() - started
        await self.client.close()


_Ack = tuple[str, str, tuple[tuple[int, int], ...], int]
"""(topic, subscription, the (ledger, entry) of every entry of the message, entry size)."""


def ack_entries(message_id: str) -> tuple[tuple[int, int], ...]:
    """The entries ``ack_message_id`` names: ``ledger:entry[:partition[:batch]]``, or a
    chunked message's every chunk separated by ``;``.

    Raises:
        ValueError: not such an id.
    """
    out = []
    for part in message_id.split(";"):
        fields = part.split(":")
        if len(fields) < 2:
            raise ValueError(f"ack_message_id {message_id!r} is not ledger:entry[:partition[:batch]][;...]")
        out.append((int(fields[0]), int(fields[1])))
    return tuple(out)


def _column(batch: Any, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


async def _publish(opts: WriterOptions, batches: Iterable[Any], task_id: int, attempt: int, failing: bool) -> PublishStats:
    task = _Task(opts, task_id)
    started = time.monotonic()
    row_index = 0
    try:
        for batch in batches:
            values = _column(batch, "value")
            if values is None:
                raise OptionError("the rows to write need a 'value' column (binary)")
            keys, props, events = _column(batch, "key"), _column(batch, "properties"), _column(batch, "event_time")
            topics, names, seqs = _column(batch, "topic"), _column(batch, "producer_name"), _column(batch, "sequence_id")
            ack_topics, ack_ids = _column(batch, "ack_topic"), _column(batch, "ack_message_id")
            ack_sizes, ack_subs = _column(batch, "ack_entry_size"), _column(batch, "ack_subscription")
            for i, value in enumerate(values):
                topic = (topics[i] if topics else None) or opts.topic
                if not topic:
                    if opts.skip_without_topic:
                        task.stats.no_topic += 1
                        continue
                    raise OptionError("a row has no 'topic' and the writer no 'topic' option")
                known = task.exists.get(topic)
                if known is None:
                    known = await task.target_exists(topic)
                if not known:
                    task.stats.missing[topic] += 1
                    continue
                key = keys[i] if keys else None
                seq = seqs[i] if seqs else None
                name = (names[i] if names else None) or f"{opts.producer_prefix}-{task_id}"
                ack = None
                sub = (ack_subs[i] if ack_subs else None) or opts.ack_subscription
                if ack_topics and ack_ids and ack_topics[i] and ack_ids[i] and sub:
                    ack = (ack_topics[i], sub, ack_entries(ack_ids[i]), int(ack_sizes[i]) if ack_sizes and ack_sizes[i] else 1)
                big = value is not None and len(value) > MAX_MESSAGE_SIZE
                single = task.single.get((topic, name)) if not big else None  # the usual case: one partition, no await
                if single is None:
                    target = await task.target(topic, key, seq, row_index)
                    producer, last = await task.producer(target, name, chunking=big)
                    if len(task.partitions[topic]) == 1 and not big:
                        task.single[(topic, name)] = (producer, last)
                else:
                    producer, last = single
                row_index += 1
                if seq is not None and seq <= last:
                    task._confirmed(topic, ack, None)
                    continue
                event = events[i] if events else None
                prop_map = dict(props[i]) if props and props[i] else None
                fut = await producer.enqueue(
                    value if value is not None else b"", properties=prop_map, partition_key=key, sequence_id=seq,
                    event_timestamp=int(event.timestamp() * 1000) if event is not None else None,
                )
                task.pending.add(fut)
                fut.add_done_callback(lambda f, t=topic, a=ack: task._confirmed(t, a, f))
            await task.flush_acks()
            if failing and task.stats.sent >= (opts.fail_after or 0):
                raise InjectedFailure(f"injected task failure after {task.stats.sent} confirmed sends")
        await asyncio.gather(*(p.flush() for p, _ in task.producers.values()), return_exceptions=True)
        if task.pending:
            await asyncio.wait(list(task.pending))
        if failing and task.stats.sent >= (opts.fail_after or 0):
            raise InjectedFailure(f"injected task failure after {task.stats.sent} confirmed sends")
        await task.flush_acks()
        task.stats.publish_s = time.monotonic() - started - task.stats.ack_s
    finally:
        await task.close()
    if task.stats.failed:
        raise PublishFailed(
            f"task {task_id} (attempt {attempt}): {task.stats.failed} sends not confirmed "
            f"(not acknowledged; the retry resends them): {'; '.join(task.stats.errors)}"
        )
    return task.stats


def publish(opts: WriterOptions, batches: Iterable[Any]) -> PublishStats:
    """Publish every row of ``batches`` (Arrow record batches) in this task; see the
    module docstring."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    task_id = ctx.partitionId() if ctx is not None else 0
    attempt = ctx.attemptNumber() if ctx is not None else 0
    failing = opts.fail_after is not None and opts.fail_marker is not None and not os.path.exists(opts.fail_marker)
    try:
        return asyncio.run(_publish(opts, batches, task_id, attempt, failing))
    except InjectedFailure:
        assert opts.fail_marker is not None
        with open(opts.fail_marker, "w") as f:  # once per marker: the retry goes through
            f.write(f"task {task_id} attempt {attempt}\n")
        raise


STATS_DDL = (
    "sent LONG, duplicates LONG, acked LONG, failed LONG, no_topic LONG, topic STRING, confirmed LONG, "
    "missing LONG, publish_s DOUBLE, ack_s DOUBLE"
)


def stats_batches(stats: PublishStats) -> Iterator[Any]:
    """A task's stats as one Arrow batch (``STATS_DDL``): one row per target topic, the
    task's totals on the first."""
    import pyarrow as pa

    topics = sorted(set(stats.by_topic) | set(stats.missing)) or [""]
    first = [1] + [0] * (len(topics) - 1)
    columns: dict[str, list[Any]] = {
        "sent": [stats.sent * f for f in first], "duplicates": [stats.duplicates * f for f in first],
        "acked": [stats.acked * f for f in first], "failed": [stats.failed * f for f in first],
        "no_topic": [stats.no_topic * f for f in first], "topic": topics,
        "confirmed": [stats.by_topic.get(t, 0) for t in topics], "missing": [stats.missing.get(t, 0) for t in topics],
        "publish_s": [stats.publish_s * f for f in first], "ack_s": [stats.ack_s * f for f in first],
    }
    types = {"topic": pa.string(), "publish_s": pa.float64(), "ack_s": pa.float64()}
    schema = pa.schema([(name, types.get(name, pa.int64())) for name in columns])
    yield pa.RecordBatch.from_pydict(columns, schema=schema)


@dataclass
class MagnetarCommit(WriterCommitMessage):
    sent: int
    duplicates: int
    acked: int


class MagnetarWriter(DataSourceArrowWriter):
    """``df.write.format("magnetar")``: each task publishes its rows (see the module docstring)."""

    def __init__(self, opts: WriterOptions) -> None:
        self.opts = opts

    @classmethod
    def from_options(cls, options: Mapping[str, str], columns: list[str]) -> MagnetarWriter:
        if "value" not in columns:
            raise OptionError(f"the rows to write need a 'value' column; they have {', '.join(columns)}")
        return cls(WriterOptions.parse(options))

    def write(self, iterator: Iterator[Any]) -> MagnetarCommit:
        stats = publish(self.opts, iterator)
        return MagnetarCommit(stats.sent, stats.duplicates, stats.acked)
