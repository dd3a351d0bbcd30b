"""The broker core's move publisher without a network: a copy for a topic served here is
stored as the SDK would send it (one unbatched entry, deduplicated by the move's producer
name and sequence id) after its keeping subscription exists; a topic another broker
serves, or a partitioned one, goes to the remote publisher."""

from __future__ import annotations

import asyncio
import logging

import pytest

from magnetar.broker.deadletter.copies import RECONSUMETIMES, Move, plan_dead_letter, plan_reconsume
from magnetar.broker.deadletter.policy import resolve
from magnetar.broker.deadletter.publisher import ServiceMovePublisher, move_entry
from magnetar.broker.entry import Entry, Message, decode_entry
from magnetar.client.batching import build_op
from magnetar.client.producer import build_message
from magnetar.common.errors import (
    AlreadyExists,
    InvalidTopicName,
    NotOwner,
    ServiceClosed,
    TopicNotFound,
)

SOURCE = "persistent://public/default/orders"
POLICY = resolve(SOURCE, "sub", None, None)
NOW_MS = 1_700_000_000_000


class FakeTopic:
    """Stores entries and drops a producer's repeated sequence ids, as PersistentTopic."""

    def __init__(self, name: str, subscriptions: tuple[str, ...] = ()) -> None:
        self.name = name
        self.subscriptions: dict[str, str] = {s: "existing" for s in subscriptions}
        self.entries: list[Entry] = []
        self.calls: list[tuple[str, int, int, int]] = []
        self.chunks: list[tuple[int, int] | None] = []
        self._last: dict[str, int] = {}
        self.closing = 0
        self.creates = 0

    async def create_subscription(self, name: str, start: str) -> None:
        self.creates += 1
        await asyncio.sleep(0.001)  # a ZooKeeper write: other moves run meanwhile
        if name in self.subscriptions:
            raise AlreadyExists(name)
        self.subscriptions[name] = start

    def publish(
        self, producer: str, entry: bytes, n: int, lowest: int, highest: int, chunk: tuple[int, int] | None = None
    ) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.closing:
            self.closing -= 1
            fut.set_exception(ServiceClosed(f"topic {self.name} is closing"))
            return fut
        self.calls.append((producer, n, lowest, highest))
        self.chunks.append(chunk)
        if chunk is not None and chunk[0] < chunk[1] - 1:  # a chunk before the last: not deduplicated
            self.entries.append(decode_entry(entry))
        elif lowest > self._last.get(producer, -1):
            self._last[producer] = highest
            self.entries.append(decode_entry(entry))
        fut.set_result(None)
        return fut


class FakeService:
    def __init__(
        self, topics: dict[str, FakeTopic], partitioned: dict[str, int] | None = None,
        auto_partitioned: dict[str, int] | None = None,
    ) -> None:
        self.topics = topics
        self.partitioned = partitioned or {}
        self.auto_partitioned = auto_partitioned or {}
        """Missing topics served here whose namespace auto-creates them partitioned (0: not at all)."""
        self.asked: list[tuple[str, bool]] = []

    async def get_topic(self, topic: str, create: bool = True, explicit: bool = False) -> FakeTopic:
        self.asked.append((topic, create))
        if topic in self.partitioned:
            raise InvalidTopicName(f"{topic} is a partitioned topic")
        if topic in self.auto_partitioned:
            raise TopicNotFound(f"Topic not found: {topic} does not exist and its namespace's auto-creation does not create it")
        if topic not in self.topics:
            raise NotOwner(f"topic {topic} is served by another broker")
        return self.topics[topic]

    async def partitions(self, topic: str) -> int:
        return self.partitioned.get(topic, 0)

    async def client_partitions(self, topic: str) -> int:
        count = self.auto_partitioned.get(topic, 0)
        if count:
            del self.auto_partitioned[topic]
            self.partitioned[topic] = count
        return self.partitioned.get(topic, 0)


class FakeRemote:
    def __init__(self) -> None:
        self.moves: list[tuple[Move, str]] = []
        self.closed = False

    async def publish(self, move: Move, keep_for: str) -> None:
        self.moves.append((move, keep_for))

    async def close(self) -> None:
        self.closed = True


