"""Deduplication snapshots (magnetar.broker.dedup): a broker taking a topic over scans only
the entries after the last snapshot, and recognises resends exactly as after a full scan
(clean hand-over, crash, retry/DLQ move names, an unreadable snapshot). Over a real
ManagedLedger on the in-memory twins."""

from __future__ import annotations

import asyncio
import logging

import pytest
from test_managed_ledger_core import FakeLedgerClient, MemoryStore, open_ml

from magnetar.broker.config import BrokerConfig
from magnetar.broker.dedup import SNAPSHOT_PROPERTY, DedupState, Snapshot
from magnetar.broker.entry import Message, encode_entry
from magnetar.broker.topic import PersistentTopic
from magnetar.common.errors import InvalidArgument
from magnetar.managedledger.position import Position

TOPIC = "persistent://public/default/t"
INTERVAL = 10


def entry(producer: str, seq: int) -> bytes:
    return encode_entry(producer, 0, 0, False, [Message(payload=b"m%d" % seq, sequence_id=seq)])


async def send(topic: PersistentTopic, producer: str, seq: int) -> bool:
    """Publish; True when it was stored (False: recognised as a resend)."""
    result = await topic.publish(producer, entry(producer, seq), 1, seq, seq)
    return not result.duplicate


class Owner:
    """One broker's view: a managed ledger opened on the shared twins, a topic over it,
    and how many entries the deduplication scan of its load read."""

    def __init__(self, client: FakeLedgerClient, store: MemoryStore, **settings: int) -> None:
        self.client, self.store = client, store
        self.config = BrokerConfig(deduplication_entries_interval=settings.get("interval", INTERVAL))
        self.scanned = 0
        self.topic: PersistentTopic | None = None

    async def take_over(self) -> PersistentTopic:
        ml = await open_ml(self.client, self.store)
        read = ml.read_entries

        async def counted(start: Position, max_entries: int, max_bytes: int):  # type: ignore[no-untyped-def]
            batch = await read(start, max_entries, max_bytes)
            self.scanned += len(batch)
            return batch

        ml.read_entries = counted  # type: ignore[method-assign]
        self.topic = PersistentTopic(TOPIC, -1, ml, self.config)
        await self.topic.load()
        ml.read_entries = read  # type: ignore[method-assign]
        return self.topic


async def settle(topic: PersistentTopic) -> None:
    """Let a snapshot being stored in the background finish."""
    for _ in range(100):
        if not topic._snapshotting:
            return
        await asyncio.sleep(0.01)


def stored_snapshot(store: MemoryStore) -> Snapshot:
    (doc, _), = store.lists.values()  # fmt: skip
    snapshot = Snapshot.decode(doc["properties"][SNAPSHOT_PROPERTY])
    assert snapshot is not None
    return snapshot


async def test_a_clean_hand_over_scans_nothing_and_keeps_every_resend_out():
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store).take_over()
    for seq in range(25):
        assert await send(first, "p", seq)
    assert await send(first, "q", 7)
    await settle(first)
    assert stored_snapshot(store).producers == {"p": 19}  # written at 10 and 20 entries
    await first.close()  # the unload stores the last one with the ledger list
    assert stored_snapshot(store).producers == {"p": 24, "q": 7}
    owner = Owner(client, store)
    second = await owner.take_over()
    assert owner.scanned == 0
    assert not await send(second, "p", 24) and not await send(second, "p", 3) and not await send(second, "q", 7)
    assert await send(second, "p", 25) and await send(second, "q", 8)
    await second.close()


async def test_after_a_crash_the_entries_after_the_snapshot_are_scanned():
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store).take_over()
    for seq in range(34):
        assert await send(first, "p", seq)
    await settle(first)
    assert stored_snapshot(store).producers == {"p": 29}
    # The owner dies (never closes): the next one recovers its ledger.
    owner = Owner(client, store)
    second = await owner.take_over()
    assert owner.scanned == 4  # 30..33, not 34
    assert not await send(second, "p", 33) and not await send(second, "p", 29)
    assert await send(second, "p", 34)
    await second.close()


