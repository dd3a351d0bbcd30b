"""Topic admin without a network: peeking and examining messages (counting messages of
batches, leaving out what a cursor acknowledged), expiry's ack-before, the internal
stats of a managed ledger, and rate meters."""

from __future__ import annotations

import asyncio

import pytest
from test_managed_ledger_core import FakeLedgerClient, MemoryStore, open_ml

from magnetar.broker.entry import Entry, Message, decode_entry, encode_entry
from magnetar.broker.peek import decode, examine, peek, select
from magnetar.broker.rates import Meter, RateSampler
from magnetar.common.errors import InvalidArgument, PreconditionFailed
from magnetar.managedledger.ledger import ManagedLedger
from magnetar.managedledger.position import Position as P
from magnetar.managedledger.stats import deleted_ranges, estimated_size, figures


def stored(*payloads: bytes, batched: bool = True, producer: str = "p") -> bytes:
    return encode_entry(producer, 0, 1000, batched, [Message(payload=x, sequence_id=i) for i, x in enumerate(payloads)])


def batch(*payloads: bytes, batched: bool = True, producer: str = "p") -> Entry:
    return decode_entry(stored(*payloads, batched=batched, producer=producer))


def test_select_counts_messages_leaving_out_masked_ones():
    entries = [(P(1, 0), batch(b"a", b"b", b"c"), 0b010), (P(1, 1), batch(b"d", batched=False), 0), (P(1, 2), batch(b"e", b"f"), 0)]
    picked = [select(entries, n)[0] for n in range(1, 6)]
    assert [(p.position, p.message.payload) for p in picked if p] == [
        (P(1, 0), b"a"), (P(1, 0), b"c"), (P(1, 1), b"d"), (P(1, 2), b"e"), (P(1, 2), b"f"),
    ]
    assert [p.batch_index for p in picked if p] == [0, 2, -1, 0, 1]  # unbatched: -1
    assert select(entries, 6) == (None, 1)  # one more to count in later entries
    back = [select(list(reversed(entries)), n, backwards=True)[0] for n in (1, 2, 5)]
    assert [p.message.payload for p in back if p] == [b"f", b"e", b"a"]


def test_an_entry_that_is_no_batch_counts_as_one_message():
    assert decode(b"\xff\xff garbage").messages[0].payload == b"\xff\xff garbage"
    assert decode(stored(b"x")).messages[0].payload == b"x"


def wire_entry(e: Entry) -> bytes:
    return encode_entry(e.producer_name, e.sequence_id, e.publish_time_ms, e.batched, e.messages)


async def _filled(entries: list[Entry], **settings: object) -> tuple[ManagedLedger, list[P]]:
    ml = await open_ml(FakeLedgerClient(), MemoryStore(), **settings)
    positions = [await ml.add_entry(wire_entry(b)) for b in entries]
    return ml, positions


async def test_peek_skips_acked_entries_and_acked_messages_of_batches():
    ml, pos = await _filled([batch(b"a", b"b"), batch(b"c", batched=False), batch(b"d", b"e", b"f"), batch(b"g")],
                            max_entries_per_ledger=2)
    c = await ml.open_cursor("sub", "earliest")
    assert (await peek(ml, c, 1)).message.payload == b"a"
    c.ack([pos[1]])  # all of "c"
    c.ack_batch(pos[2], 3, 0b001)  # "d"
    got = [await peek(ml, c, n) for n in range(1, 6)]
    assert [g.message.payload for g in got if g] == [b"a", b"b", b"e", b"f", b"g"]
    assert got[2].position == pos[2] and got[2].batch_index == 1
    assert await peek(ml, c, 6) is None
    c.ack([pos[0]])  # mark-delete moves past "c": peek starts after it
    assert (await peek(ml, c, 1)).message.payload == b"e"
    assert c.backlog() == 2  # peeking changed nothing
    with pytest.raises(InvalidArgument):
        await peek(ml, c, 0)
    await ml.close()


async def test_examine_from_either_end_across_ledgers_clamped_at_the_other_end():
    entries = [batch(b"%d" % i) for i in range(250)] + [batch(b"x", b"y")]
    ml, _ = await _filled(entries, max_entries_per_ledger=60)
    c = await ml.open_cursor("sub", "latest")  # acknowledges everything: examine ignores it
    assert (await examine(ml, "earliest", 1)).message.payload == b"0"
    assert (await examine(ml, "earliest", 200)).message.payload == b"199"
    assert (await examine(ml, "earliest", 10_000)).message.payload == b"y"  # past the end: the last
    assert (await examine(ml, "latest", 1)).message.payload == b"y"
    assert (await examine(ml, "latest", 2)).message.payload == b"x"
    assert (await examine(ml, "latest", 3)).message.payload == b"249"
    assert (await examine(ml, "latest", 150)).message.payload == b"102"
    assert (await examine(ml, "latest", 10_000)).message.payload == b"0"  # past the start: the first
    assert c.backlog() == 0
    await ml.close()
    empty, _ = await _filled([])
    with pytest.raises(PreconditionFailed, match="no messages"):
        await examine(empty, "latest", 1)
    await empty.close()


