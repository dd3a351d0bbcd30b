"""ManagedCursor batch-index acks, redelivery counts, reset/skip and its stored document,
against the in-memory twins of the ledger client and store."""

from __future__ import annotations

import asyncio
import json

import pytest
from test_managed_ledger_core import NAME, FakeLedgerClient, MemoryStore, open_ml, stored_list

from magnetar.common.errors import InvalidArgument, MetadataError, MetadataVersionConflict
from magnetar.managedledger import ManagedLedgerConfig, Position
from magnetar.managedledger.cursor_state import MAX_DOCUMENT_BYTES, CursorDocument
from magnetar.metadata.codec import encode

P = Position


async def filled(n: int = 10, **settings):
    """A managed ledger with ``n`` entries over ledgers of 4 and an 'earliest' cursor."""
    client, store = FakeLedgerClient(), MemoryStore()
    settings.setdefault("max_entries_per_ledger", 4)
    ml = await open_ml(client, store, **settings)
    pos = [await ml.add_entry(b"%d" % i) for i in range(n)]
    await asyncio.sleep(0.01)  # let the last rollover finish
    cursor = await ml.open_cursor("sub", "earliest")
    return client, store, ml, pos, cursor


def stored(store: MemoryStore, name: str = "sub") -> dict:
    return store.cursors[(*NAME, name)][0]


# -- batch-index acks ------------------------------------------------------------------


async def test_batch_acks_accumulate_then_ack_the_entry_like_ack():
    _, _, ml, pos, c = await filled()
    assert c.acked_mask(pos[0]) == 0
    assert c.ack_batch(pos[0], 3, 0b001) is False
    assert c.acked_mask(pos[0]) == 0b001 and not c.is_acked(pos[0])
    assert c.ack_batch(pos[0], 3, 0b001) is False  # same bits again: nothing new
    assert c.ack_batch(pos[0], 3, 0) is False
    assert c.ack_batch(pos[1], 1, 0b1) is True  # a batch of one, wholly acked at once
    assert c.individually_acked == [(pos[1], pos[1])] and c.acked_mask(pos[1]) == 0
    assert c.ack_batch(pos[0], 3, 0b110) is True
    assert c.is_acked(pos[0]) and c.acked_mask(pos[0]) == 0
    assert c.mark_delete_position == pos[1] and c.individually_acked == [] and c.backlog() == 8
    assert c.ack_batch(pos[0], 3, 0b111) is False  # already acked: no-op
    assert c.ack_batch(pos[0], 5, 0b11111) is False
    await ml.close()


async def test_ack_and_cumulative_ack_drop_batch_records():
    _, store, ml, pos, c = await filled()
    c.ack_batch(pos[3], 8, 0b1)
    c.ack_batch(pos[5], 8, 0b1)
    c.ack_batch(pos[7], 8, 0b1)
    c.ack([pos[5]])
    assert c.acked_mask(pos[5]) == 0 and c.is_acked(pos[5])
    c.ack_cumulative(pos[3])
    assert c.acked_mask(pos[3]) == 0 and c.acked_mask(pos[7]) == 0b1
    await c.flush()
    assert stored(store)["batch_acks"] == [[pos[7].ledger_id, pos[7].entry_id, 8, "1"]]
    await ml.close()


async def test_ack_batch_refuses_bad_input_and_changes_nothing():
    _, _, ml, pos, c = await filled()
    c.ack_batch(pos[2], 4, 0b0001)
    bad = [
        (P(pos[-1].ledger_id, 99), 4, 1),  # not a stored entry
        (P(99999, 0), 4, 1),
        (pos[3], 0, 0),  # batch size < 1
        (pos[3], -2, 1),
        (pos[3], True, 1),
        (pos[3], 4, 0b10000),  # a bit at the batch size
        (pos[3], 4, -1),
        (pos[3], 4, 1.0),
        (pos[2], 5, 0b0010),  # not the size recorded for this entry
        ((1, 2, 3), 4, 1),
    ]
    for args in bad:
        with pytest.raises(InvalidArgument):
            c.ack_batch(*args)  # type: ignore[arg-type]
    assert c.acked_mask(pos[2]) == 0b0001 and c.acked_mask(pos[3]) == 0
    assert c.individually_acked == [] and c.backlog() == 10
    await ml.close()