async def test_move_names_before_the_snapshot_are_found_again():
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store).take_over()
    moves = [f"__move:sub:{TOPIC}:1:{i}:-1" for i in range(3)]
    for name in moves:
        assert await send(first, name, 0)
    for seq in range(20):
        assert await send(first, "p", seq)
    await settle(first)
    snapshot = stored_snapshot(store)
    assert snapshot.producers == {"p": 16}  # move names stay out ...
    assert snapshot.scan_from == first._dedup.move_positions[moves[0]]  # ... and are scanned again
    await first.close()
    owner = Owner(client, store)
    second = await owner.take_over()
    assert owner.scanned == 23
    assert [await send(second, name, 0) for name in moves] == [False, False, False]
    assert not await send(second, "p", 19)
    await second.close()


async def test_an_unreadable_snapshot_means_a_full_scan(caplog: pytest.LogCaptureFixture):
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store).take_over()
    for seq in range(12):
        assert await send(first, "p", seq)
    first.ml.put_property(SNAPSHOT_PROPERTY, '{"scan_from": [1, "x"], "producers": {}}')
    await first.ml.close()  # stored with the list; the topic's own close would replace it
    owner = Owner(client, store)
    with caplog.at_level(logging.WARNING):
        second = await owner.take_over()
    assert "deduplication snapshot is unreadable" in caplog.text
    assert owner.scanned == 12
    assert not await send(second, "p", 11) and await send(second, "p", 12)
    await second.close()


async def test_no_snapshots_when_switched_off():
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store, interval=0).take_over()
    for seq in range(30):
        assert await send(first, "p", seq)
    await first.ml.close()
    assert SNAPSHOT_PROPERTY not in next(iter(store.lists.values()))[0]["properties"]
    owner = Owner(client, store, interval=0)
    second = await owner.take_over()
    assert owner.scanned == 30 and not await send(second, "p", 29)
    await second.close()


async def test_sequence_ids_over_int64_are_refused_and_never_told_to_a_producer():
    """The fuzzer's: a send with sequence id 2^64-2 was stored, and every later open of that
    producer name failed (ProducerOpened.last_sequence_id is int64: ValueError, UNKNOWN).
    Now the send is refused and nothing stored; an entry whose messages carry such ids
    (a scan reads those) does not count either."""
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store).take_over()
    assert first.add_producer("p") == -1
    for lowest, highest in ((2**64 - 2, 2**64 - 2), (0, 2**63), (2**63, 2**63 + 5)):
        with pytest.raises(InvalidArgument, match="sequence ids are 0 to 9223372036854775807"):
            await first.publish("p", entry("p", 1), 1, lowest, highest)
    assert first.ml.number_of_entries == 0  # nothing stored
    assert await send(first, "p", 2**63 - 1)  # the largest id is fine
    # An entry whose message says 2^64-1 while its send says 5: stored, but not counted.
    assert not (await first.publish("q", entry("q", 2**64 - 1), 1, 5, 5)).duplicate
    first.remove_producer("p")
    assert first.add_producer("p") == 2**63 - 1 and first.add_producer("q") == 5
    await first.close()
    owner = Owner(client, store, interval=0)
    second = await owner.take_over()
    assert second.add_producer("p") == 2**63 - 1 and second.add_producer("q") == 5
    await second.close()
    state = DedupState()
    state.stored("r", 2**64 - 1)
    assert state.persisted == {}


@pytest.mark.parametrize(
    "text",
    ["", "[]", "{}", '{"scan_from": [1], "producers": {}}', '{"scan_from": [1, 2], "producers": []}',
     '{"scan_from": [1, 2], "producers": {"p": "3"}}', '{"scan_from": [true, 2], "producers": {}}',
     "[" * 100_000, '{"scan_from": [1, 2], "producers": {"p": 9223372036854775808}}'],
)  # fmt: skip
def test_snapshot_decoding_refuses_what_is_not_one(text: str):
    assert Snapshot.decode(text) is None


def test_snapshot_round_trip_and_no_snapshot_of_too_many_producers(monkeypatch: pytest.MonkeyPatch):
    from magnetar.broker import dedup as dedup_module

    state = DedupState()
    state.stored("p", 5, Position(3, 1))
    state.stored("__move:s:t:1:2:-1", 0, Position(3, 2))
    snapshot = state.snapshot(Position(3, 9))
    assert snapshot == Snapshot(Position(3, 2), {"p": 5})
    assert Snapshot.decode(snapshot.encode()) == snapshot
    monkeypatch.setattr(dedup_module, "MAX_SNAPSHOT_PRODUCERS", 1)
    state.stored("q", 1, Position(3, 3))
    assert state.snapshot(Position(3, 9)) is None
