"""A subscription's moves to its retry letter topic and dead letter queue.

Two ways in (the copies themselves are planned in :mod:`.copies`):

- :meth:`SubscriptionMoves.reconsume_later`, a consumer's request: the copy goes to the
  retry topic (or the DLQ past ``max_redeliver_count`` retries), then the original is
  acknowledged. On Exclusive and Failover subscriptions the message is redelivered at
  once instead, without a delay (counted as a redelivery).
- :meth:`SubscriptionMoves.divert`, from the dispatcher: an entry about to be delivered
  whose redelivery count reached the policy's ``max_redeliver_count`` goes to the DLQ
  (every message of it still unacknowledged) and is acknowledged, in the background.

A chunked message (an entry per chunk, diverted one at a time) moves whole or not at
all: its diverted chunks are gathered (:mod:`.chunks`) until all are there, then copied
in order as a chunked message (:func:`~.copies.plan_dead_letter` with ``chunk``) and
acknowledged together once the last copy is stored. Chunks whose message does not become
whole within ``chunk_wait_s`` (a sibling acknowledged or never diverted) are handed back
and delivered once more, as they would be without a policy: never a partial copy.

Publish first, acknowledge second: a crash in between leaves the original
unacknowledged, so it comes back and is moved again; the target's deduplication stores
the repeated copy once (see :mod:`.publisher`). Nothing is lost and nothing is stored
twice.

One move of an entry at a time: a move waits for the one in flight and then moves only
what that one left unacknowledged. A message being moved by ``reconsume_later`` can be
sent back meanwhile (the SDK negatively acknowledges it when the request timed out),
and a redelivery that reached ``max_redeliver_count`` is diverted: without the wait the
message would go to the retry topic and to the DLQ both.

The copies are published through a :class:`MovePublisher` (the topic's ``mover``): the
broker's :class:`~.publisher.ServiceMovePublisher`, which stores a copy on a topic this
broker serves itself and hands the others to a network adapter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.deadletter.chunks import ChunkGathering, GatheredChunks
from magnetar.broker.deadletter.copies import Move, plan_dead_letter, plan_reconsume
from magnetar.broker.deadletter.policy import DeadLetterPolicy
from magnetar.broker.entry import Entry, decode_entry
from magnetar.broker.subscription_type import SubscriptionType
from magnetar.common import masks
from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.faults import crash_point
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.common.tasks import BackgroundTasks
from magnetar.managedledger.position import Position

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.dispatch.base import Dispatcher, EntrySource

log = logging.getLogger(__name__)

RETRY_AFTER_FAILURE_S = 1.0
CHUNK_WAIT_S = 10.0
"""How long the diverted chunks of a chunked message wait for the rest of it."""
_ENTRY_BYTES = 16 * 1024 * 1024


class MovePublisher(Protocol):
    """Stores the copies of moved messages on their target topics."""

    async def publish(self, move: Move, keep_for: str) -> None:
        """Store ``move``'s copy on ``move.target`` (once, even when repeated: the copy
        goes under ``move.producer_name`` and ``move.sequence_id``), after making sure
        subscription ``keep_for`` of the target exists (created from the earliest message).

        Raises:
            MagnetarError: the copy could not be stored.
        """

    async def close(self) -> None:
        """Release what the publisher holds (connections); it publishes no more."""


class MovesTopic(Protocol):
    """What the moves use of their subscription's topic (``SubscriptionTopic`` has it all)."""

    @property
    def name(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def ml(self) -> EntrySource: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def mover(self) -> MovePublisher | None: ...


class MovesSubscription(Protocol):
    """What the moves use of their subscription (``Subscription`` is one). Declared here
    so that the moves do not name the subscription that holds them."""

    @property
    def name(self) -> str: ...

    @property
    def sub_type(self) -> int: ...

    @property
    def topic(self) -> MovesTopic: ...

    @property
    def cursor(self) -> Any: ...

    @property
    def consumers(self) -> Sequence[BrokerConsumer]: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def dead_letter(self) -> DeadLetterPolicy | None: ...

    def send_back(self, consumer: BrokerConsumer, positions: Iterable[Position] | None) -> None: ...


class SubscriptionMoves:
    def __init__(self, subscription: MovesSubscription, chunk_wait_s: float = CHUNK_WAIT_S) -> None:
        self.sub = subscription
        self.chunk_wait_s = chunk_wait_s
        self._chunks = ChunkGathering()
        """Diverted chunks of chunked messages not yet whole."""
        self._deliver_once: set[Position] = set()
        """Chunks handed back (their message never became whole): delivered, not diverted, once."""
        self._moving: set[Position] = set()
        """Entries diverted to the DLQ, their move not done yet."""
        self._busy: dict[Position, asyncio.Event] = {}
        """Entries being moved (set when the move is done)."""
        self._tasks = BackgroundTasks(f"moves of {subscription.name}")

    # -- reconsume_later ----------------------------------------------------------------
    async def reconsume_later(self, consumer: BrokerConsumer, mid: MessageId, delay_ms: int) -> None:
        """Move the message ``consumer`` holds to the retry topic (see the module doc).

        Raises:
            InvalidArgument: the consumer has no retry policy, does not hold the message,
                or the delay is out of range (nothing changed).
            MagnetarError: the copy could not be stored (the original stays unacked).
        """
        sub = self.sub
        position = Position(mid.ledger_id(), mid.entry_id())
        if sub.sub_type in (SubscriptionType.Exclusive, SubscriptionType.Failover):
            sub.send_back(consumer, [position])
            return
        policy = consumer.dead_letter
        if policy is None:
            raise InvalidArgument("reconsume_later needs a consumer subscribed with enable_retry=True")
        async with self._one_move(position):
            batch = await self._read(position)
            n = len(batch.messages)
            index = max(mid.batch_index(), 0)
            text = str(MessageId.trusted(sub.topic.partition, position.ledger_id, position.entry_id, mid.batch_index()))
            if index >= n or not consumer.pending.get(position, 0) >> index & 1:
                raise InvalidArgument(f"message {text} is not held unacknowledged by this consumer")
            move = plan_reconsume(policy, sub.name, sub.topic.name, text, batch.messages[index], delay_ms)
            await self._publish(move, policy)
            self._ack_moved(position, n, 1 << index)

    # -- negative acks past max_redeliver_count ----------------------------------------------
    def divert(self, position: Position, batch: Entry, n: int, mask: int) -> bool:
        """True when the entry goes to the DLQ instead of a consumer (its redelivery count
        reached the policy's maximum); the move runs in the background."""
        policy = self.sub.dead_letter
        if policy is None:
            return False
        count = self.sub.cursor.redelivery_count(position)
        if count < policy.max_redeliver_count:
            return False
        if batch.num_chunks_from_msg > 1:
            return self._divert_chunk(position, batch, count, policy)
        if position not in self._moving:
            self._moving.add(position)
            self._tasks.spawn(self._dead_letter(position, batch, n, mask, count, policy), name=f"dead-letter:{position}")
        return True

    async def _dead_letter(
        self, position: Position, batch: Entry, n: int, mask: int, count: int, policy: DeadLetterPolicy
    ) -> None:
        sub = self.sub
        try:
            async with self._one_move(position):
                mask &= self._unacked(position, n)  # a move in flight may have taken some
                for i in masks.indexes(mask):
                    text = str(MessageId.trusted(sub.topic.partition, position[0], position[1], i if batch.batched else -1))
                    await self._publish(plan_dead_letter(policy, sub.name, sub.topic.name, text, batch.messages[i], count), policy)
                if mask:
                    self._ack_moved(position, n, mask)
        except MagnetarError as exc:
            log.warning(
                "subscription %s on %s: moving %s to %s failed (%s); trying again", sub.name, sub.topic.name,
                position, policy.dead_letter_topic, exc.message,
            )
            await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            sub.dispatcher.add_replay({position: mask})
        finally:
            self._moving.discard(position)

    # -- chunked messages ------------------------------------------------------------------
    def _divert_chunk(self, position: Position, chunk: Entry, count: int, policy: DeadLetterPolicy) -> bool:
        if position in self._deliver_once:
            self._deliver_once.discard(position)
            return False
        if position in self._moving:
            return True
        self._moving.add(position)
        uuid = chunk.uuid
        waiting = uuid in self._chunks
        whole = self._chunks.add(position, uuid, chunk.chunk_id, chunk.num_chunks_from_msg)
        if whole is not None:
            self._tasks.spawn(self._dead_letter_chunked(whole, count, policy), name=f"dead-letter:{uuid}")
        elif not waiting:
            self._tasks.spawn(self._hand_back_unless_whole(uuid), name=f"dead-letter-wait:{uuid}")
        return True

    async def _hand_back_unless_whole(self, uuid: str) -> None:
        """After ``chunk_wait_s``, the chunks of ``uuid`` still waiting for the rest of
        their message go back to the dispatcher, to be delivered once (never copied in part)."""
        await asyncio.sleep(self.chunk_wait_s)
        held = self._chunks.drop(uuid)
        if not held:
            return
        sub = self.sub
        log.warning(
            "subscription %s on %s: chunked message %s did not reach %s whole (%d of its chunks diverted); "
            "delivering them again", sub.name, sub.topic.name, uuid, sub.dead_letter and sub.dead_letter.dead_letter_topic,
            len(held),
        )  # fmt: skip
        # A chunk handed back earlier and acknowledged before it was dispatched again is
        # never seen here again: forget those now, so the set holds only live hand-backs.
        self._deliver_once = {p for p in self._deliver_once if not sub.cursor.is_acked(p)}
        for p in held:
            self._moving.discard(p)
            self._deliver_once.add(p)
        sub.dispatcher.add_replay({p: 1 for p in held})

    async def _dead_letter_chunked(self, whole: GatheredChunks, count: int, policy: DeadLetterPolicy) -> None:
        """Copy every chunk of ``whole`` in order, then acknowledge them all."""
        sub = self.sub
        try:
            async with self._one_move(whole.chain[-1]):
                if all(sub.cursor.is_acked(p) for p in whole.positions):
                    return  # acknowledged meanwhile: nothing to move
                part = sub.topic.partition
                ids = tuple(MessageId.trusted(part, p[0], p[1], -1) for p in whole.chain)
                text = str(ChunkMessageId(ids[0], ids[-1], ids))
                for p in whole.chain:
                    chunk = await self._read(p)
                    if chunk.uuid != whole.uuid:
                        raise InvalidArgument(f"entry {p[0]}:{p[1]} is no longer a chunk of {whole.uuid}")
                    move = plan_dead_letter(policy, sub.name, sub.topic.name, text, chunk.messages[0], count, chunk=chunk)
                    await self._publish(move, policy)
                for p in whole.positions:
                    if not sub.cursor.is_acked(p):
                        self._ack_moved(p, 1, 1)
        except MagnetarError as exc:
            log.warning(
                "subscription %s on %s: moving chunked message %s to %s failed (%s); trying again", sub.name,
                sub.topic.name, whole.uuid, policy.dead_letter_topic, exc.message,
            )  # fmt: skip
            await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            sub.dispatcher.add_replay({p: 1 for p in whole.positions})
        finally:
            for p in whole.positions:
                self._moving.discard(p)

    # -- shared steps ----------------------------------------------------------------------
    @asynccontextmanager
    async def _one_move(self, position: Position) -> AsyncIterator[None]:
        """Hold the entry's move: wait for the move in flight, if any, first."""
        while (busy := self._busy.get(position)) is not None:
            await busy.wait()
        done = self._busy[position] = asyncio.Event()
        try:
            yield
        finally:
            del self._busy[position]
            done.set()

    def _unacked(self, position: Position, n: int) -> int:
        cursor = self.sub.cursor
        if cursor.is_acked(position):
            return 0
        return masks.full_mask(n) & ~cursor.acked_mask(position)

    async def _read(self, position: Position) -> Entry:
        entries = await self.sub.topic.ml.read_entries(position, 1, _ENTRY_BYTES)
        if not entries or entries[0][0] != position:
            raise InvalidArgument(f"no message at {position[0]}:{position[1]} on {self.sub.topic.name}")
        batch = decode_entry(entries[0][1])
        if not batch.messages:
            raise InvalidArgument(f"entry {position[0]}:{position[1]} on {self.sub.topic.name} holds no message")
        return batch

    async def _publish(self, move: Move, policy: DeadLetterPolicy) -> None:
        mover = self.sub.topic.mover
        if mover is None:
            raise MagnetarError("this broker cannot move messages (no letter mover)")
        keep_for = policy.initial_subscription_name if move.dead else self.sub.name
        await mover.publish(move, keep_for)
        crash_point(self.sub.topic.config.crash_point, "after_move_publish")

    def _ack_moved(self, position: Position, n: int, mask: int) -> None:
        """Acknowledge the moved messages, whoever holds them now."""
        sub = self.sub
        sub.cursor.ack_batch(position, n, mask)
        for c in sub.consumers:
            released = c.release(position, mask)
            if released:
                sub.dispatcher.released(c, position, released)
        sub.dispatcher.wake()

    async def close(self) -> None:
        await self._tasks.close()