# -- redelivery counts -----------------------------------------------------------------


async def test_redelivery_counts_count_unacked_entries_only_and_drop_with_acks():
    _, _, ml, pos, c = await filled()
    c.ack([pos[1]])
    assert not c.counts_dirty
    c.add_redeliveries([pos[0], pos[1], pos[2], pos[2], P(pos[-1].ledger_id, 50), P(99999, 0)])
    assert [c.redelivery_count(p) for p in pos[:4]] == [1, 0, 2, 0]
    assert c.redelivery_count(P(99999, 0)) == 0 and c.counts_dirty
    c.add_redeliveries([pos[5], pos[6], pos[7]])
    c.ack([pos[6]])  # individually acked: its count goes
    assert c.redelivery_count(pos[6]) == 0 and c.redelivery_count(pos[5]) == 1
    c.ack([pos[0]])  # mark-delete passes 0, 1 and 2 stays
    assert c.redelivery_count(pos[0]) == 0 and c.redelivery_count(pos[2]) == 2
    c.ack_cumulative(pos[5])
    assert [c.redelivery_count(p) for p in pos] == [0] * 7 + [1, 0, 0]
    with pytest.raises(InvalidArgument):
        c.add_redeliveries([pos[8], (-3, 0)])  # nothing counted
    assert c.redelivery_count(pos[8]) == 0
    await ml.close()


async def test_persist_counts_writes_at_once_and_only_when_counts_changed():
    _, store, ml, pos, c = await filled(cursor_persist_interval_s=3600)
    await c.persist()
    writes = store.cursor_writes
    await c.persist_counts()
    assert store.cursor_writes == writes  # nothing changed
    c.ack([pos[3]])  # an ack alone waits for the (hour-long) debounce timer
    await c.persist_counts()
    assert store.cursor_writes == writes
    c.add_redeliveries([pos[0], pos[1]])
    await c.persist_counts()
    assert store.cursor_writes == writes + 1 and not c.counts_dirty
    lid = pos[0].ledger_id
    doc = stored(store)
    assert doc["redelivery_counts"] == [[lid, 0, 1], [lid, 1, 1]]
    assert doc["individually_acked"] == [[[lid, 3], [lid, 3]]]  # the ack went along
    await c.persist_counts()
    assert store.cursor_writes == writes + 1
    await ml.close()


async def test_concurrent_persist_counts_write_once():
    _, store, ml, pos, c = await filled(cursor_persist_interval_s=3600)
    await c.persist()
    writes = store.cursor_writes
    c.add_redeliveries([pos[0]])
    await asyncio.gather(c.persist_counts(), c.persist_counts(), c.persist_counts())
    assert store.cursor_writes == writes + 1
    await ml.close()


async def test_persist_counts_after_a_takeover_raises_and_keeps_counts_dirty():
    _, store, ml, pos, c = await filled(cursor_persist_interval_s=3600)
    doc, v = store.cursors[(*NAME, "sub")]
    store.cursors[(*NAME, "sub")] = (doc, v + 3)  # another broker took the cursor
    c.add_redeliveries([pos[0]])
    with pytest.raises(MetadataVersionConflict):
        await c.persist_counts()
    assert c.counts_dirty and store.cursors[(*NAME, "sub")] == (doc, v + 3)
    with pytest.raises(MetadataVersionConflict):
        await c.persist_counts()
    await ml.close()


# -- the stored document ---------------------------------------------------------------


