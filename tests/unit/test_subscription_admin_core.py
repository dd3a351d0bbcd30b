"""Subscription admin without a network: which partitions a call applies to, input
checks before anything changes, and the ``magnetar admin`` argument helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from magnetar.broker.subscription_admin import SubscriptionAdmin
from magnetar.common.errors import (
    AlreadyExists,
    ConsumerBusy,
    InvalidArgument,
    InvalidTopicName,
    NotOwner,
    SubscriptionNotFound,
    TopicNotFound,
)
from magnetar.common.message_id import INT64_MAX, MessageId, message_id_sentinel
from magnetar.common.partitions import admin_targets
from magnetar.managedledger.position import Position
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.tools.admin import build_parser, reset_time_ms

T = "persistent://public/default/t"


def mid(ledger: int, entry: int, partition: int = -1) -> pb.MessageIdData:
    """The admin client's (wire) message id."""
    return pb.MessageIdData(ledger_id=ledger, entry_id=entry, partition=partition, batch_index=-1)


def core_id(ledger: int, entry: int, partition: int = -1) -> MessageId:
    """The broker core's message id."""
    return MessageId(partition, ledger, entry)


EARLIEST = mid(-1, -1)
LATEST = mid(INT64_MAX, INT64_MAX)


def test_sentinels():
    assert message_id_sentinel(EARLIEST) == "earliest"
    assert message_id_sentinel(LATEST) == "latest"
    assert message_id_sentinel(mid(3, 0)) is None


def test_targets_of_plain_topics_and_partitions():
    assert admin_targets("t", 0) == [T]
    assert admin_targets("t", 0, mid(3, 4, 2)) == [T]  # a plain topic ignores the id's partition
    assert admin_targets(f"{T}-partition-1", 3) == [f"{T}-partition-1"]
    assert admin_targets(f"{T}-partition-1", 3, mid(3, 4, 1)) == [f"{T}-partition-1"]
    with pytest.raises(InvalidArgument, match="partition 2"):
        admin_targets(f"{T}-partition-1", 3, mid(3, 4, 2))
    with pytest.raises(TopicNotFound, match="3 partitions"):
        admin_targets(f"{T}-partition-3", 3)
    with pytest.raises(InvalidTopicName):
        admin_targets("a/b", 0)


def test_targets_of_a_partitioned_topic():
    every = [f"{T}-partition-{i}" for i in range(3)]
    assert admin_targets(T, 3) == every
    assert admin_targets(T, 3, EARLIEST) == every
    assert admin_targets(T, 3, LATEST, whole_topic=True) == every
    assert admin_targets(T, 3, mid(5, 6, 2)) == [f"{T}-partition-2"]
    with pytest.raises(InvalidArgument, match="give the partition"):
        admin_targets(T, 3, mid(5, 6))
    with pytest.raises(InvalidArgument, match="names partition 3"):
        admin_targets(T, 3, mid(5, 6, 3))
    with pytest.raises(InvalidArgument, match="earliest or latest"):
        admin_targets(T, 3, mid(5, 6, 1), whole_topic=True)
    # The broker core's ids select the same partitions as the wire's.
    assert admin_targets(T, 3, core_id(5, 6, 2)) == [f"{T}-partition-2"]
    assert admin_targets(T, 3, MessageId.earliest) == every
    with pytest.raises(InvalidArgument, match="give the partition"):
        admin_targets(T, 3, core_id(5, 6))
    with pytest.raises(InvalidArgument, match="partition 2"):
        admin_targets(f"{T}-partition-1", 3, core_id(3, 4, 2))


def test_reset_time_is_ms_or_a_duration_ago():
    now = 10_000_000_000
    assert reset_time_ms("1700000000000", now) == 1_700_000_000_000
    assert reset_time_ms("10m", now) == now - 600_000
    assert reset_time_ms("1h", now) == now - 3_600_000
    assert reset_time_ms("30s", now) == now - 30_000
    assert reset_time_ms("2d", now) == now - 2 * 86_400_000
    assert reset_time_ms("1w", now) == now - 604_800_000
    assert reset_time_ms("100000w", now) == 0
    for bad in ("", "-5", "10x", "m", "1.5h", "１０"):
        with pytest.raises(InvalidArgument, match="--time"):
            reset_time_ms(bad, now)


