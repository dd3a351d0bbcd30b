"""Topic compaction's core: the compacted entry codec, the key/tombstone/batch rules of
the two phases, and the two-phase compactor on a managed ledger of in-memory twins."""

from __future__ import annotations

import asyncio

import pytest
from conftest import TOPIC, _broker_config
from test_managed_ledger_core import NAME, FakeLedgerClient, MemoryStore, open_ml
from topic_twin import TopicTwin

from magnetar.broker.compaction import compacted_entry
from magnetar.broker.compaction.compacted_entry import CompactedEntry
from magnetar.broker.compaction.compactor import (
    COMPACTED_LEDGER_PROPERTY,
    COMPACTION_SUBSCRIPTION,
    TwoPhaseCompactor,
    compacted_view,
    read_compacted,
)
from magnetar.broker.compaction.keys import ViewEntry, compacted_out_mask, kept, latest_per_key
from magnetar.broker.compaction.reader import CompactedEntries
from magnetar.broker.compaction.status import Compactions
from magnetar.broker.consumer import BrokerConsumer, Delivery
from magnetar.broker.entry import Message, decode_entry, encode_entry
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.broker.topic import PersistentTopic
from magnetar.common.errors import AlreadyExists, InvalidArgument, MetadataError
from magnetar.managedledger.position import Position

P = Position


def entry(*messages: tuple[str | None, bytes]) -> bytes:
    """An SDK entry of these (key, payload) messages (key None: no key)."""
    ms = [Message(payload, partition_key=k or "", has_partition_key=k is not None) for k, payload in messages]
    return encode_entry("p", 0, 1000, len(ms) > 1, ms)


def view(data: bytes) -> list[tuple[str, bytes]]:
    """(key, payload) of each message an entry holds."""
    return [(m.partition_key, m.payload) for m in decode_entry(data).messages]


# -- the compacted entry codec ---------------------------------------------------------
def test_compacted_entry_round_trips_byte_for_byte() -> None:
    e = CompactedEntry(P(7, 3), 5, (1, 4), b"xyz")
    data = compacted_entry.encode(e)
    assert data == bytes.fromhex("0000000000000007" "0000000000000003" "00000005" "00000002" "00000001" "00000004") + b"xyz"
    assert compacted_entry.decode(data) == e


@pytest.mark.parametrize("cut", [0, 10, 24, 27])
def test_a_torn_compacted_entry_is_refused(cut: int) -> None:
    data = compacted_entry.encode(CompactedEntry(P(7, 3), 5, (1, 4), b""))
    with pytest.raises(InvalidArgument):
        compacted_entry.decode(data[:cut])


@pytest.mark.parametrize("indexes,size", [((4, 1), 5), ((1, 5), 5), ((2, 2), 5), ((0, 1, 2), 2)])
def test_a_compacted_entry_with_bad_indexes_is_refused(indexes: tuple[int, ...], size: int) -> None:
    data = compacted_entry.encode(CompactedEntry(P(1, 1), size, indexes, b""))
    with pytest.raises(InvalidArgument):
        compacted_entry.decode(data)


# -- the phases' rules ---------------------------------------------------------------------
def test_latest_value_per_key_wins_and_a_tombstone_removes_the_key() -> None:
    items = [
        ViewEntry(P(1, 0), entry(("a", b"a1"))),
        ViewEntry(P(1, 1), entry(("b", b"b1"))),
        ViewEntry(P(1, 2), entry(("a", b"a2"))),
        ViewEntry(P(1, 3), entry(("b", b""))),  # tombstone
        ViewEntry(P(1, 4), entry((None, b"no key"))),
    ]
    latest = latest_per_key(items)
    assert latest == {"a": (P(1, 2), 0)}
    out = [kept(i, latest) for i in items]
    assert [o is not None for o in out] == [False, False, True, False, False]
    assert out[2] is not None and out[2].data == items[2].data and out[2].indexes == (0,)


def test_a_key_written_again_after_its_tombstone_is_live() -> None:
    items = [ViewEntry(P(1, i), entry(m)) for i, m in enumerate([("k", b"1"), ("k", b""), ("k", b"3")])]
    assert latest_per_key(items) == {"k": (P(1, 2), 0)}


