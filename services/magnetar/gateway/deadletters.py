"""Dead-letter tools: find a namespace's DLQ topics, look into one, and replay it.

Looking (:func:`summarize`, :func:`letters`) reads a DLQ subscription's unacknowledged
messages through the broker's peek (nothing is acknowledged or redelivered); a summary
scans up to ``scan_limit`` messages per DLQ and says whether it saw them all. Peek shows
stored entries, one per chunk of a chunked message; these tools show messages as a
consumer receives them: a chunked dead letter is one, whole (its chunks joined and
opened as the SDK's assembler does), at the position of its last chunk, and counted
once. Chunks of a message that never completes (a move cut short by a broker crash
leaves some, docs/retry-dlq.md) are no message: neither shown nor counted.

A replay moves a DLQ's messages back to their ``REAL_TOPIC`` (or a given target):
publish first, acknowledge in the DLQ second, so a replay interrupted anywhere and run
again never loses a message; deduplication makes it never duplicate one either. Each
DLQ partition publishes to each target through a producer of its own, named
``dlq-replay:<DLQ partition>:<scope>`` (scope ``all`` for "all" and "the first N"
replays, a digest of the id list for a replay of chosen ids), with the sequence id
packed from the DLQ message id (:func:`magnetar.client.deadletters.sequence_id`): the DLQ is read in order, so the
ids grow, and a message published before an interruption comes back from the target's
deduplication as a duplicate instead of a second copy.

A chunked dead letter (the broker moves a chunked message as one, docs/retry-dlq.md) is
received whole, sent whole (the replay's producer chunks what is over the max message
size) and acknowledged, every chunk of it, once stored.

The copy keeps the payload, key, event time and properties, with ``RECONSUMETIMES``
cleared, ``REPLAYED_AT`` (ms) and ``REPLAY_COUNT`` (+1) set and ``ORIGIN_MESSAGE_ID``
kept (the DLQ message's id when it had none).

A send that fails is not acknowledged, and the replay stops taking new messages (so
nothing after it is published under the same producer: a later run must not take the
failed one for a duplicate). Its id and the reason are reported; replay it by id.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import magnetar.asyncio as mg
from magnetar.client.chunks import ChunkedMessageAssembler, ChunkInfo
from magnetar.client.deadletters import is_dlq_topic as is_dlq_topic  # re-exported: routers, tests
from magnetar.client.deadletters import replay_properties as replay_properties
from magnetar.client.deadletters import sequence_id as sequence_id
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.letters import REAL_TOPIC
from magnetar.common.message_id import MessageId
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.client.admin import AdminClient

log = logging.getLogger(__name__)

DEFAULT_SUBSCRIPTION = "dlq-replay"
"""The subscription a replay reads through when the DLQ has none."""
IDLE_S = 1.5
"""A replay ends when nothing more arrives for this long (its snapshot's end may be acked)."""
WINDOW = 1000
"""Sends in flight at once."""

PEEK_PAGE = 500
"""Messages read per peek call (at most)."""
CHUNK_PAGE = 4
"""Entries per peek call after a page holding chunks."""


@dataclass(frozen=True)
class DeadLetter:
    """One DLQ message as a consumer receives it."""

    message_id: str
    """``ledger:entry:partition:batch``; a chunked one's ``<first chunk>;<last chunk>``."""
    entry: pb.PeekMessageResponse
    """Its entry (a chunked message's first chunk: its properties, key, times, producer)."""
    payload: bytes
    """The whole payload (a chunked message's chunks joined and decompressed)."""
    chunks: int = 1
    """Entries it is stored in (its chunks, a producer's resent ones too)."""


@dataclass
class DlqSummary:
    topic: str
    subscription: str
    backlog: int
    """Unacknowledged messages seen (all of them when ``complete``)."""
    complete: bool
    oldest_publish_ms: int | None
    by_real_topic: Counter[str]


def _id_text(mid: MessageId) -> str:
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}"


async def _pages(admin: AdminClient, partition: str, subscription: str, first: int) -> AsyncIterator[pb.PeekMessageResponse]:
    """Every unacknowledged entry of ``subscription`` on ``partition``, peeked ``first``
    at a time, then in pages doubling up to ``PEEK_PAGE``, back to ``CHUNK_PAGE`` after a
    page with chunks (a chunk may be as large as the max message size)."""
    position, want = 1, max(1, min(first, PEEK_PAGE))
    while True:
        page = await admin.peek_messages(partition, subscription, position, want)
        for message in page:
            yield message
        if len(page) < want:
            return
        position += len(page)
        chunked = any(m.num_chunks_from_msg > 1 for m in page)
        want = CHUNK_PAGE if chunked else min(PEEK_PAGE, want * 2)


