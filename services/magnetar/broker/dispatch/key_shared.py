"""Key_Shared: every message goes to the consumer owning its key's hash slot.

Slots: Pulsar's Murmur3 key hash modulo 65,536 of the message's ordering key, else its
partition key (as Pulsar routes); a message without either has the key "".
Owners: in AUTO_SPLIT mode (the default) consistent hashing, 100 points per consumer on
the slot ring, so a joining or leaving consumer moves only some slots. In STICKY mode
each consumer declares its hash ranges (Pulsar's HashRangeExclusiveStickyKeyConsumerSelector):
a slot belongs to the consumer whose range holds it; ranges of two consumers must not
overlap (the second is refused with ConsumerAssignError), a subscription's consumers all
use one mode (else ConsumerBusy), and messages of a slot no range holds wait until a
consumer covering it joins. An entry whose messages have different keys is
delivered to each owner with the other messages masked out (``Delivery.ack_set``).

Order per key: a slot whose owner changed is held (its messages wait in the replay set)
while a message of that slot is still unacknowledged by another consumer, and a message
never overtakes an earlier one of its slot waiting in the replay set. So a new owner gets
a moved key only after the earlier messages of that key are acknowledged.
"""

from __future__ import annotations

import bisect
import functools
from collections import Counter

from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.dispatch.base import DispatchContext, Dispatcher
from magnetar.broker.entry import Entry, routing_key
from magnetar.broker.subscription_type import KeySharedMode
from magnetar.common import masks
from magnetar.common.errors import ConsumerAssignError, ConsumerBusy
from magnetar.common.keyhash import key_hash
from magnetar.managedledger.position import Position

SLOTS = 65536
POINTS_PER_CONSUMER = 100
#: New entries are not read while this many entries wait in the replay set.
MAX_REPLAY_ENTRIES = 5000


@functools.lru_cache(maxsize=65536)
def slot_of(key: str | bytes) -> int:
    return key_hash(key) % SLOTS


class ConsistentHashSelector:
    """Which consumer owns a slot: the first consumer point at or after it on the ring."""

    def __init__(self) -> None:
        self._points: list[int] = []
        self._owners: list[BrokerConsumer] = []
        self._cache: dict[int, BrokerConsumer | None] = {}

    def rebuild(self, consumers: list[BrokerConsumer]) -> None:
        ring = sorted(
            (slot_of(f"{c.name}#{c.consumer_id}#{i}"), c.consumer_id, c)
            for c in consumers
            for i in range(POINTS_PER_CONSUMER)
        )
        self._points = [p for p, _, _ in ring]
        self._owners = [c for _, _, c in ring]
        self._cache.clear()

    def pick(self, slot: int) -> BrokerConsumer | None:
        owner = self._cache.get(slot)
        if owner is None and self._points:
            i = bisect.bisect_left(self._points, slot)
            owner = self._owners[i % len(self._owners)]
            self._cache[slot] = owner
        return owner


