"""Positions, the ledger layout, range sets, the entry cache and the config (pure logic)."""

from __future__ import annotations

import random

import pytest

from magnetar.common.errors import InvalidArgument, MetadataError
from magnetar.managedledger.cache import EntryCache
from magnetar.managedledger.config import ManagedLedgerConfig
from magnetar.managedledger.layout import LedgerInfo, LedgerList
from magnetar.managedledger.position import ManagedLedgerName, Position
from magnetar.managedledger.rangeset import RangeSet

P = Position


def layout() -> LedgerList:
    # ledger 3: 5 entries; ledger 5: empty (closed); ledger 7: 3 entries; ledger 9: open, 2 confirmed
    return LedgerList(
        [LedgerInfo(3, 5, 50, 0), LedgerInfo(5, 0, 0, 0), LedgerInfo(7, 3, 30, 0), LedgerInfo(9, 2, 20, 0)],
        open_ledger_id=9,
    )


def test_positions_order_like_the_log_and_parse_strictly():
    assert P(3, 4) < P(7, 0) < P(7, 1)
    assert P(3, -1) < P(3, 0)
    assert Position.of([7, 2]) == P(7, 2) and Position.of((7, -1)) == P(7, -1)
    assert str(P(7, 2)) == "7:2" and P(7, 2).to_json() == [7, 2]
    for bad in ([1], [1, 2, 3], ["1", 2], [-1, 0], [1, -2], None, [True, 1]):
        with pytest.raises(InvalidArgument):
            Position.of(bad)  # type: ignore[arg-type]
    assert str(ManagedLedgerName("t", "ns", "x")) == "persistent://t/ns/x"


def test_next_position_crosses_ledgers_and_skips_empty_ones():
    ll = layout()
    assert ll.next_position(P(3, 0)) == P(3, 1)
    assert ll.next_position(P(3, 4)) == P(7, 0)  # ledger 5 is empty
    assert ll.next_position(P(3, -1)) == P(3, 0)
    assert ll.next_position(P(5, -1)) == P(7, 0)
    assert ll.next_position(P(7, 2)) == P(9, 0)
    assert ll.next_position(P(9, 1)) == P(9, 2)  # the open ledger grows
    assert ll.next_position(P(9, 7)) == P(9, 8)
    assert ll.next_position(P(1, 0)) == P(3, 0)  # before the first (trimmed) ledger
    assert ll.next_position(P(4, 10)) == P(7, 0)  # a ledger no longer in the list
    closed = LedgerList([LedgerInfo(3, 5, 50, 0)])
    assert closed.next_position(P(3, 4)) == P(3, 5)  # past the end of a closed list


def test_normalize_first_last_contains_and_count():
    ll = layout()
    assert ll.normalize(P(3, 5)) == P(7, 0)
    assert ll.normalize(P(3, 2)) == P(3, 2)
    assert ll.normalize(P(5, 0)) == P(7, 0)
    assert ll.first_position() == P(3, 0)
    assert ll.last_confirmed() == P(9, 1)
    assert ll.contains(P(9, 1)) and not ll.contains(P(9, 2)) and not ll.contains(P(5, 0)) and not ll.contains(P(3, -1))
    assert ll.count(P(3, 0), P(9, 1)) == 10 == ll.number_of_entries
    assert ll.count(P(3, 3), P(7, 0)) == 3
    assert ll.count(P(7, 0), P(3, 3)) == 0
    assert ll.count(P(3, -1), P(3, 10)) == 5
    assert ll.total_size == 100
    empty = LedgerList([LedgerInfo(11, 0, 0, 0)], open_ledger_id=11)
    assert empty.last_confirmed() == P(11, -1) and empty.first_position() == P(11, 0)


def test_stored_form_marks_the_open_ledger_and_rejects_garbage():
    docs = layout().to_docs()
    assert docs[-1] == {"ledger_id": 9, "entries": -1, "size": 20, "created_ms": 0}
    assert docs[0]["entries"] == 5
    assert LedgerInfo.from_dict(docs[0]) == LedgerInfo(3, 5, 50, 0)
    # The latest delivery time of delayed messages: stored only when set; older
    # documents (without it) read as "no delayed messages".
    assert "max_deliver_at_ms" not in docs[0]
    delayed = LedgerInfo(3, 5, 50, 0, max_deliver_at_ms=123)
    assert delayed.to_dict()["max_deliver_at_ms"] == 123 and LedgerInfo.from_dict(delayed.to_dict()) == delayed
    with pytest.raises(MetadataError):
        LedgerInfo.from_dict({**delayed.to_dict(), "max_deliver_at_ms": "123"})
    for bad in ({"ledger_id": 1}, {"ledger_id": "1", "entries": 1, "size": 1, "created_ms": 1}, None):
        with pytest.raises(MetadataError):
            LedgerInfo.from_dict(bad)
    with pytest.raises(MetadataError):
        layout().append(LedgerInfo(8, 0, 0, 0))


