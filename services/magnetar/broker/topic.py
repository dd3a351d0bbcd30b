"""A persistent topic (one partition): its managed ledger, producers, subscriptions,
and message deduplication.

Deduplication (as Pulsar's): each producer name has a highest sequence id *pushed*
(sent to the managed ledger) and *persisted* (stored). A batch whose lowest sequence id
is not above the pushed one is a resend and is not stored again. After a broker takes the
topic over, the state is rebuilt by scanning the topic's entries (each EntryBatch names
its producer and sequence ids); a snapshot in the ledger list's properties would bound
that scan — not done yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from magnetar.broker.subscription import Subscription
from magnetar.common.errors import (
    LedgerFenced,
    MessageTooBig,
    NotOwner,
    ProducerBusy,
    ServiceClosed,
)
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.managedledger.position import Position

log = logging.getLogger(__name__)


@dataclass
class TopicCounters:
    msg_in: int = 0
    bytes_in: int = 0
    msg_out: int = 0


@dataclass
class PublishResult:
    position: Position | None
    duplicate: bool = False


@dataclass
class _Dedup:
    pushed: dict[str, int] = field(default_factory=dict)
    persisted: dict[str, int] = field(default_factory=dict)


class PersistentTopic:
    def __init__(
        self, name: str, partition: int, managed_ledger: Any, config: BrokerConfig,
        on_fenced: Callable[[str], None] | None = None,
    ) -> None:
        """Args: on_fenced: called with the topic name when another broker took it over."""
        self.name = name
        self._on_fenced = on_fenced
        self.partition = partition
        self.ml = managed_ledger
        self.config = config
        self.producers: set[str] = set()
        self.subscriptions: dict[str, Subscription] = {}
        self.counters = TopicCounters()
        self._dedup = _Dedup()
        self._settled = asyncio.Condition()  # a publish finished (stored or failed)
        self._closed = False

    async def load(self) -> None:
        """Rebuild deduplication state from the stored entries."""
        if not self.config.deduplication_enabled or self.ml.number_of_entries == 0:
            return
        position = self.ml.first_position
        while position is not None:
            batch = await self.ml.read_entries(position, 500, 16 * 1024 * 1024)
            if not batch:
                break
            for _pos, data in batch:
                eb = pb.EntryBatch.FromString(data)
                if eb.producer_name and eb.messages:
                    high = max(m.sequence_id for m in eb.messages)
                    if high > self._dedup.persisted.get(eb.producer_name, -1):
                        self._dedup.persisted[eb.producer_name] = high
            position = self.ml.next_position(batch[-1][0])
        self._dedup.pushed = dict(self._dedup.persisted)

    # -- producers -------------------------------------------------------------
    def add_producer(self, producer_name: str) -> int:
        """Register a connected producer; returns its last stored sequence id (-1: none).

        Raises:
            ProducerBusy: a producer with this name is connected already.
        """
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        if producer_name in self.producers:
            raise ProducerBusy(f"producer {producer_name!r} is already connected to {self.name}")
        self.producers.add(producer_name)
        return self._dedup.persisted.get(producer_name, -1)

    def remove_producer(self, producer_name: str) -> None:
        self.producers.discard(producer_name)

    async def publish(self, producer_name: str, entry: bytes, num_messages: int, lowest_seq: int, highest_seq: int) -> PublishResult:
        """Store one entry (a batch); a resend recognised by deduplication is not stored.

        Raises:
            MessageTooBig: the entry is above the configured limit.
        """
        if len(entry) > self.config.max_message_bytes:
            raise MessageTooBig(len(entry), self.config.max_message_bytes)
        if self._closed:
            raise ServiceClosed(f"topic {self.name} is closing")
        dedup = self.config.deduplication_enabled and bool(producer_name)
        while dedup:
            if lowest_seq <= self._dedup.persisted.get(producer_name, -1):
                return PublishResult(None, duplicate=True)
            if lowest_seq > self._dedup.pushed.get(producer_name, -1):
                break
            async with self._settled:  # the first copy is in flight: see how it ends
                await self._settled.wait()
        if dedup:
            self._dedup.pushed[producer_name] = highest_seq
        try:
            position = await self.ml.add_entry(entry)
        except BaseException as exc:
            if dedup:  # let the producer's resend through
                self._dedup.pushed[producer_name] = self._dedup.persisted.get(producer_name, -1)
            await self._notify_settled()
            if isinstance(exc, LedgerFenced):  # another broker recovered our ledger
                if self._on_fenced is not None:
                    self._on_fenced(self.name)
                raise NotOwner(f"topic {self.name} moved to another broker; look it up again") from exc
            raise
        if dedup and highest_seq > self._dedup.persisted.get(producer_name, -1):
            self._dedup.persisted[producer_name] = highest_seq
        await self._notify_settled()
        self.counters.msg_in += num_messages
        self.counters.bytes_in += len(entry)
        for sub in self.subscriptions.values():
            sub.notify_new_entries()
        return PublishResult(position)

    async def _notify_settled(self) -> None:
        async with self._settled:
            self._settled.notify_all()

    # -- subscriptions ---------------------------------------------------------
    async def subscribe(self, name: str, sub_type: int, initial_position: int) -> Subscription:
        sub = self.subscriptions.get(name)
        if sub is None:
            cursor = await self.ml.open_cursor(name, "earliest" if initial_position == pb.EARLIEST else "latest")
            sub = self.subscriptions[name] = Subscription(self, name, sub_type, cursor)
        return sub

    def last_position(self) -> Position | None:
        return self.ml.last_confirmed_position

    async def close(self) -> None:
        self._closed = True
        for sub in list(self.subscriptions.values()):
            await sub.close()
        await self.ml.close()

    async def close_and_delete(self) -> None:
        """Stop serving and delete the topic's ledgers, cursors and metadata."""
        self._closed = True
        for sub in list(self.subscriptions.values()):
            await sub.dispatcher.close()
        await self.ml.delete()

    def stats(self) -> pb.TopicStats:
        subs = [
            pb.SubscriptionStats(
                name=s.name, type=s.sub_type,  # type: ignore[arg-type]
                backlog=s.cursor.backlog(), consumers=len(s.consumers), unacked=s.unacked_count(),
            )
            for s in self.subscriptions.values()
        ]
        return pb.TopicStats(
            topic=self.name, msg_in_counter=self.counters.msg_in, bytes_in_counter=self.counters.bytes_in,
            msg_out_counter=self.counters.msg_out, entries=self.ml.number_of_entries, storage_size=self.ml.total_size,
            producers=len(self.producers), subscriptions=subs,
        )