def original() -> Message:
    return Message(payload=b"order-7", properties={"color": "red"}, partition_key="k7", has_partition_key=True, event_time_ms=123)


def retry_move() -> Move:
    return plan_reconsume(POLICY, "sub", SOURCE, "5:3:-1:-1", original(), 5000, now_ms=NOW_MS)


def dead_move() -> Move:
    return plan_dead_letter(POLICY, "sub", SOURCE, "5:3:-1:-1", original(), 16)


def publisher(service: FakeService, remote: FakeRemote | None = None) -> ServiceMovePublisher:
    return ServiceMovePublisher(service, remote, clock_ms=lambda: NOW_MS + 1)  # type: ignore[arg-type]


def test_the_entry_is_the_one_the_sdk_sends_for_one_unbatched_message():
    move = retry_move()
    src = move.message
    sdk = build_message(
        src.payload, dict(src.properties), src.partition_key, src.event_time_ms or None, src.deliver_at_ms or None,
        None, 1 << 20,
    )
    sdk.sequence_id = move.sequence_id
    op = build_op(1, move.producer_name, [sdk], [], batched=False)
    expected = op.request.send.entry
    ours = move_entry(move, decode_entry(expected).publish_time_ms)
    assert ours == expected  # byte for byte
    assert (op.request.send.num_messages, op.request.send.lowest_sequence_id, op.request.send.highest_sequence_id) == (
        1, move.sequence_id, move.sequence_id,
    )


def test_a_message_without_key_event_time_or_delay_carries_none():
    move = dead_move()
    plain = Move(move.target, Message(payload=b"x", partition_key=""), move.producer_name, 1, dead=True)
    msg = decode_entry(move_entry(plain, NOW_MS)).messages[0]
    sdk = build_message(b"x", {}, None, None, None, None, 1 << 20)
    sdk.sequence_id = 1
    assert msg == sdk


async def test_a_move_to_a_topic_served_here_is_stored_once_after_its_subscription_exists():
    move = retry_move()
    target = FakeTopic(move.target)
    service = FakeService({move.target: target})
    remote = FakeRemote()
    mover = publisher(service, remote)
    await mover.publish(move, "sub")
    await mover.publish(move, "sub")  # a repeat (a crash before the ack): dropped by the topic
    assert service.asked == [(move.target, True)] * 2  # created when missing
    assert target.subscriptions == {"sub": "earliest"}
    assert target.calls == [(move.producer_name, 1, move.sequence_id, move.sequence_id)] * 2
    assert len(target.entries) == 1
    entry = target.entries[0]
    assert (entry.producer_name, entry.sequence_id, entry.batched, entry.publish_time_ms) == (
        move.producer_name, move.sequence_id, False, NOW_MS + 1,
    )
    (msg,) = entry.messages
    assert msg.payload == b"order-7" and msg.partition_key == "k7" and msg.has_partition_key
    assert msg.event_time_ms == 123 and msg.deliver_at_ms == NOW_MS + 5000
    assert msg.properties[RECONSUMETIMES] == "1" and msg.properties["color"] == "red"
    assert remote.moves == []


async def test_a_burst_of_moves_to_a_new_target_creates_its_subscription_once(caplog: pytest.LogCaptureFixture):
    moves = [plan_dead_letter(POLICY, "sub", SOURCE, f"5:{i}:-1:-1", original(), 16) for i in range(300)]
    target = FakeTopic(moves[0].target)
    mover = publisher(FakeService({target.name: target}))
    with caplog.at_level(logging.INFO, logger="magnetar.broker.deadletter.publisher"):
        await asyncio.gather(*(mover.publish(m, "sub") for m in moves))
    assert target.creates == 1 and target.subscriptions == {"sub": "earliest"}
    assert len(target.entries) == 300
    assert [r.getMessage() for r in caplog.records] == [f"subscription sub on {target.name} keeps the moved messages"]


async def test_an_existing_keeping_subscription_is_left_as_it_is():
    move = dead_move()
    target = FakeTopic(move.target, subscriptions=(POLICY.initial_subscription_name,))
    await publisher(FakeService({move.target: target})).publish(move, POLICY.initial_subscription_name)
    assert target.subscriptions == {POLICY.initial_subscription_name: "existing"}
    assert len(target.entries) == 1