async def test_batch_acks_and_counts_survive_a_reopen_and_an_abandoned_owner():
    client, store, ml, pos, c = await filled(cursor_persist_interval_s=3600)
    c.ack_batch(pos[2], 10, 0b1000000001)
    c.ack_batch(pos[5], 3, 0b010)
    c.ack([pos[4]])
    c.add_redeliveries([pos[2], pos[2], pos[9], pos[4]])
    await c.persist_counts()  # the only write: the owner is then abandoned
    lid0, lid1, lid2 = pos[0].ledger_id, pos[4].ledger_id, pos[8].ledger_id
    assert stored(store) == {
        "mark_delete": [lid0, -1],
        "individually_acked": [[[lid1, 0], [lid1, 0]]],
        "batch_acks": [[lid0, 2, 10, "201"], [lid1, 1, 3, "2"]],
        "redelivery_counts": [[lid0, 2, 2], [lid2, 1, 1]],
        "properties": {},
        "read_position": [lid0, 0],
    }
    again = await open_ml(client, store)  # no close of `ml`: only persist_counts made it
    c2 = again.cursors["sub"]
    assert c2.acked_mask(pos[2]) == 0b1000000001 and c2.acked_mask(pos[5]) == 0b010
    assert c2.redelivery_count(pos[2]) == 2 and c2.redelivery_count(pos[9]) == 1
    assert c2.is_acked(pos[4]) and c2.redelivery_count(pos[4]) == 0
    assert c2.ack_batch(pos[5], 3, 0b101) is True and c2.is_acked(pos[5])
    await again.close()
    third = await open_ml(client, store)
    c3 = third.cursors["sub"]
    assert c3.acked_mask(pos[5]) == 0 and c3.is_acked(pos[5]) and c3.redelivery_count(pos[2]) == 2
    await third.close()
    await ml.close()


async def test_what_a_previous_owner_may_have_delivered_comes_flagged_as_a_redelivery():
    client, store, ml, pos, c = await filled(cursor_persist_interval_s=3600)
    assert [p for p, _ in await c.read_entries(6, 1 << 20)] == pos[:6]  # dispatched 0..5
    c.ack([pos[1]])
    assert c.delivery_count(pos[3]) == 0  # this owner's own deliveries are counted as they happen
    await c.flush()
    assert [p for p, _ in await c.read_entries(2, 1 << 20)] == pos[6:8]  # no ack since the write
    await ml.close()  # a clean hand-over: the read position goes with the cursor
    assert stored(store)["read_position"] == list(ml.next_position(pos[7]))
    ml2 = await open_ml(client, store)
    c2 = ml2.cursors["sub"]
    unacked = [p for p in pos if p != pos[1]]
    assert [c2.delivery_count(p) for p in unacked] == [1, 1, 1, 1, 1, 1, 1, 0, 0]
    assert c2.redelivery_count(pos[3]) == 0  # the dead letter count is not raised: nothing failed
    c2.add_redeliveries([pos[3]])
    assert c2.delivery_count(pos[3]) == 1 and c2.redelivery_count(pos[3]) == 1
    await ml2.close()  # handed on again before reading anything: the flags go with it
    ml2 = await open_ml(client, store)
    c2 = ml2.cursors["sub"]
    assert [c2.delivery_count(p) for p in unacked] == [1, 1, 1, 1, 1, 1, 1, 0, 0]
    # Abandoned (a crash): everything stored may have been sent, read or not.
    ml3 = await open_ml(client, store)
    c3 = ml3.cursors["sub"]
    assert [c3.delivery_count(p) for p in unacked] == [1] * 9
    fresh = await ml3.add_entry(b"after the take-over")
    assert c3.delivery_count(fresh) == 0
    new = await ml3.open_cursor("new-sub", "earliest")  # it had no owner before: nothing flagged
    assert [new.delivery_count(p) for p in pos] == [0] * 10
    c3.reset_to(pos[0])  # a replay asked for: first deliveries again
    assert [c3.delivery_count(p) for p in pos] == [0] * 10
    await ml3.close()
    await ml2.close()