def message_id_arg(text: str) -> pb.MessageIdData:
    return MessageId.parse(text).to_proto()  # how magnetar admin reads --message-id


def test_message_id_argument():
    assert message_id_arg("earliest") == EARLIEST
    assert message_id_sentinel(message_id_arg("latest")) == "latest"
    assert message_id_arg("12:3") == mid(12, 3)
    assert message_id_arg("12:3:1") == mid(12, 3, 1)
    with pytest.raises(InvalidArgument, match="invalid message id"):
        message_id_arg("12")


def test_parser_has_pulsar_admin_commands():
    parser = build_parser()
    args = parser.parse_args(["topics", "create-subscription", "t", "-s", "s"])
    assert (args.action, args.name, args.subscription, args.message_id) == ("create-subscription", "t", "s", "latest")
    args = parser.parse_args(["topics", "unsubscribe", "t", "-s", "s", "-f"])
    assert args.force
    assert parser.parse_args(["topics", "skip", "t", "-s", "s", "-n", "4"]).count == 4
    assert parser.parse_args(["topics", "reset-cursor", "t", "-s", "s", "-t", "10m"]).time == "10m"
    assert parser.parse_args(["topics", "reset-cursor", "t", "-s", "s", "--messageId", "1:2"]).message_id == "1:2"
    args = parser.parse_args(["namespaces", "set-retention", "a/b", "--time", "-1", "--size", "100"])
    assert (args.time, args.size) == (-1, 100)
    for bad in (["topics", "reset-cursor", "t", "-s", "s"],  # a target is required
                ["topics", "reset-cursor", "t", "-s", "s", "-t", "1h", "-m", "1:2"],
                ["topics", "skip", "t", "-s", "s"],
                ["namespaces", "set-retention", "a/b", "--time", "1"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


# -- the core on fake topics ------------------------------------------------------------
@dataclass
class FakeSubscription:
    consumers: list[object] = field(default_factory=list)
    log: list[tuple] = field(default_factory=list)

    def skip(self, count: int) -> int:
        self.log.append(("skip", count))
        return count

    def clear_backlog(self) -> int:
        self.log.append(("clear",))
        return 10

    async def reset_cursor(self, position: Position) -> None:
        self.log.append(("reset", position))


class FakeTopic:
    def __init__(self, name: str) -> None:
        self.name = name
        self.subscriptions: dict[str, FakeSubscription] = {}
        self.created: list[tuple[str, object]] = []
        self.deleted: list[tuple[str, bool]] = []

    async def create_subscription(self, name: str, start: object) -> FakeSubscription:
        self.created.append((name, start))
        sub = self.subscriptions[name] = FakeSubscription()
        return sub

    async def delete_subscription(self, name: str, force: bool) -> None:
        self.deleted.append((name, force))
        del self.subscriptions[name]

    def position_of(self, message_id: MessageId) -> Position:
        return Position(message_id.ledger_id(), message_id.entry_id())

    async def position_for_time(self, timestamp_ms: int) -> Position:
        return Position(1, timestamp_ms)


class FakeService:
    def __init__(self, partitions: int, elsewhere: set[str] = frozenset()) -> None:
        self._partitions = partitions
        self.elsewhere = elsewhere
        names = [f"{T}-partition-{i}" for i in range(partitions)] if partitions else [T]
        self.topics = {n: FakeTopic(n) for n in names}
        self.opened: list[tuple[str, bool, bool]] = []

    async def partitions(self, topic: str) -> int:
        return self._partitions if topic == T else 0

    async def get_topic(self, topic: str, create: bool = True, explicit: bool = False) -> FakeTopic:
        self.opened.append((topic, create, explicit))
        if topic in self.elsewhere:
            raise NotOwner(f"topic {topic} is served by another broker; look it up again")
        if topic not in self.topics:
            raise TopicNotFound(f"topic {topic} does not exist")
        return self.topics[topic]


async def test_create_list_delete_on_a_plain_topic():
    service = FakeService(0)
    admin = SubscriptionAdmin(service)  # type: ignore[arg-type]
    await admin.create_subscription("t", "a", "earliest")
    await admin.create_subscription("t", "b", MessageId.latest)
    await admin.create_subscription("t", "c", core_id(4, 5))
    topic = service.topics[T]
    assert topic.created == [("a", "earliest"), ("b", "latest"), ("c", Position(4, 5))]
    assert service.opened[0] == (T, False, False)  # a plain topic is not created by admin calls
    assert await admin.list_subscriptions("t") == ["a", "b", "c"]
    with pytest.raises(AlreadyExists):
        await admin.create_subscription("t", "a", "latest")
    with pytest.raises(InvalidArgument):
        await admin.create_subscription("t", "", "latest")
    with pytest.raises(InvalidArgument, match="invalid message id"):
        await admin.create_subscription("t", "d", core_id(-1, 0))
    topic.subscriptions["a"].consumers.append(object())
    with pytest.raises(ConsumerBusy):
        await admin.delete_subscription("t", "a", force=False)
    await admin.delete_subscription("t", "a", force=True)
    with pytest.raises(SubscriptionNotFound):
        await admin.delete_subscription("t", "a", force=False)
    assert topic.deleted == [("a", True)]


async def test_skip_clear_and_reset_check_everything_first():
    service = FakeService(3)
    admin = SubscriptionAdmin(service)  # type: ignore[arg-type]
    await admin.create_subscription(T, "s", "earliest")
    assert all(opened[2] for opened in service.opened)  # partitions are opened explicitly
    del service.topics[f"{T}-partition-2"].subscriptions["s"]
    with pytest.raises(SubscriptionNotFound, match="partition-2"):
        await admin.skip(T, "s", 3)
    with pytest.raises(SubscriptionNotFound):
        await admin.reset_cursor(T, "s", 1000)
    assert all(not sub.log for t in service.topics.values() for sub in t.subscriptions.values())
    await admin.create_subscription(T, "s", "earliest")  # completes the missing partition only
    assert [len(t.created) for t in service.topics.values()] == [1, 1, 2]

    assert await admin.skip(T, "s", 3) == 9
    assert await admin.clear_backlog(T, "s") == 30
    await admin.reset_cursor(T, "s", 1234)
    await admin.reset_cursor(T, "s", core_id(7, 8, 1))
    logs = [t.subscriptions["s"].log for t in service.topics.values()]
    assert logs[0] == [("skip", 3), ("clear",), ("reset", Position(1, 1234))]
    assert logs[1] == [("skip", 3), ("clear",), ("reset", Position(1, 1234)), ("reset", Position(7, 8))]
    with pytest.raises(InvalidArgument):
        await admin.skip(T, "s", 0)
    with pytest.raises(InvalidArgument):
        await admin.reset_cursor(T, "s", -1)
    with pytest.raises(InvalidArgument, match="give the partition"):
        await admin.reset_cursor(T, "s", core_id(7, 8))
    assert len(logs[1]) == 4


async def test_a_partition_served_elsewhere_says_what_to_do():
    service = FakeService(2, elsewhere={f"{T}-partition-1"})
    admin = SubscriptionAdmin(service)  # type: ignore[arg-type]
    with pytest.raises(NotOwner, match="each partition to its owner"):
        await admin.list_subscriptions(T)
    with pytest.raises(NotOwner, match="look it up again"):
        await admin.list_subscriptions(f"{T}-partition-1")
    assert await admin.list_subscriptions(f"{T}-partition-0") == []


async def test_missing_topic():
    admin = SubscriptionAdmin(FakeService(0))  # type: ignore[arg-type]
    with pytest.raises(TopicNotFound):
        await admin.list_subscriptions("other")
