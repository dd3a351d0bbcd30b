"""One active consumer gets everything (Exclusive; Failover picks the first by
(priority, name)). When the active consumer changes, delivery restarts from the first
unacknowledged entry, so the new one gets the departed one's unacked messages too."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from magnetar.broker.consumer import BrokerConsumer
from magnetar.proto.v1 import broker_pb2 as pb

if TYPE_CHECKING:
    from magnetar.broker.subscription import Subscription

log = logging.getLogger(__name__)

_MAX_READ_BYTES = 4 * 1024 * 1024


class SingleActiveConsumerDispatcher:
    def __init__(self, subscription: Subscription) -> None:
        self.sub = subscription
        self.active: BrokerConsumer | None = None
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def consumers_changed(self) -> None:
        consumers = sorted(self.sub.consumers, key=lambda c: c.sort_key)
        new = consumers[0] if consumers else None
        if new is not self.active:
            self.active = new
            self.rewind()
        if self._task is None and new is not None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"dispatch-{self.sub.name}")

    def rewind(self) -> None:
        self.sub.cursor.rewind()
        self.wake()

    def wake(self) -> None:
        self._wakeup.set()

    async def _run(self) -> None:
        ml = self.sub.topic.ml
        max_entries = self.sub.topic.config.dispatch_max_entries
        while True:
            self._wakeup.clear()
            consumer = self.active
            if consumer is None or consumer.permits <= 0:
                await self._wakeup.wait()
                continue
            try:
                start = self.sub.cursor.read_position
                entries = await ml.read_entries(start, min(consumer.permits, max_entries), _MAX_READ_BYTES)
            except Exception:
                log.exception("subscription %s: read failed; retrying", self.sub.name)
                await asyncio.sleep(0.5)
                continue
            if consumer is not self.active or self._wakeup.is_set() and self.sub.cursor.read_position != start:
                continue  # the active consumer changed or the cursor moved while reading
            deliveries = []
            messages = 0
            for position, data in entries:
                if self.sub.cursor.is_acked(position):
                    continue
                count = len(pb.EntryBatch.FromString(data).messages) or 1
                consumer.unacked[position] = count
                messages += count
                deliveries.append(
                    pb.Delivery(
                        message_id=pb.MessageIdData(ledger_id=position[0], entry_id=position[1], partition=self.sub.topic.partition, batch_index=-1),
                        entry=data,
                    )
                )
            if entries:
                self.sub.cursor.read_position = ml.next_position(entries[-1][0])
            if deliveries:
                consumer.permits -= messages
                self.sub.topic.counters.msg_out += messages
                consumer.sink(deliveries)
            if not entries:
                await self._wakeup.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