async def test_a_hand_over_whose_last_cursor_write_failed_leaves_every_stored_entry_flagged():
    # The 1-hour chaos run: a broker paused past its ZooKeeper session closed its topics on
    # waking; the cursor's last write failed (session expired), the ledger's close went
    # through on the new session, and the next owner took 46 entries delivered after the
    # cursor's last write for first deliveries (unflagged duplicates).
    client, store, ml, pos, c = await filled(cursor_persist_interval_s=3600)
    assert [p for p, _ in await c.read_entries(6, 1 << 20)] == pos[:6]
    c.ack([pos[1]])
    await c.flush()
    assert [p for p, _ in await c.read_entries(4, 1 << 20)] == pos[6:]  # after the last write
    c.ack([pos[0]])
    writes = store.cursor_writes

    async def session_lost(*args, **kwargs):
        raise MetadataError("ZooKeeper write failed: SessionExpiredError")

    store.put_cursor = session_lost
    await ml.close()
    assert store.cursor_writes == writes  # nothing of the failed write was stored
    assert stored(store)["read_position"] == list(ml.next_position(pos[5]))
    assert stored_list(store)[-1]["entries"] == -1  # left open: the next owner recovers it
    del store.put_cursor
    ml2 = await open_ml(client, store)
    c2 = ml2.cursors["sub"]
    assert c2.is_acked(pos[1]) and not c2.is_acked(pos[0])  # the ack after the write is lost
    assert [c2.delivery_count(p) for p in pos if p != pos[1]] == [1] * 9
    await ml2.close()


async def test_old_documents_load_and_inconsistent_records_are_ignored():
    client, store = FakeLedgerClient(), MemoryStore()
    ml = await open_ml(client, store)
    pos = [await ml.add_entry(b"%d" % i) for i in range(6)]
    lid = pos[0].ledger_id
    await ml.close()
    store.cursors[(*NAME, "old")] = ({"mark_delete": [lid, 1], "individually_acked": [[[lid, 3], [lid, 3]]]}, 0)
    store.cursors[(*NAME, "odd")] = (
        {
            "mark_delete": [lid, 1],
            "individually_acked": [[[lid, 3], [lid, 3]]],
            # acked already (0, 3), full mask (4), empty mask (5): all ignored; 2 kept
            "batch_acks": [[lid, 0, 2, "1"], [lid, 2, 4, "a"], [lid, 3, 2, "1"], [lid, 4, 2, "3"], [lid, 5, 2, "0"]],
            "redelivery_counts": [[lid, 1, 5], [lid, 2, 0], [lid, 4, 7]],
        },
        0,
    )
    ml = await open_ml(client, store)
    old, odd = ml.cursors["old"], ml.cursors["odd"]
    assert old.mark_delete_position == pos[1] and old.acked_mask(pos[2]) == 0 and old.redelivery_count(pos[2]) == 0
    assert [odd.acked_mask(p) for p in pos] == [0, 0, 0xA, 0, 0, 0]
    assert [odd.redelivery_count(p) for p in pos] == [0, 0, 0, 0, 7, 0]
    await ml.close()
    for bad in (
        {"mark_delete": [lid, 1], "batch_acks": [[lid, 2, 4, 10]]},  # mask not hex text
        {"mark_delete": [lid, 1], "batch_acks": [[lid, 2, 4, "zz"]]},
        {"mark_delete": [lid, 1], "batch_acks": [[lid, 2, 4, "10"]]},  # bit 4 of a batch of 4
        {"mark_delete": [lid, 1], "batch_acks": [[lid, 2, 0, "0"]]},
        {"mark_delete": [lid, 1], "batch_acks": [[lid, 2, 4]]},
        {"mark_delete": [lid, 1], "redelivery_counts": [[lid, 2, -1]]},
        {"mark_delete": [lid, 1], "redelivery_counts": [[lid, 2, "3"]]},
        {"mark_delete": [lid, 1], "redelivery_counts": 5},
        {"individually_acked": []},
    ):
        with pytest.raises(MetadataError):
            CursorDocument.from_doc(bad, "cursor x")


def test_document_limits_cut_the_highest_positions_first():
    config = ManagedLedgerConfig(max_unacked_ranges_to_persist=2, max_batch_acks_to_persist=1, max_redelivery_counts_to_persist=0)
    d = CursorDocument(
        P(1, 0),
        [(P(1, 2), P(1, 3)), (P(1, 5), P(1, 5)), (P(1, 7), P(1, 8))],
        [(P(1, 4), 4, 1), (P(1, 6), 4, 2)],
        [(P(1, 4), 3)],
        {"k": "v"},
    )
    doc = json.loads(json.dumps(d.to_doc(config)))  # as stored
    assert doc == {
        "mark_delete": [1, 0],
        "individually_acked": [[[1, 2], [1, 3]], [[1, 5], [1, 5]]],
        "batch_acks": [[1, 4, 4, "1"]],
        "redelivery_counts": [],
        "properties": {"k": "v"},
    }
    back = CursorDocument.from_doc(json.loads(json.dumps(doc)), "x")
    assert back.ranges == d.ranges[:2] and back.batch_acks == d.batch_acks[:1] and back.properties == {"k": "v"}