async def test_ack_before_acknowledges_only_what_precedes_the_position():
    ml, pos = await _filled([batch(b"%d" % i) for i in range(8)], max_entries_per_ledger=3)
    c = await ml.open_cursor("sub", "earliest")
    c.ack([pos[5]])
    assert c.ack_before(pos[0]) == 0 and c.backlog() == 7
    assert c.ack_before(pos[4]) == 4  # entries 0-3
    assert c.mark_delete_position == pos[3] and c.individually_acked == [(pos[5], pos[5])]
    assert c.ack_before(pos[2]) == 0  # behind the mark-delete position: nothing
    assert c.ack_before(P(pos[7].ledger_id, pos[7].entry_id + 1)) == 3  # past the end: all
    assert c.backlog() == 0 and c.mark_delete_position == pos[7]
    await ml.close()


async def test_internal_figures_of_ledgers_and_cursors():
    ml, pos = await _filled([batch(b"%d" % i) for i in range(7)], max_entries_per_ledger=3)
    await asyncio.sleep(0.01)
    c = await ml.open_cursor("sub", "earliest")
    c.ack([pos[0], pos[2], pos[3], pos[5]])
    f = figures(ml)
    assert f.entries_added == 7 and f.number_of_entries == 7 and f.last_confirmed_entry == pos[6]
    assert f.state == "LedgerOpened" and f.pending_adds == 0
    assert [(i.ledger_id, i.entries) for i in f.ledgers][:3] == [(pos[0].ledger_id, 3), (pos[3].ledger_id, 3), (pos[6].ledger_id, 1)]
    assert f.total_size == sum(i.size for i in f.ledgers)
    (cf,) = f.cursors
    assert cf.mark_delete_position == pos[0] and cf.deleted_ranges == 2
    assert cf.individually_deleted_messages == f"[({P(pos[2].ledger_id, 1)}..{pos[3]}], ({P(pos[5].ledger_id, 1)}..{pos[5]}]]"
    assert cf.messages_consumed == 7 - c.backlog() == 4
    assert cf.entries_since_first_not_acked == 0  # nothing read yet
    await c.read_entries(3, 1 << 20)  # 1, 2 (acked) and 3
    assert c.read_position == pos[4] and figures(ml).cursors[0].entries_since_first_not_acked == 3
    await ml.close()
    assert figures(ml).state == "Closed"


def test_deleted_ranges_and_estimated_sizes():
    from magnetar.managedledger.layout import LedgerInfo, LedgerList

    layout = LedgerList([LedgerInfo(1, 4, 400, 0), LedgerInfo(2, 2, 100, 0)])
    assert deleted_ranges([], layout) == "[]"
    assert deleted_ranges([(P(1, 2), P(1, 3)), (P(2, 0), P(2, 0))], layout) == "[(1:1..1:3], (2:-1..2:0]]"
    assert estimated_size(layout, P(1, 2), P(2, 1)) == 2 * 100 + 100
    assert estimated_size(layout, P(2, 1), P(2, 1)) == 50
    assert estimated_size(layout, P(2, 1), P(1, 0)) == 0


def test_meters_report_the_rates_of_the_last_interval():
    m = Meter()
    m.add(10, 1000)
    m.sample(100.0)
    assert (m.msg_rate, m.byte_rate) == (0.0, 0.0)  # one sample: no interval yet
    m.add(20, 4000)
    m.sample(102.0)
    assert (m.msg_rate, m.byte_rate, m.messages, m.bytes) == (10.0, 2000.0, 30, 5000)
    m.sample(104.0)
    assert m.msg_rate == 0.0
    late = Meter()  # created during the sampler's round from 104 on: counts from there
    late.add(6, 60)
    late.sample(106.0, previous=104.0)
    assert (late.msg_rate, late.byte_rate) == (3.0, 30.0)


async def test_the_sampler_samples_every_topic_until_closed():
    meter = Meter()

    class Topic:
        def meters(self) -> list[Meter]:
            return [meter]

    now = [0.0]
    sampler = RateSampler({"t": Topic()}, 0.01, clock=lambda: now[0])
    sampler.start()
    await asyncio.sleep(0.02)
    meter.add(5, 50)
    now[0] = 1.0
    for _ in range(100):
        await asyncio.sleep(0.01)
        if meter.msg_rate:
            break
    assert meter.msg_rate == 5.0
    await sampler.close()