def test_batches_are_compacted_per_message_keeping_batch_indexes() -> None:
    batch = ViewEntry(P(2, 0), entry(("a", b"a1"), ("b", b"b1"), (None, b"x"), ("a", b"a2"), ("c", b"c1")))
    later = ViewEntry(P(2, 1), entry(("c", b""), ("b", b"b2")))
    latest = latest_per_key([batch, later])
    assert latest == {"a": (P(2, 0), 3), "b": (P(2, 1), 1)}
    first = kept(batch, latest)
    assert first is not None and first.indexes == (3,) and first.batch_size == 5
    # As wide as the batch: the kept message keeps its batch index, the rest are placeholders.
    assert view(first.data) == [("", b""), ("", b""), ("", b""), ("a", b"a2"), ("", b"")]
    assert compacted_out_mask(first.batch_size, first.indexes) == 0b10111
    second = kept(later, latest)
    assert second is not None and second.indexes == (1,) and second.batch_size == 2
    assert view(second.data) == [("", b""), ("b", b"b2")]
    # Its next compaction reads it back as the same messages.
    again = ViewEntry(first.position, first.data, first.batch_size, first.indexes)
    assert latest_per_key([again]) == {"a": (P(2, 0), 3)}
    assert kept(again, latest) == first


def test_a_previous_compacted_entry_keeps_its_topic_batch_indexes() -> None:
    # What the last compaction kept of a batch of 5: indexes 1 and 3.
    previous = ViewEntry(
        P(2, 0), entry((None, b""), ("a", b"a"), (None, b""), ("b", b"b"), (None, b"")), batch_size=5, indexes=(1, 3)
    )
    later = ViewEntry(P(3, 0), entry(("a", b"a2")))
    latest = latest_per_key([previous, later])
    assert latest == {"b": (P(2, 0), 3), "a": (P(3, 0), 0)}
    out = kept(previous, latest)
    assert out is not None and out.indexes == (3,) and out.batch_size == 5 and view(out.data)[3] == ("b", b"b")


def test_chunks_and_entries_that_are_no_batch_are_not_kept() -> None:
    chunk = Message(b"part", partition_key="k", has_partition_key=True)

    class Chunk:
        uuid, chunk_id, num_chunks_from_msg, total_chunk_msg_size = "u", 0, 2, 8

    items = [ViewEntry(P(1, 0), encode_entry("p", 0, 1, False, [chunk], chunk=Chunk())), ViewEntry(P(1, 1), b"\xff\xff")]
    assert latest_per_key(items) == {}


# -- the compactor -----------------------------------------------------------------------
async def publish(ml, *entries: bytes) -> list[Position]:
    return [await ml.add_entry(e) for e in entries]


async def compacted(client: FakeLedgerClient, ledger_id: int) -> dict[str, tuple[bytes, Position, tuple[int, ...]]]:
    out = {}
    async for item in read_compacted(client, ledger_id):
        messages = decode_entry(item.data).messages
        for index in item.indexes or ():
            m = messages[index] if len(messages) == item.batch_size else messages[0]
            out[m.partition_key] = (m.payload, item.position, (index,))
    return out


async def test_compactor_writes_the_latest_value_of_each_live_key_and_records_it_in_the_cursor() -> None:
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    positions = await publish(
        ml, entry(("a", b"a1"), ("b", b"b1")), entry(("c", b"c1")), entry(("a", b"a2"), ("c", b"")), entry((None, b"x"))
    )
    result = await TwoPhaseCompactor(ml, client).compact()
    assert result is not None and result.horizon == positions[-1]
    assert await compacted(client, result.ledger_id) == {"b": (b"b1", positions[0], (1,)), "a": (b"a2", positions[2], (0,))}
    # Durable: the stored cursor names the ledger and the horizon.
    doc, _ = store.cursors[(*NAME, COMPACTION_SUBSCRIPTION)]
    assert doc["properties"][COMPACTED_LEDGER_PROPERTY] == str(result.ledger_id)
    assert client.properties[-1]["compactedTopic"] == "/".join(NAME)
    await ml.close()
    reopened = await open_ml(client, store)
    assert compacted_view(reopened.cursors[COMPACTION_SUBSCRIPTION]) == result
    await reopened.close()