def worst_case_document(config: ManagedLedgerConfig, batch_size: int) -> CursorDocument:
    """Every stored list full, every number as long as it gets (10-digit ZooKeeper
    sequence ledger ids, 10-digit entry ids and counts), every mask all but one bit."""
    big = 2_147_483_000
    ranges = [(P(big, big + 3 * i), P(big, big + 3 * i + 1)) for i in range(config.max_unacked_ranges_to_persist)]
    batch = [(P(big + 1, big + i), batch_size, (1 << batch_size) - 2) for i in range(config.max_batch_acks_to_persist)]
    counts = [(P(big + 2, big + i), big) for i in range(config.max_redelivery_counts_to_persist)]
    return CursorDocument(P(big, big), ranges, batch, counts, {"subscription-type": "Key_Shared"})


def test_worst_case_document_with_default_limits_fits_a_znode_with_room_to_spare(capsys):
    config = ManagedLedgerConfig()
    assert config.max_unacked_ranges_to_persist == 10_000
    doc = worst_case_document(config, batch_size=1000).to_doc(config, max_bytes=10**9)  # uncut
    size = len(encode(doc))
    with capsys.disabled():
        print(f"\nworst-case cursor document with default limits: {size:,} bytes")
    assert len(doc["individually_acked"]) == 10_000 and len(doc["batch_acks"]) == 500
    assert len(doc["redelivery_counts"]) == 5_000
    assert size < 850_000 < MAX_DOCUMENT_BYTES < 0xFFFFF  # jute.maxbuffer's default
    assert doc == worst_case_document(config, batch_size=1000).to_doc(config)  # nothing cut


def test_documents_over_the_byte_budget_are_cut_to_it():
    config = ManagedLedgerConfig(max_batch_acks_to_persist=5_000, max_redelivery_counts_to_persist=100_000)
    d = worst_case_document(config, batch_size=4000)  # masks of 1000 hex digits
    doc = d.to_doc(config)
    size = len(encode(doc))
    assert MAX_DOCUMENT_BYTES - 1100 < size <= MAX_DOCUMENT_BYTES
    assert len(doc["individually_acked"]) == 10_000  # ranges first
    assert 0 < len(doc["batch_acks"]) < 5_000  # then batch records, then counts in what is left
    assert len(doc["redelivery_counts"]) < 100
    back = CursorDocument.from_doc(json.loads(encode(doc)), "x")
    assert back.batch_acks == d.batch_acks[: len(back.batch_acks)]  # a prefix: lowest kept
    small = d.to_doc(config, max_bytes=2_000)
    assert len(encode(small)) <= 2_000 and small["individually_acked"] and not small["batch_acks"]


def test_config_checks_the_new_limits():
    for key in ("max_batch_acks_to_persist", "max_redelivery_counts_to_persist"):
        with pytest.raises(InvalidArgument, match=key):
            ManagedLedgerConfig(**{key: -1})
        assert getattr(ManagedLedgerConfig(**{key: 0}), key) == 0


# -- reset, skip, clear ----------------------------------------------------------------