async def test_a_topic_another_broker_serves_goes_to_the_remote_publisher():
    move = dead_move()
    service = FakeService({})
    remote = FakeRemote()
    mover = publisher(service, remote)
    await mover.publish(move, POLICY.initial_subscription_name)
    assert remote.moves == [(move, POLICY.initial_subscription_name)]
    await mover.close()
    assert remote.closed


async def test_a_partitioned_target_goes_to_the_remote_publisher_which_routes_it():
    move = dead_move()
    remote = FakeRemote()
    await publisher(FakeService({}, partitioned={move.target: 3}), remote).publish(move, "keep")
    assert remote.moves == [(move, "keep")]


async def test_a_missing_target_is_created_as_its_namespace_says_and_goes_where_it_then_lives():
    """Under a partitioned autoTopicCreation the target is created partitioned (as a
    producer's question creates it) and the remote publisher routes the copy; where the
    namespace creates nothing the move fails (the original stays unacknowledged)."""
    move = dead_move()
    remote = FakeRemote()
    service = FakeService({}, auto_partitioned={move.target: 2})
    await publisher(service, remote).publish(move, "keep")
    assert remote.moves == [(move, "keep")] and service.partitioned == {move.target: 2}
    with pytest.raises(TopicNotFound):
        await publisher(FakeService({}, auto_partitioned={move.target: 0}), FakeRemote()).publish(move, "keep")


async def test_without_a_remote_publisher_a_foreign_target_is_not_owner():
    with pytest.raises(NotOwner):
        await publisher(FakeService({})).publish(dead_move(), "keep")


async def test_a_topic_closing_under_the_move_is_tried_again():
    move = retry_move()
    target = FakeTopic(move.target)
    target.closing = 1
    await publisher(FakeService({move.target: target})).publish(move, "sub")
    assert len(target.entries) == 1
    target.closing = 2
    with pytest.raises(ServiceClosed):
        await publisher(FakeService({move.target: target})).publish(Move(move.target, move.message, "p2", 1, False), "sub")


@pytest.mark.parametrize("kind", ["retry", "dead"])
def test_a_copy_keeps_the_ordering_key_but_no_schema_version(kind: str):
    source = Message(payload=b"order-8", ordering_key=b"\x00lane-3", event_time_ms=5)
    move = (plan_reconsume(POLICY, "sub", SOURCE, "5:4:-1:-1", source, 5000, now_ms=NOW_MS) if kind == "retry"
            else plan_dead_letter(POLICY, "sub", SOURCE, "5:4:-1:-1", source, 16))  # fmt: skip
    entry = decode_entry(move_entry(move, NOW_MS))
    assert [m.ordering_key for m in entry.messages] == [b"\x00lane-3"]
    assert entry.schema_version == b""  # a version names a schema of the source topic only


async def test_a_chunked_move_is_published_as_chunks_and_a_repeat_adds_no_whole_message():
    from magnetar.broker.deadletter.copies import ChunkFields

    moves = [
        Move(POLICY.dead_letter_topic, Message(payload=part), "__move:sub:1:0:-1:-1;1:1:-1:-1", 1, dead=True,
             chunk=ChunkFields("__move:sub:1:0:-1:-1;1:1:-1:-1-1", i, 2, 7))
        for i, part in enumerate([b"abcd", b"efg"])
    ]  # fmt: skip
    target = FakeTopic(POLICY.dead_letter_topic)
    mover = publisher(FakeService({target.name: target}))
    for _ in range(2):  # a repeated move (a crash before the acks)
        for move in moves:
            await mover.publish(move, POLICY.initial_subscription_name)
    assert target.chunks == [(0, 2), (1, 2)] * 2  # published as chunks: deduplicated by the last
    stored = [(e.uuid, e.chunk_id, e.num_chunks_from_msg, e.total_chunk_msg_size) for e in target.entries]
    assert stored == [(moves[0].chunk.uuid, 0, 2, 7), (moves[0].chunk.uuid, 1, 2, 7), (moves[0].chunk.uuid, 0, 2, 7)]
