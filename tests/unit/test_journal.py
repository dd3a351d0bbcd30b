import asyncio
import os

import pytest

from magnetar.bookie.journal import Journal, journal_files, replay
from magnetar.bookie.lastmark import START, JournalPosition, LastLogMark
from magnetar.bookie.record import encode_add
from magnetar.common.errors import PreconditionFailed


async def write_journal(directory, n, size=100, per_batch=7, max_file=1 << 30, max_group=1 << 20):
    # A file rolls between groups, so small files need small groups.
    j = Journal(directory, max_file, max(4096, min(max_group, max_file // 2)))
    j.start(asyncio.get_running_loop())
    futs = []
    for first in range(0, n, per_batch):
        batch = [encode_add(5, e, e - 1, str(e).encode() * (size // len(str(e)))) for e in range(first, min(n, first + per_batch))]
        futs.append(j.append(batch))
    await asyncio.gather(*futs)
    await j.close()
    return j


def entry_ids(directory, start=START):
    return [rec.entry_id for _, rec in replay(directory, start)]


async def test_group_commit_covers_many_adds_per_fsync(tmp_path):
    j = await write_journal(tmp_path, 2000, per_batch=1)
    assert j.records == 2000
    assert j.fsyncs < 2000  # adds that arrive during an fsync share the next one
    assert entry_ids(tmp_path) == list(range(2000))


async def test_files_roll_by_size_and_replay_in_order(tmp_path):
    await write_journal(tmp_path, 500, size=200, max_file=10_000)
    assert len(journal_files(tmp_path)) > 5
    assert entry_ids(tmp_path) == list(range(500))


async def test_replay_starts_at_the_mark(tmp_path):
    await write_journal(tmp_path, 100)
    positions = [pos for pos, _ in replay(tmp_path, START)]
    mark = positions[41]  # just past entry 41
    assert entry_ids(tmp_path, mark) == list(range(42, 100))


async def test_truncated_tail_is_cut_at_last_good_record(tmp_path):
    await write_journal(tmp_path, 300)
    [(_, path)] = journal_files(tmp_path)
    size = path.stat().st_size
    good_end = [pos.offset for pos, _ in replay(tmp_path, START)]
    with open(path, "r+b") as fh:
        fh.truncate(size - 37)  # tear the last record
    assert entry_ids(tmp_path) == list(range(299))
    assert path.stat().st_size == good_end[298]  # the torn bytes are gone for good
    assert entry_ids(tmp_path) == list(range(299))


async def test_bit_flip_in_tail_truncates_there_and_keeps_everything_before(tmp_path):
    await write_journal(tmp_path, 300)
    [(_, path)] = journal_files(tmp_path)
    ends = [pos.offset for pos, _ in replay(tmp_path, START)]
    data = bytearray(path.read_bytes())
    data[ends[249] + 40] ^= 0x01  # inside record 250
    path.write_bytes(bytes(data))
    assert entry_ids(tmp_path) == list(range(250))
    assert path.stat().st_size == ends[249]


async def test_garbage_appended_after_last_record_is_dropped(tmp_path):
    await write_journal(tmp_path, 50)
    [(_, path)] = journal_files(tmp_path)
    with open(path, "ab") as fh:
        fh.write(os.urandom(100))
    assert entry_ids(tmp_path) == list(range(50))


async def test_corruption_in_one_file_keeps_later_files(tmp_path):
    await write_journal(tmp_path, 200, size=200, max_file=8_000)
    files = journal_files(tmp_path)
    assert len(files) >= 3
    first = files[0][1]
    with open(first, "r+b") as fh:
        fh.truncate(first.stat().st_size - 5)
    ids = entry_ids(tmp_path)
    assert ids == sorted(ids) and ids[-1] == 199  # later files still replay


async def test_a_new_file_is_started_after_reopen(tmp_path):
    await write_journal(tmp_path, 10)
    await write_journal(tmp_path, 10)
    assert [fid for fid, _ in journal_files(tmp_path)] == [1, 2]


async def test_remove_before_mark(tmp_path):
    j = await write_journal(tmp_path, 200, size=200, max_file=8_000)
    ids = [fid for fid, _ in journal_files(tmp_path)]
    j.remove_before(JournalPosition(ids[2], 0))
    assert [fid for fid, _ in journal_files(tmp_path)] == ids[2:]


async def test_closed_journal_fails_appends(tmp_path):
    j = await write_journal(tmp_path, 1)
    with pytest.raises(Exception, match="closed"):
        await j.append([encode_add(1, 1, 0, b"")])


def test_lastmark_is_atomic_and_never_moves_backwards(tmp_path):
    mark = LastLogMark(tmp_path / "lastmark")
    assert mark.position == START
    assert mark.advance(JournalPosition(3, 100))
    assert not mark.advance(JournalPosition(3, 50))
    assert not mark.advance(JournalPosition(2, 999))
    assert LastLogMark(tmp_path / "lastmark").position == JournalPosition(3, 100)
    assert not (tmp_path / "lastmark.tmp").exists()


def test_damaged_lastmark_is_reported(tmp_path):
    mark = LastLogMark(tmp_path / "lastmark")
    mark.advance(JournalPosition(1, 1))
    data = bytearray((tmp_path / "lastmark").read_bytes())
    data[6] ^= 1
    (tmp_path / "lastmark").write_bytes(bytes(data))
    with pytest.raises(PreconditionFailed, match="damaged .*delete it"):
        LastLogMark(tmp_path / "lastmark")
