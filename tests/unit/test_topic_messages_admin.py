"""Finding and expiring a topic's messages without a network (TopicAdmin and
SubscriptionAdmin over a real PersistentTopic on in-memory twins of the ledger client
and store): the first message at or after a publish time, one message by its id, and
expiry on every subscription at once."""

from __future__ import annotations

import pytest
from test_managed_ledger_core import FakeLedgerClient, MemoryStore, open_ml

from magnetar.broker.config import BrokerConfig
from magnetar.broker.entry import Message, encode_entry
from magnetar.broker.subscription_admin import SubscriptionAdmin
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic import PersistentTopic
from magnetar.broker.topic_admin import TopicAdmin
from magnetar.common.errors import InvalidArgument, NoSuchEntry, NotFound, TopicNotFound
from magnetar.managedledger.position import Position

pytestmark = pytest.mark.asyncio
TOPIC = "persistent://public/default/t"


class Service:
    """The parts of BrokerService the admin classes use: one served topic."""

    def __init__(self, topic: PersistentTopic) -> None:
        self.topics = {TOPIC: topic}

    async def get_topic(self, name: str, create: bool = True, explicit: bool = False) -> PersistentTopic:
        if name not in self.topics:
            raise TopicNotFound(f"topic {name} does not exist")
        return self.topics[name]

    async def partitions(self, name: str) -> int:
        return 0


@pytest.fixture
async def served():
    topic = PersistentTopic(TOPIC, -1, await open_ml(FakeLedgerClient(), MemoryStore(), max_entries_per_ledger=2),
                            BrokerConfig(cursor_persist_interval_s=0.01))  # fmt: skip
    await topic.load()
    # published at 1000, 2000 (a batch of two), 3000 ms; over two ledgers
    topic.test_positions = []
    for when, payloads in ((1000, [b"a"]), (2000, [b"b1", b"b2"]), (3000, [b"c"])):
        msgs = [Message(payload=p, sequence_id=i, properties={"n": p.decode()}) for i, p in enumerate(payloads)]
        done = await topic.publish("", encode_entry("p", 0, when, len(msgs) > 1, msgs), len(msgs), 0, len(msgs) - 1)
        topic.test_positions.append(done.position)
    yield topic
    await topic.close()


async def test_the_first_message_at_or_after_a_publish_time(served):
    admin = TopicAdmin(Service(served))  # type: ignore[arg-type]
    positions = served.test_positions
    assert len(positions) == 3 and positions[2].ledger_id != positions[0].ledger_id  # across ledgers
    assert [await admin.message_id_by_time(TOPIC, t) for t in (0, 1000, 1001, 2000, 2500, 3000)] == [
        positions[0], positions[0], positions[1], positions[1], positions[2], positions[2]]
    with pytest.raises(NotFound, match="Message ID not found"):
        await admin.message_id_by_time(TOPIC, 3001)  # nothing published then or later
    with pytest.raises(InvalidArgument):
        await admin.message_id_by_time(TOPIC, -1)
    with pytest.raises(TopicNotFound):
        await admin.message_id_by_time(TOPIC + "-other", 0)


async def test_one_message_by_its_id(served):
    admin = TopicAdmin(Service(served))  # type: ignore[arg-type]
    positions = served.test_positions
    found = [await admin.message_by_id(TOPIC, *p) for p in positions]
    assert [(f.position, f.message.payload, f.batch_index, f.batch.publish_time_ms) for f in found] == [
        (positions[0], b"a", -1, 1000), (positions[1], b"b1", 0, 2000), (positions[2], b"c", -1, 3000)]
    assert found[1].message.properties == {"n": "b1"} and len(found[1].batch.messages) == 2
    last = positions[-1]
    for ledger, entry in ((last.ledger_id, last.entry_id + 1), (last.ledger_id + 100, 0)):
        with pytest.raises(NoSuchEntry):
            await admin.message_by_id(TOPIC, ledger, entry)
    with pytest.raises(InvalidArgument):
        await admin.message_by_id(TOPIC, -1, 0)


async def test_expiry_on_every_subscription_at_once(served):
    for name in ("a", "b"):
        await served.subscribe(name, SubscriptionType.Exclusive, InitialPosition.Earliest)
    admin = SubscriptionAdmin(Service(served), clock=lambda: 2.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await admin.expire_all_subscriptions(TOPIC, -1)
    assert [served.subscriptions[n].cursor.backlog() for n in ("a", "b")] == [3, 3]  # the refusal changed nothing
    assert await admin.expire_all_subscriptions(TOPIC, 1) == 2  # before 1500 ms: the first entry, on each
    assert [served.subscriptions[n].cursor.backlog() for n in ("a", "b")] == [2, 2]
    assert await admin.expire_all_subscriptions(TOPIC, 0) == 2  # before 2500 ms: the batch too
    assert [served.subscriptions[n].cursor.backlog() for n in ("a", "b")] == [1, 1]
    assert served.subscriptions["a"].cursor.mark_delete_position == Position(*served.ml.previous_position(
        await TopicAdmin(Service(served)).message_id_by_time(TOPIC, 3000)))  # type: ignore[arg-type]