async def test_a_second_compaction_builds_on_the_first_and_deletes_its_ledger() -> None:
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    first_positions = await publish(ml, entry(("a", b"a1")), entry(("b", b"b1")))
    first = await TwoPhaseCompactor(ml, client).compact()
    assert first is not None
    # Trim the topic before the horizon: the second compaction must take a and b from the first view.
    cursor = ml.cursors[COMPACTION_SUBSCRIPTION]
    assert cursor.mark_delete_position == first_positions[-1]
    later = await publish(ml, entry(("b", b"")), entry(("c", b"c1")))
    second = await TwoPhaseCompactor(ml, client).compact()
    assert second is not None and second.horizon == later[-1] and second.ledger_id != first.ledger_id
    assert await compacted(client, second.ledger_id) == {"a": (b"a1", first_positions[0], (0,)), "c": (b"c1", later[1], (0,))}
    assert first.ledger_id not in client.data  # deleted after the switch
    await ml.close()


async def test_nothing_new_since_the_horizon_keeps_the_view() -> None:
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    assert await TwoPhaseCompactor(ml, client).compact() is None  # an empty topic
    await publish(ml, entry(("a", b"a1")))
    first = await TwoPhaseCompactor(ml, client).compact()
    assert await TwoPhaseCompactor(ml, client).compact() == first
    assert first is not None and first.ledger_id in client.data
    await ml.close()


async def test_a_failed_switch_keeps_the_previous_view_and_drops_the_new_ledger() -> None:
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    await publish(ml, entry(("a", b"a1")))
    first = await TwoPhaseCompactor(ml, client).compact()
    assert first is not None
    await publish(ml, entry(("a", b"a2")))
    put = store.put_cursor

    async def failing(t, n, topic, c, doc, version):
        if c == COMPACTION_SUBSCRIPTION:
            raise MetadataError("ZooKeeper is gone")
        return await put(t, n, topic, c, doc, version)

    store.put_cursor = failing  # type: ignore[method-assign]
    before = set(client.data)
    with pytest.raises(MetadataError):
        await TwoPhaseCompactor(ml, client).compact()
    assert set(client.data) == before  # the unfinished ledger is deleted, the first kept
    doc, _ = store.cursors[(*NAME, COMPACTION_SUBSCRIPTION)]
    assert doc["properties"][COMPACTED_LEDGER_PROPERTY] == str(first.ledger_id)
    assert await compacted(client, first.ledger_id) == {"a": (b"a1", P(first.horizon.ledger_id, 0), (0,))}
    store.put_cursor = put  # type: ignore[method-assign]
    await ml.close()


# -- one at a time, with a status ------------------------------------------------------------
async def test_one_compaction_of_a_topic_at_a_time_with_pulsars_statuses() -> None:
    compactions = Compactions()
    assert compactions.status("t").status == "NOT_RUN"
    gate = asyncio.Event()

    async def held() -> None:
        await gate.wait()

    compactions.trigger("t", held)
    assert compactions.status("t").status == "RUNNING"
    with pytest.raises(AlreadyExists):
        compactions.trigger("t", held)
    gate.set()
    await compactions.wait("t")
    assert compactions.status("t").status == "SUCCESS"

    async def failing() -> None:
        raise MetadataError("ZooKeeper is gone")

    compactions.trigger("t", failing)
    await compactions.wait("t")
    assert compactions.status("t").status == "ERROR" and compactions.status("t").last_error == "ZooKeeper is gone"
    await compactions.close()


# -- reading the compacted view ------------------------------------------------------------
async def compacted_topic():
    client, store = FakeLedgerClient(), MemoryStore()
    twin = TopicTwin(TOPIC, await open_ml(client, store), store, _broker_config())
    twin.compacted = CompactedEntries(twin.ml, client)
    return twin, client