async def test_reset_to_moves_the_cursor_both_ways_and_clears_everything_after():
    _, store, ml, pos, c = await filled()
    c.ack([pos[1], pos[6], pos[8]])
    c.ack_batch(pos[7], 2, 1)
    c.add_redeliveries([pos[7], pos[9]])
    c.reset_to(pos[5])
    assert c.mark_delete_position == pos[4] and c.read_position == pos[5]
    assert c.individually_acked == [] and c.acked_mask(pos[7]) == 0 and c.redelivery_count(pos[9]) == 0
    assert c.backlog() == 5 and c.is_acked(pos[1]) and not c.is_acked(pos[6])
    c.reset_to(pos[4])  # entry 0 of a ledger: mark-delete is "before it"
    assert c.mark_delete_position == P(pos[4].ledger_id, -1) and c.read_position == pos[4] and c.backlog() == 6
    c.reset_to(P(pos[0].ledger_id, 0))
    assert c.backlog() == 10 and c.read_position == pos[0]
    c.reset_to(P(pos[9].ledger_id + 50, 0))  # beyond the last entry: everything acked
    assert c.mark_delete_position == pos[9] and c.backlog() == 0 and c.read_position == ml.next_position(pos[9])
    c.reset_to((-1, -1))  # earliest
    assert c.mark_delete_position == P(pos[0].ledger_id, -1) and c.backlog() == 10
    c.reset_to(P(pos[3].ledger_id, 77))  # past a closed ledger's end: the next ledger's first
    assert c.read_position == pos[4]
    await c.persist()
    assert stored(store) == {
        "mark_delete": [pos[4].ledger_id, -1], "individually_acked": [], "properties": {}, "read_position": list(pos[4]),
    }  # fmt: skip
    for bad in ((-1, 0), (1,), "x", (1, -2)):
        with pytest.raises(InvalidArgument):
            c.reset_to(bad)  # type: ignore[arg-type]
    await ml.close()


async def test_reset_to_before_the_first_stored_entry_after_a_trim():
    _, _, ml, pos, c = await filled()
    c.ack_cumulative(pos[5])
    assert await ml.trim_consumed() == [pos[0].ledger_id]
    c.reset_to(pos[0])  # in a deleted ledger
    assert c.mark_delete_position == P(pos[4].ledger_id, -1) and c.read_position == pos[4] and c.backlog() == 6
    await ml.close()


async def test_reset_to_is_written_by_the_debounced_writer():
    _, store, ml, pos, c = await filled(cursor_persist_interval_s=0.01)
    c.reset_to(pos[3])
    await asyncio.sleep(0.1)
    assert stored(store)["mark_delete"] == list(pos[2])
    await ml.close()


async def test_skip_entries_acks_the_next_unacked_entries_across_ledgers():
    _, _, ml, pos, c = await filled()
    c.ack([pos[1], pos[2], pos[5]])
    c.ack_batch(pos[3], 2, 1)
    c.add_redeliveries([pos[4], pos[9]])
    assert c.skip_entries(0) == 0
    assert c.skip_entries(3) == 3  # 0, 3, 4
    assert c.mark_delete_position == pos[5] and c.acked_mask(pos[3]) == 0 and c.redelivery_count(pos[4]) == 0
    c.ack([pos[8]])
    assert c.skip_entries(2) == 2  # 6, 7 (4 and 5 acked already)
    assert c.mark_delete_position == pos[8] and c.backlog() == 1
    assert c.skip_entries(100) == 1 and c.mark_delete_position == pos[9] and c.redelivery_count(pos[9]) == 0
    assert c.skip_entries(5) == 0
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(InvalidArgument):
            c.skip_entries(bad)  # type: ignore[arg-type]
    await ml.close()


async def test_skip_a_run_spanning_ledgers_and_skip_between_ranges():
    _, _, ml, pos, c = await filled(12)
    c.ack([pos[9]])
    assert c.skip_entries(7) == 7  # 0..6 across the 4:0 ledger boundary
    assert c.mark_delete_position == pos[6] and c.individually_acked == [(pos[9], pos[9])]
    assert c.skip_entries(3) == 3  # 7, 8, (9 acked), 10
    assert c.mark_delete_position == pos[10] and c.backlog() == 1
    await ml.close()


async def test_clear_backlog_acks_everything_stored():
    _, _, ml, pos, c = await filled()
    c.ack([pos[2], pos[3]])
    c.ack_batch(pos[6], 2, 1)
    c.add_redeliveries([pos[7]])
    assert c.clear_backlog() == 8
    assert c.mark_delete_position == pos[9] and c.backlog() == 0 and c.individually_acked == []
    assert c.acked_mask(pos[6]) == 0 and c.redelivery_count(pos[7]) == 0
    assert c.clear_backlog() == 0
    p = await ml.add_entry(b"more")
    assert c.backlog() == 1 and c.read_position == p
    assert c.clear_backlog() == 1 and c.mark_delete_position == p
    await ml.close()