async def letters(admin: AdminClient, partitions: Sequence[str], subscription: str, first_page: int = PEEK_PAGE
                  ) -> AsyncGenerator[DeadLetter, None]:  # fmt: skip
    """The unacknowledged messages of ``subscription``, partition by partition, as a
    consumer receives them (see the module docstring); the caller stops when it has
    enough (``first_page``: the entries peeked first, what it expects to need)."""
    for partition in partitions:
        assembler = ChunkedMessageAssembler(max_pending=0, auto_ack_oldest=False, expire_ms=0)
        async for m in _pages(admin, partition, subscription, first_page):
            d = m.message_id
            mid = MessageId(ledger_id=d.ledger_id, entry_id=d.entry_id, partition=d.partition, batch_index=d.batch_index)
            if m.num_chunks_from_msg <= 1:
                yield DeadLetter(_id_text(mid), m, m.message.payload)
                continue
            info = ChunkInfo(m.uuid, m.chunk_id, m.num_chunks_from_msg, m.total_chunk_msg_size, m.compression,
                             m.uncompressed_size, m.publish_time_ms)  # fmt: skip
            whole = assembler.add(m, mid, m.message.payload, info).message
            if whole is not None:  # its last chunk: the message is complete
                first, payload, cid = whole
                assert isinstance(first, pb.PeekMessageResponse)
                text = f"{_id_text(cid.first_chunk_message_id())};{_id_text(cid)}"
                yield DeadLetter(text, first, payload, len(cid.chunk_message_ids()))


async def summarize(admin: AdminClient, topic: str, partitions: Sequence[str], subscription: str, scan_limit: int) -> DlqSummary:
    """Backlog (in messages: a chunked one counts once), oldest message and counts by
    ``REAL_TOPIC`` of a DLQ's subscription."""
    by_real: Counter[str] = Counter()
    oldest: int | None = None
    seen = 0
    async with aclosing(letters(admin, partitions, subscription, min(scan_limit + 1, PEEK_PAGE))) as found:
        async for letter in found:
            if seen == scan_limit:
                return DlqSummary(topic, subscription, seen, False, oldest, by_real)
            seen += 1
            message = letter.entry
            by_real[message.message.properties.get(REAL_TOPIC, "")] += 1
            oldest = message.publish_time_ms if oldest is None else min(oldest, message.publish_time_ms)
    return DlqSummary(topic, subscription, seen, True, oldest, by_real)


@dataclass(frozen=True)
class ReplayFailure:
    message_id: str
    target: str
    error: MagnetarError
    """Why it was not moved (the broker's refusal: the caller may not produce there)."""


@dataclass
class ReplayReport:
    moved: int = 0
    """Published to their target (or found there already) and acknowledged in the DLQ."""
    skipped: int = 0
    """Left in the DLQ: no REAL_TOPIC and no target."""
    failed: int = 0
    failed_ids: list[str] = field(default_factory=list)
    failures: list[ReplayFailure] = field(default_factory=list)
    by_target: Counter[str] = field(default_factory=Counter)