def test_rangeset_merges_adjacent_ranges_across_ledger_boundaries():
    ll = layout()
    rs = RangeSet(ll.next_position)
    assert rs.add(P(3, 1)) and rs.add(P(3, 3))
    assert rs.ranges() == [(P(3, 1), P(3, 1)), (P(3, 3), P(3, 3))]
    assert rs.ranges(1) == [(P(3, 1), P(3, 1))] and rs.ranges(5) == rs.ranges()
    assert not rs.add(P(3, 3))
    rs.add(P(3, 2))
    assert rs.ranges() == [(P(3, 1), P(3, 3))]
    rs.add(P(7, 0))  # not adjacent yet: (3,4) is missing
    rs.add(P(3, 4))  # (3,4) -> (7,0) across the empty ledger 5
    assert rs.ranges() == [(P(3, 1), P(7, 0))]
    assert P(3, 4) in rs and P(3, 0) not in rs and P(7, 1) not in rs
    assert rs.count(ll.count) == 5
    rs.add_range(P(9, 0), P(9, 1))
    rs.add_range(P(7, 1), P(7, 2))  # bridges everything
    assert rs.ranges() == [(P(3, 1), P(9, 1))]
    rs.remove_through(P(3, 2))
    assert rs.first() == (P(3, 3), P(9, 1))
    rs.remove_through(P(9, 1))
    assert len(rs) == 0 and rs.first() is None


def test_rangeset_matches_a_plain_set_under_random_adds():
    rng = random.Random(3)
    ll = LedgerList([LedgerInfo(1, 40, 0, 0), LedgerInfo(2, 0, 0, 0), LedgerInfo(4, 30, 0, 0)], open_ledger_id=4)
    universe = [P(1, e) for e in range(40)] + [P(4, e) for e in range(30)]
    for _ in range(20):
        rs = RangeSet(ll.next_position)
        chosen: set[Position] = set()
        for p in rng.sample(universe, rng.randint(1, 60)):
            rs.add(p)
            chosen.add(p)
        assert {p for p in universe if p in rs} == chosen
        assert rs.count(ll.count) == len(chosen)
        ranges = rs.ranges()
        for (_, a_last), (b_first, _) in zip(ranges, ranges[1:], strict=False):
            assert ll.next_position(a_last) < b_first  # disjoint and not touching
        cut = rng.choice(universe)
        rs.remove_through(cut)
        assert {p for p in universe if p in rs} == {p for p in chosen if p > cut}


def test_entry_cache_keeps_the_newest_entries_within_its_budget():
    cache = EntryCache(100)
    for e in range(30):
        cache.put(P(1, e), b"x" * 10)
    assert cache.size == 100 and len(cache) == 10
    assert cache.get(P(1, 19)) is None and cache.get(P(1, 20)) == b"x" * 10
    assert (cache.hits, cache.misses) == (1, 1)
    cache.put(P(2, 0), b"y" * 500)  # larger than the whole budget: not cached
    assert cache.get(P(2, 0)) is None
    cache.drop_ledgers({1})
    assert cache.size == 0 and len(cache) == 0
    off = EntryCache(0)
    off.put(P(1, 0), b"z")
    assert off.get(P(1, 0)) is None


@pytest.mark.parametrize(
    "settings",
    [
        {"max_entries_per_ledger": -1},
        {"max_entries_per_ledger": 0},
        {"max_size_per_ledger": 0},
        {"max_ledger_age_s": 0},
        {"cache_max_bytes": -1},
        {"ensemble_size": 2, "write_quorum": 3},
        {"ack_quorum": 0},
        {"cursor_persist_interval_s": -1},
    ],
)
def test_config_rejects_bad_values(settings):
    with pytest.raises(InvalidArgument):
        ManagedLedgerConfig(**settings)


def test_config_defaults():
    c = ManagedLedgerConfig()
    assert (c.ensemble_size, c.write_quorum, c.ack_quorum) == (2, 2, 2)
    assert c.max_entries_per_ledger == 50_000 and c.max_size_per_ledger == 512 * 1024 * 1024
    assert c.max_ledger_age_s == 4 * 3600 and c.cache_max_bytes == 64 * 1024 * 1024
    assert c.cursor_persist_interval_s == 1.0