async def test_a_read_compacted_consumer_sees_the_view_then_the_topic_with_the_topics_message_ids() -> None:
    twin, client = await compacted_topic()
    ml = twin.ml
    before = await publish(
        ml, entry(("a", b"a1"), ("b", b"b1"), ("c", b"c1")), entry(("a", b"a2")), entry(("c", b"")), entry((None, b"x"))
    )
    await TwoPhaseCompactor(ml, client).compact()
    after = await publish(ml, entry(("b", b"b2")), entry(("c", b"c3")))
    sub = await twin.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    sink = CompactedSink(sub, read_compacted=True)
    expected = [(before[0], 1, "b", b"b1"), (before[1], 0, "a", b"a2"), (after[0], 0, "b", b"b2"), (after[1], 0, "c", b"c3")]
    await until(lambda: len(sink.messages()) >= len(expected))
    assert sink.messages() == expected
    # Acks are the topic's: acknowledging everything delivered empties the backlog.
    sub.ack(sink.consumer, list(sink.consumer.pending), cumulative=False)
    sub.ack(sink.consumer, [after[1]], cumulative=True)
    assert twin.ml.cursors["s"].mark_delete_position == after[1]
    await twin.close()


async def test_without_read_compacted_the_same_subscription_sees_every_message() -> None:
    twin, client = await compacted_topic()
    await publish(twin.ml, entry(("a", b"a1")), entry(("a", b"a2")))
    await TwoPhaseCompactor(twin.ml, client).compact()
    sub = await twin.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    sink = CompactedSink(sub, read_compacted=False)
    await until(lambda: len(sink.messages()) >= 2)
    assert [m[3] for m in sink.messages()] == [b"a1", b"a2"]
    await twin.close()


@pytest.mark.parametrize("sub_type", [SubscriptionType.Shared, SubscriptionType.Key_Shared])
async def test_read_compacted_is_refused_on_shared_subscriptions_and_attaches_nothing(sub_type) -> None:
    twin, _ = await compacted_topic()
    sub = await twin.subscribe("s", sub_type, InitialPosition.Earliest)
    with pytest.raises(InvalidArgument, match="readCompacted only allowed on failover or exclusive"):
        CompactedSink(sub, read_compacted=True, sub_type=sub_type)
    assert sub.consumers == [] and sub.reads_compacted is None
    await twin.close()


class CompactedSink:
    def __init__(self, sub, read_compacted: bool, sub_type: SubscriptionType = SubscriptionType.Exclusive) -> None:
        self.deliveries: list[Delivery] = []
        self.consumer = BrokerConsumer("c", 0, self.deliveries.extend, read_compacted=read_compacted)
        sub.add_consumer(self.consumer, sub_type)
        sub.flow(self.consumer, 1000)

    def messages(self) -> list[tuple[Position, int, str, bytes]]:
        out = []
        for d in self.deliveries:
            for i, m in enumerate(decode_entry(d.entry).messages):
                if not d.skipped >> i & 1:
                    out.append((d.position, i, m.partition_key, m.payload))
        return out


async def until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_deleting_a_topic_deletes_its_compacted_ledger() -> None:
    client, store = FakeLedgerClient(), MemoryStore()
    topic = PersistentTopic(TOPIC, -1, await open_ml(client, store), _broker_config())
    topic.compacted = CompactedEntries(topic.ml, client)
    await publish(topic.ml, entry(("a", b"a1")))
    view = await TwoPhaseCompactor(topic.ml, client).compact()
    assert view is not None and view.ledger_id in client.data
    await topic.close_and_delete()
    assert client.data == {}  # the topic's ledgers and its compacted ledger


async def test_the_view_keeps_its_horizon_when_the_compaction_cursor_is_moved_on() -> None:
    # Message TTL and backlog eviction move every durable cursor, __compaction too.
    twin, client = await compacted_topic()
    await publish(twin.ml, entry(("a", b"a1")), entry(("a", b"a2")))
    view = await TwoPhaseCompactor(twin.ml, client).compact()
    later = await publish(twin.ml, entry(("b", b"b1")), entry(("a", b"a3")))
    twin.ml.cursors[COMPACTION_SUBSCRIPTION].ack_cumulative(later[-1])
    assert twin.compacted is not None and twin.compacted.view() == view
    sub = await twin.subscribe("s", SubscriptionType.Exclusive, InitialPosition.Earliest)
    sink = CompactedSink(sub, read_compacted=True)
    await until(lambda: len(sink.messages()) >= 3)
    assert [(key, payload) for _, _, key, payload in sink.messages()] == [("a", b"a2"), ("b", b"b1"), ("a", b"a3")]
    await twin.close()