@dataclass
class Replay:
    """One replay of one DLQ through one subscription (see the module docstring)."""

    client: mg.Client
    dlq: str
    subscription: str
    count: int | None = None
    ids: frozenset[str] | None = None
    target: str | None = None
    report: ReplayReport = field(default_factory=ReplayReport)
    _producers: dict[tuple[int, str], mg.Producer] = field(default_factory=dict)
    _pending: set[asyncio.Future[None]] = field(default_factory=set)
    _stopped: bool = False

    @property
    def scope(self) -> str:
        if self.ids is None:
            return "all"
        return hashlib.sha1("\n".join(sorted(self.ids)).encode()).hexdigest()[:16]

    async def run(self) -> ReplayReport:
        consumer = await self.client.subscribe(
            self.dlq, self.subscription, consumer_type=mg.ConsumerType.Exclusive,
            initial_position=mg.InitialPosition.Earliest, receiver_queue_size=WINDOW,
        )
        try:
            await self._drain(consumer)
            if self._pending:
                await asyncio.gather(*self._pending, return_exceptions=True)
        finally:
            await asyncio.gather(*(p.close() for p in self._producers.values()), return_exceptions=True)
            await consumer.close()
        return self.report

    async def _drain(self, consumer: mg.Consumer) -> None:
        taken = 0
        wanted = set(self.ids) if self.ids is not None else None
        while not self._stopped:
            if self.count is not None and taken >= self.count:
                return
            if wanted is not None and not wanted:
                return
            try:
                message = await consumer.receive(int(IDLE_S * 1000))
            except mg.Timeout:
                return
            mid = str(message.message_id())
            if wanted is not None:
                if mid not in wanted:
                    continue
                wanted.discard(mid)
            target = self.target or message.properties().get(REAL_TOPIC)
            if not target:
                self.report.skipped += 1
                continue
            taken += 1
            while len(self._pending) >= WINDOW:
                await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
            try:
                producer = await self._producer(message.message_id().partition(), target)
            except MagnetarError as exc:
                self._failed(message, target, exc)
                return
            future = asyncio.ensure_future(self._move(producer, consumer, message, target))
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)

    async def _producer(self, partition: int, target: str) -> mg.Producer:
        key = (partition, target)
        producer = self._producers.get(key)
        if producer is None:
            source = str(TopicName.parse(self.dlq).partition(partition)) if partition >= 0 else self.dlq
            # Unbatched: deduplication judges a batch by its lowest sequence id, so a batch
            # mixing a message stored before an interruption with one that was not would
            # be dropped whole. One message per request keeps the judgement per message.
            # Chunking: a dead letter over the max message size (a chunked message the
            # broker moved whole) goes back as chunks; deduplicated by its last one.
            producer = await self.client.create_producer(
                target, producer_name=f"dlq-replay:{source}:{self.scope}", batching_enabled=False,
                chunking_enabled=True, max_pending_messages=WINDOW,
            )
            self._producers[key] = producer
        return producer

    async def _move(self, producer: mg.Producer, consumer: mg.Consumer, message: mg.Message, target: str) -> None:
        mid = message.message_id()
        try:
            await producer.send(
                message.data(), properties=replay_properties(message, int(time.time() * 1000)),
                partition_key=message.partition_key() or None, ordering_key=message.ordering_key() or None,
                sequence_id=sequence_id(mid),
                event_timestamp=message.event_timestamp() or None,
            )
        except MagnetarError as exc:
            self._failed(message, target, exc)
            return
        await consumer.acknowledge(message)
        self.report.moved += 1
        self.report.by_target[target] += 1

    def _failed(self, message: mg.Message, target: str, exc: MagnetarError) -> None:
        log.warning("replay of %s from %s to %s failed: %s", message.message_id(), self.dlq, target, exc.message)
        self.report.failed += 1
        self.report.failed_ids.append(str(message.message_id()))
        self.report.failures.append(ReplayFailure(str(message.message_id()), target, exc))
        self._stopped = True


async def replay(
    client: mg.Client, dlq: str, subscription: str, *, count: int | None = None,
    ids: Sequence[str] | None = None, target: str | None = None,
) -> ReplayReport:
    """Replay ``dlq`` through ``subscription`` with ``client`` (the gateway's SDK client:
    its TLS and service token; the replay closes only the handles it opened).

    Raises:
        InvalidArgument: a count below 1, an id that is not a message id, a bad target.
    """
    if count is not None and count < 1:
        raise InvalidArgument(f"count must be at least 1, not {count}")
    wanted = None if ids is None else frozenset(str(MessageId.parse(i)) for i in ids)
    if target is not None:
        target = str(TopicName.parse(target))
    return await Replay(client, dlq, subscription, count, wanted, target).run()


async def purge_messages(client: mg.Client, dlq: str, subscription: str, ids: Sequence[str]) -> list[str]:
    """Acknowledge (drop) only the messages ``ids`` of ``dlq`` through ``subscription``,
    read with an exclusive consumer as a replay reads them (the others are left for the
    next consumer); the ids found and dropped, in the order read. A chunked dead letter is
    dropped whole. The read ends once every id is found, or after :data:`IDLE_S` with
    nothing more to read.

    Raises:
        InvalidArgument: no id, or an id that is not a message id.
    """
    if not ids:
        raise InvalidArgument("name the messages to purge (messageIds), or purge the whole backlog without a body")
    wanted = {str(MessageId.parse(i)) for i in ids}
    consumer = await client.subscribe(dlq, subscription, consumer_type=mg.ConsumerType.Exclusive,
                                      initial_position=mg.InitialPosition.Earliest, receiver_queue_size=WINDOW)
    dropped: list[str] = []
    try:
        while wanted:
            try:
                message = await consumer.receive(int(IDLE_S * 1000))
            except mg.Timeout:
                break
            mid = str(message.message_id())
            if mid in wanted:
                await consumer.acknowledge(message)
                wanted.discard(mid)
                dropped.append(mid)
    finally:
        await consumer.close()
    return dropped
