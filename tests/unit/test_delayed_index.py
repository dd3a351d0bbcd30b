"""The delayed-delivery index with bounded memory: near entries in a heap, later ones
spilled to per-bucket files and read back as their time comes (an injected clock)."""

from __future__ import annotations

import random

import pytest

from magnetar.broker.dispatch.delaybuckets import (
    LOCK_FILE,
    DelayBuckets,
    SpillArea,
    collect_orphaned_spill_areas,
    decode,
    encode,
    read_detached,
)
from magnetar.broker.dispatch.delayed import DelayedIndex, PositionBits
from magnetar.managedledger.position import Position

pytestmark = pytest.mark.asyncio


def make_index(tmp_path, now, bucket_ms=1000, **kw) -> DelayedIndex:
    return DelayedIndex(clock_ms=lambda: now[0], bucket_ms=bucket_ms, spill_dir=str(tmp_path), **kw)


def spill_files(tmp_path) -> list:
    return sorted(p for p in tmp_path.rglob("*.bin"))


def index_dirs(tmp_path) -> list:
    """What the indexes left under the root: all but this process's (kept) area and its lock."""
    area = SpillArea.of(str(tmp_path)).directory
    return sorted(p for p in tmp_path.rglob("*") if p != area and p.name != LOCK_FILE)


@pytest.fixture(autouse=True)
def _release_spill_areas(tmp_path):
    yield
    SpillArea.of(str(tmp_path)).close()


async def test_record_format_round_trips_and_ignores_a_torn_tail():
    a = encode(5, Position(1, 2), b"abc")
    b = encode(2**40, Position(7, 0), None)
    assert len(a) == 28 + 3 and a[:8] == (5).to_bytes(8, "little")
    assert list(decode(a + b)) == [(5, Position(1, 2), b"abc"), (2**40, Position(7, 0), None)]
    assert list(decode(a + b[:-1])) == [(5, Position(1, 2), b"abc")]
    assert list(decode(a + encode(1, Position(0, 0), b"xyz")[:-2])) == [(5, Position(1, 2), b"abc")]
    assert list(decode(b"")) == []


async def test_position_bits_hold_each_position_once():
    bits = PositionBits()
    assert bits.add(Position(3, 70_000)) and not bits.add(Position(3, 70_000))
    assert bits.add(Position(3, 0)) and bits.add(Position(4, 0))
    assert Position(3, 70_000) in bits and Position(3, 70_001) not in bits and (9, 9) not in bits
    assert "x" not in bits and len(bits) == 3
    bits.discard(Position(3, 70_000))
    bits.discard(Position(3, 70_000))
    assert Position(3, 70_000) not in bits and len(bits) == 2


async def test_far_entries_spill_to_files_and_come_back_in_time_order(tmp_path):
    now = [10_000.0]
    index = make_index(tmp_path, now, bucket_ms=1000, spill_flush_bytes=4096)
    rng = random.Random(7)
    dues = {Position(1, i): 10_000 + rng.randrange(1, 60_000) for i in range(20_000)}
    for p, due in dues.items():
        index.add(p, due, b"d%d" % p.entry_id)
    assert len(index) == 20_000
    # Only the current and the next bucket (due before 12,000) are in memory.
    in_memory = sum(1 for d in dues.values() if d < 12_000)
    assert index.spilled == 20_000 - in_memory
    assert spill_files(tmp_path), "the buffers were written out"
    assert index.next_due_ms() == min(dues.values())
    out = []
    while now[0] < 71_000:
        await index.refill()
        due = index.pop_due_entries()
        for p, data in due:
            assert dues[p] <= now[0], "never early"
            assert data == b"d%d" % p.entry_id
        out.extend(p for p, _ in due)
        assert len(index) == 20_000 - len(out)
        # Memory holds at most ~2 buckets' worth of entries ahead of the clock.
        assert len(index) - index.spilled <= sum(1 for d in dues.values() if now[0] - 250 < d < now[0] + 2000)
        now[0] += 250
    assert out == sorted(dues, key=lambda p: (dues[p], p))
    assert len(index) == 0 and index.spilled == 0 and index.next_due_ms() is None
    assert spill_files(tmp_path) == []


async def test_next_wakeup_is_one_bucket_before_a_spilled_bucket(tmp_path):
    now = [0.0]
    index = make_index(tmp_path, now, bucket_ms=1000)
    index.add(Position(1, 1), 5_500)
    assert index.spilled == 1
    assert index.next_due_ms() == 5_500
    assert index.next_wakeup_ms() == 4_000  # read back while bucket 4 is current
    now[0] = 4_000
    await index.refill()
    assert index.spilled == 0 and index.next_wakeup_ms() == 5_500
    index.add(Position(1, 2), 5_200)  # below the horizon now: straight to memory
    assert index.spilled == 0 and index.next_due_ms() == 5_200


async def test_pop_without_refill_still_hands_out_late_spilled_entries_in_order(tmp_path):
    now = [0.0]
    index = make_index(tmp_path, now, bucket_ms=1000)
    index.add(Position(1, 3), 9_000)
    index.add(Position(1, 1), 1_500)
    index.add(Position(1, 2), 8_000)
    now[0] = 10_000
    assert index.pop_due() == [Position(1, 1), Position(1, 2), Position(1, 3)]


