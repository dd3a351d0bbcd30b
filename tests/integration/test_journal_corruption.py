"""A torn or bit-flipped journal tail on a real bookie's disk: on restart the bookie
truncates at the last good record and keeps everything before it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from magnetar.bookie.journal import journal_files
from magnetar.bookie.record import HEADER_SIZE
from magnetar.testing.shell import parse_readledger
from magnetar.testing.shell import warm_magnetar as magnetar
from magnetar.tools.shell import numbered_payload

pytestmark = pytest.mark.integration

ENTRIES, SIZE = 300, 200
RECORD = HEADER_SIZE + SIZE


def write_then_crash(bookie) -> Path:
    result = magnetar("shell", "bookie-write", "--bookie", bookie.address, "--ledger", "1",
                      "--entries", str(ENTRIES), "--size", str(SIZE))  # fmt: skip
    assert result.stdout.splitlines()[-1] == f"acked {ENTRIES - 1}"
    bookie.kill()  # the write cache was never flushed: the entries live only in the journal
    files = [p for _, p in journal_files(Path(bookie.data_dir) / "journal")]
    assert files[-1].stat().st_size == ENTRIES * RECORD
    return files[-1]


def stored(bookie) -> dict[int, tuple[int, str]]:
    result = magnetar("shell", "readledger", "--ledger", "1", "--bookie", bookie.address)
    assert result.returncode == 0, result.stderr
    return parse_readledger(result.stdout)


def expected(n: int) -> dict[int, tuple[int, str]]:
    return {e: (SIZE, numbered_payload(e, SIZE)[:20].decode()) for e in range(n)}


DAMAGES = ("truncate", "bitflip", "garbage")


def damage_and_replay(bookie, damage: str) -> None:
    journal = write_then_crash(bookie)
    data = bytearray(journal.read_bytes())
    if damage == "truncate":  # a torn last write
        journal.write_bytes(bytes(data[: -RECORD // 2]))
        survivors = ENTRIES - 1
    elif damage == "bitflip":  # a flipped bit inside the payload of record 290
        data[290 * RECORD + HEADER_SIZE + 7] ^= 0x04
        journal.write_bytes(bytes(data))
        survivors = 290
    else:  # half-written zeros and noise after the last record
        journal.write_bytes(bytes(data) + bytes(100) + b"\x07" * 50)
        survivors = ENTRIES
    bookie.start()
    assert stored(bookie) == expected(survivors)
    assert journal.stat().st_size == survivors * RECORD  # truncated there, for good
    assert "truncating" in bookie.log_tail(200)
    bookie.kill()  # and a second replay of the cut journal finds the same entries
    bookie.start()
    assert stored(bookie) == expected(survivors)


def test_damaged_journal_tail_is_cut_at_the_last_good_record(bookie_factory):
    # Each damage on a bookie of its own, all three at once (a case is mostly waiting:
    # process starts and the killed bookie's session expiry, 1 s on the test ZooKeeper).
    bookies = bookie_factory.start_many(
        len(DAMAGES), flush_interval_s=3600, zk_session_timeout_s=1.0, min_free_disk_bytes=0
    )
    with ThreadPoolExecutor(len(DAMAGES)) as pool:
        cases = {
            damage: pool.submit(damage_and_replay, bookie, damage)
            for damage, bookie in zip(DAMAGES, bookies, strict=True)
        }
        for damage, case in cases.items():
            try:
                case.result()
            except AssertionError as exc:
                raise AssertionError(f"journal damage {damage!r}: {exc}") from exc
