"""A dispatcher needs only its DispatchContext (dispatch/base.py): here a small twin of
one — entries in a list, a cursor that counts acks in a set — drives the Shared and the
single-active dispatchers with no topic, managed ledger or subscription behind them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from magnetar.broker.config import BrokerConfig
from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.dispatch.shared import SharedDispatcher
from magnetar.broker.dispatch.single_active import SingleActiveConsumerDispatcher
from magnetar.broker.entry import Entry, Message, decode_entry, encode_entry
from magnetar.broker.ratelimit import RateLimiter
from magnetar.managedledger.position import Position


def entry(text: str) -> bytes:
    return encode_entry("p", 0, 0, False, [Message(payload=text.encode())])


class Entries:
    def __init__(self, texts: list[str]) -> None:
        self.items = [(Position(1, i), entry(t)) for i, t in enumerate(texts)]

    async def read_entries(self, position: Position, max_entries: int, max_bytes: int) -> list[tuple[Position, bytes]]:
        return [(p, d) for p, d in self.items if p >= position][:max_entries]

    def next_position(self, position: Position) -> Position:
        return Position(position[0], position[1] + 1)

    def contains(self, position: Position) -> bool:
        return any(p == position for p, _ in self.items)


class Cursor:
    def __init__(self, entries: Entries) -> None:
        self.read_position = Position(1, 0)
        self._entries = entries
        self.acked: set[Position] = set()
        self.counts_dirty = False

    def has_more_entries(self) -> bool:
        return self._entries.contains(self.read_position)

    def is_acked(self, p: Position) -> bool:
        return p in self.acked

    def acked_mask(self, p: Position) -> int:
        return 0

    def redelivery_count(self, p: Position) -> int:
        return 0

    def delivery_count(self, p: Position) -> int:
        return 0

    async def persist_counts(self) -> None:
        self.counts_dirty = False


@dataclass
class Context:
    entries: Entries
    diverted: set[Position] = field(default_factory=set)
    name: str = "s"
    topic_name: str = "persistent://public/default/t"
    partition: int = -1
    consumers: list[BrokerConsumer] = field(default_factory=list)
    settings: BrokerConfig = field(default_factory=BrokerConfig)
    delayed_delivery: bool = True
    dispatch_limiter: RateLimiter | None = None
    terminated_position: Position | None = None
    out: int = 0

    def __post_init__(self) -> None:
        self.cursor = Cursor(self.entries)

    def count_out(self, messages: int, size: int = 0) -> None:
        self.out += messages

    def divert(self, position: Position, batch: Entry, n: int, mask: int) -> bool:
        return position in self.diverted

    def send_back(self, consumer: BrokerConsumer, positions: object, *, failed: bool = True) -> None:
        pass


def consumer(name: str, got: list[str], permits: int = 10) -> BrokerConsumer:
    c = BrokerConsumer(name, 0, lambda ds: got.extend(decode_entry(d.entry).messages[0].payload.decode() for d in ds))
    c.permits = permits
    return c


async def until(predicate, timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "not reached"
        await asyncio.sleep(0.005)


async def test_shared_spreads_entries_over_the_context_consumers_and_counts_them() -> None:
    ctx = Context(Entries(["a", "b", "c", "d"]), diverted={Position(1, 2)})
    got1: list[str] = []
    got2: list[str] = []
    ctx.consumers += [consumer("c1", got1), consumer("c2", got2)]
    dispatcher = SharedDispatcher(ctx)
    dispatcher.consumers_changed()
    dispatcher.start()
    try:
        await until(lambda: len(got1) + len(got2) == 3)
        assert sorted(got1 + got2) == ["a", "b", "d"]  # "c" went to the dead letter topic
        assert got1 and got2
        assert ctx.out == 3
        assert ctx.cursor.read_position == Position(1, 4)
    finally:
        await dispatcher.close()


async def test_single_active_gives_everything_to_the_first_consumer_in_order() -> None:
    ctx = Context(Entries(["a", "b", "c"]))
    got1: list[str] = []
    got2: list[str] = []
    ctx.consumers += [consumer("z-second", got2), consumer("a-first", got1)]
    dispatcher = SingleActiveConsumerDispatcher(ctx)
    dispatcher.consumers_changed()
    dispatcher.start()
    try:
        await until(lambda: len(got1) == 3)
        assert got1 == ["a", "b", "c"] and got2 == []
    finally:
        await dispatcher.close()