async def test_duplicates_are_kept_once_in_memory_and_on_disk(tmp_path):
    now = [0.0]
    index = make_index(tmp_path, now, bucket_ms=1000)
    index.add(Position(2, 1), 500)
    index.add(Position(2, 1), 700)
    index.add(Position(2, 2), 50_000)
    index.add(Position(2, 2), 50_000)
    index.add(Position(2, 2), 1_000)  # already spilled: the first time wins
    assert len(index) == 2 and Position(2, 2) in index and Position(2, 1) in index
    assert Position(2, 3) not in index
    now[0] = 60_000
    await index.refill()
    assert index.pop_due() == [Position(2, 1), Position(2, 2)]
    assert Position(2, 2) not in index and len(index) == 0


async def test_clear_forgets_everything_and_deletes_the_files(tmp_path):
    now = [0.0]
    index = make_index(tmp_path, now, bucket_ms=100, spill_flush_bytes=256)
    for i in range(10_000):
        index.add(Position(1, i), 1_000 + i)
    assert spill_files(tmp_path)
    index.clear()
    assert len(index) == 0 and index.spilled == 0 and index.next_due_ms() is None and index.next_wakeup_ms() is None
    assert Position(1, 5) not in index
    assert index_dirs(tmp_path) == []
    index.add(Position(1, 5), 50)  # usable again
    now[0] = 50
    assert index.pop_due() == [Position(1, 5)]
    index.add(Position(1, 6), 90_000)
    index.close()
    assert index_dirs(tmp_path) == []


async def test_a_refill_in_flight_is_dropped_by_clear(tmp_path, monkeypatch):
    now = [0.0]
    index = make_index(tmp_path, now, bucket_ms=100, spill_flush_bytes=256)
    for i in range(5_000):
        index.add(Position(1, i), 10_000 + i)
    now[0] = 20_000
    import magnetar.broker.dispatch.delayed as delayed

    async def to_thread(fn, *args):
        index.clear()  # a cursor reset while the files are read
        return fn(*args)

    monkeypatch.setattr(delayed.asyncio, "to_thread", to_thread)
    await index.refill()
    assert len(index) == 0 and index.pop_due() == []


async def test_large_entries_keep_only_their_position(tmp_path):
    now = [0.0]
    index = make_index(tmp_path, now, bucket_ms=1000, inline_max_bytes=4)
    index.add(Position(1, 1), 100, b"small")
    index.add(Position(1, 2), 200, b"tiny")
    index.add(Position(1, 3), 50_000, b"big" * 10)
    now[0] = 60_000
    await index.refill()
    assert index.pop_due_entries() == [(Position(1, 1), None), (Position(1, 2), b"tiny"), (Position(1, 3), None)]


async def test_buckets_write_out_when_all_buffers_together_are_large(tmp_path):
    buckets = DelayBuckets(1000, str(tmp_path), flush_bytes=1 << 30, max_buffered_bytes=1000)
    for i in range(40):  # 40 records of 28 bytes over 40 buckets: one write-out at 1,000 bytes
        buckets.add(i * 1000, Position(1, i), None)
    assert len(spill_files(tmp_path)) == 36
    parts = buckets.detach_before(100)
    assert [r[1] for r in read_detached(parts)] == [Position(1, i) for i in range(40)]
    assert spill_files(tmp_path) == [] and buckets.count == 0
    buckets.clear()
    assert index_dirs(tmp_path) == []


_CRASHING_BROKER = """
import os, signal, sys
from magnetar.broker.dispatch.delaybuckets import DelayBuckets
from magnetar.managedledger.position import Position
buckets = DelayBuckets(1000, sys.argv[1], flush_bytes=1)
for i in range(5):
    buckets.add(i * 1000, Position(1, i), b"x")
print(buckets.directory, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


async def test_spill_areas_of_crashed_brokers_are_collected_and_live_ones_kept(tmp_path):
    import subprocess
    import sys

    crashed = subprocess.run(
        [sys.executable, "-c", _CRASHING_BROKER, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert crashed.returncode == -9, crashed.stderr
    from pathlib import Path

    dead_index = Path(crashed.stdout.strip())
    assert sorted(p.name for p in dead_index.iterdir()) == [f"{i}.bin" for i in range(5)]
    dead_area = dead_index.parent

    live = DelayBuckets(1000, str(tmp_path), flush_bytes=1)  # this process: a live broker
    live.add(5_000, Position(2, 0), b"y")
    live_files = spill_files(live.directory)
    assert live_files and live.directory.parent != dead_area
    not_an_area = tmp_path / "magnetar-delayed-old"  # no lock file: another layout, left alone
    not_an_area.mkdir()

    assert collect_orphaned_spill_areas(str(tmp_path)) == [dead_area]
    assert not dead_area.exists()
    assert spill_files(live.directory) == live_files and not_an_area.is_dir()
    assert [r[1] for r in read_detached(live.detach_before(100))] == [Position(2, 0)]
    assert collect_orphaned_spill_areas(str(tmp_path)) == []  # nothing more to collect
    live.clear()


async def test_a_cleared_index_deletes_its_directory_but_not_others(tmp_path):
    a = DelayBuckets(1000, str(tmp_path), flush_bytes=1)
    b = DelayBuckets(1000, str(tmp_path), flush_bytes=1)
    a.add(1_000, Position(1, 0), None)
    b.add(1_000, Position(2, 0), None)
    a_dir, b_dir = a.directory, b.directory
    assert a_dir != b_dir and a_dir.parent == b_dir.parent
    a.clear()  # a subscription closed or deleted
    assert not a_dir.exists() and spill_files(b_dir)
    b.clear()
    assert index_dirs(tmp_path) == []