class StickyRangeSelector:
    """STICKY mode: the consumer whose declared hash range holds the slot, or None."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ranges: list[tuple[int, int, BrokerConsumer]] = []

    def rebuild(self, consumers: list[BrokerConsumer]) -> None:
        self._ranges = sorted(
            (start, end, c) for c in consumers if c.key_shared is not None for start, end in c.key_shared.ranges
        )  # fmt: skip
        self._starts = [start for start, _, _ in self._ranges]

    def pick(self, slot: int) -> BrokerConsumer | None:
        i = bisect.bisect_right(self._starts, slot) - 1
        if i >= 0 and slot <= self._ranges[i][1]:
            return self._ranges[i][2]
        return None


def _mode(consumer: BrokerConsumer) -> KeySharedMode:
    return consumer.key_shared.mode if consumer.key_shared is not None else KeySharedMode.AUTO_SPLIT


def check_joining(consumers: list[BrokerConsumer], joining: BrokerConsumer) -> None:
    """May ``joining`` attach to a Key_Shared subscription with ``consumers``?

    Raises:
        ConsumerBusy: its mode is not the subscription's (Pulsar refuses a mismatched
            keySharedMeta the same way).
        ConsumerAssignError: STICKY with a hash range that overlaps another consumer's.
    """
    if not consumers:
        return
    mode = _mode(consumers[0])
    if _mode(joining) != mode:
        raise ConsumerBusy(
            f"the Key_Shared subscription is in {mode.name} mode; a {_mode(joining).name} consumer cannot join it"
        )
    if mode == KeySharedMode.STICKY:
        assert joining.key_shared is not None
        for c in consumers:
            assert c.key_shared is not None
            clash = joining.key_shared.overlap(c.key_shared)
            if clash is not None:
                (s1, e1), (s2, e2) = clash
                raise ConsumerAssignError(
                    f"hash range [{s1}, {e1}] overlaps [{s2}, {e2}] of consumer {c.name!r} on the Key_Shared subscription"
                )


class KeySharedDispatcher(Dispatcher):
    stop_on_undeliverable = False
    delays_messages = True

    def __init__(self, subscription: DispatchContext) -> None:
        super().__init__(subscription)
        self.selector: ConsistentHashSelector | StickyRangeSelector = ConsistentHashSelector()
        self._slots: dict[Position, tuple[int, ...]] = {}  # slot of each message of live entries
        self._live: Counter[Position] = Counter()  # messages held by a consumer or in replay
        self._owner: dict[int, list[object]] = {}  # slot -> [consumer, messages it holds]
        self._replay_slots: Counter[int] = Counter()
        self._held: set[int] = set()
        self._untracked: set[Position] = set()  # in replay before their keys were known

    def consumers_changed(self) -> None:
        consumers = self.sub.consumers
        sticky = bool(consumers) and _mode(consumers[0]) == KeySharedMode.STICKY
        if sticky != isinstance(self.selector, StickyRangeSelector):
            self.selector = StickyRangeSelector() if sticky else ConsistentHashSelector()
        self.selector.rebuild(consumers)
        self.wake()

    def entry_size(self, position: Position) -> int:
        return len(self._slots.get(position, ()))

    def may_read_new(self) -> bool:
        return len(self.replay) < MAX_REPLAY_ENTRIES

    async def _round(self) -> bool:
        self._held = set()
        return await super()._round()

    def route(self, position: Position, data: bytes, batch: Entry, n: int, mask: int, from_replay: bool) -> int:
        slots = self._slots.get(position)
        if slots is None:
            slots = tuple(slot_of(routing_key(m)) for m in batch.messages) or (slot_of(""),)
            self._slots[position] = slots
        mine: dict[BrokerConsumer, int] = {}
        left = 0
        for i in masks.indexes(mask):
            s = slots[i]
            target = self.selector.pick(s)
            owner = self._owner.get(s)
            if (
                target is None
                or s in self._held
                or (owner is not None and owner[0] is not target)
                or (not from_replay and self._replay_slots[s] > 0)
                or not target.available
            ):
                left |= 1 << i
                self._held.add(s)
                continue
            mine[target] = mine.get(target, 0) | 1 << i
            if owner is None:
                self._owner[s] = [target, 1]
            else:
                owner[1] += 1  # type: ignore[operator]
        for consumer, m in mine.items():
            self._live[position] += masks.count(m)
            self.deliver(consumer, position, data, n, m)
        if not self._live[position] and not left:
            self._forget(position)
        return left

    def released(self, consumer: BrokerConsumer, position: Position, mask: int) -> None:
        slots = self._slots.get(position)
        if slots is None or not mask:
            return
        for i in masks.indexes(mask):
            s = slots[i]
            owner = self._owner.get(s)
            if owner is not None and owner[0] is consumer:
                owner[1] -= 1  # type: ignore[operator]
                if owner[1] <= 0:  # type: ignore[operator]
                    del self._owner[s]
        self._unlive(position, masks.count(mask))
        self.wake()

    def _replay_added(self, position: Position, mask: int) -> None:
        slots = self._slots.get(position)
        if slots is None:
            # Keys are learnt when the entry is read (a delayed message that came due):
            # nothing of it is counted until then.
            self._untracked.add(position)
            return
        for i in masks.indexes(mask):
            self._replay_slots[slots[i]] += 1
        self._live[position] += masks.count(mask)

    def _replay_removed(self, position: Position, mask: int) -> None:
        if position in self._untracked:
            if position not in self.replay:
                self._untracked.discard(position)
            return
        slots = self._slots.get(position)
        if slots is None:
            return
        for i in masks.indexes(mask):
            s = slots[i]
            self._replay_slots[s] -= 1
            if self._replay_slots[s] <= 0:
                del self._replay_slots[s]
        self._unlive(position, masks.count(mask))

    def _unlive(self, position: Position, n: int) -> None:
        self._live[position] -= n
        if self._live[position] <= 0:
            self._forget(position)

    def _forget(self, position: Position) -> None:
        self._live.pop(position, None)
        self._slots.pop(position, None)

    def reset(self) -> None:
        super().reset()
        self._slots.clear()
        self._live.clear()
        self._owner.clear()
        self._replay_slots.clear()
        self._untracked.clear()
