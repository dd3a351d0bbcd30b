"""Property tests of the bookie's on-disk formats (issue 20): the entry record (journal
and entry logs), journal replay over torn files, the entry log, the LMDB index, the
LastLogMark and the cookie.

Files are written to a fresh temporary directory per example (hypothesis does not reset
function-scoped fixtures such as ``tmp_path`` between examples).
"""

from __future__ import annotations

import json
import struct
import tempfile
import zlib
from pathlib import Path

import oracles
import pytest
from fuzzsettings import FUZZ
from hypothesis import example, given
from hypothesis import strategies as st
from test_decoders import mutated

from magnetar.bookie import cookie as cookies
from magnetar.bookie.entrylog import EntryLogger
from magnetar.bookie.index import LedgerIndex, LedgerRecord, Location, entry_key, pack_location
from magnetar.bookie.lastmark import JournalPosition
from magnetar.bookie.record import (
    BODY_HEADER_SIZE,
    PREFIX,
    CorruptRecord,
    Record,
    decode,
)

U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
records = st.builds(Record, U64, I64, I64, st.binary(max_size=300))


_encode = oracles.encode_record


# -- the entry record ---------------------------------------------------------------------------
@FUZZ
@given(records, st.binary(max_size=40), st.binary(max_size=40))
def test_record_round_trips_at_any_offset(rec: Record, before: bytes, after: bytes) -> None:
    oracles.record_round_trip(rec, before, after)


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 250))
@example(struct.pack("<II", BODY_HEADER_SIZE, zlib.crc32(b"\x02" + bytes(24))) + b"\x02" + bytes(24), 0)  # kind 2
@example(struct.pack("<II", BODY_HEADER_SIZE - 1, 0) + bytes(24), 0)  # too short for a header
@example(struct.pack("<II", 0xFFFFFFFF, 0), 0)
def test_record_decode_of_random_bytes_refuses_with_corrupt_record_only(buf: bytes, offset: int) -> None:
    oracles.record_decode(buf, offset)


@FUZZ
@given(mutated(records.map(_encode)))
def test_record_decode_of_mutated_records_refuses_with_corrupt_record_only(buf: bytes) -> None:
    oracles.record_decode(buf, 0)


@FUZZ
@given(records, st.data())
def test_record_torn_or_flipped_is_always_detected(rec: Record, data: st.DataObject) -> None:
    n = len(_encode(rec))
    cut = data.draw(st.integers(0, n - 1), label="cut")
    byte = data.draw(st.integers(0, n - 1), label="byte")
    oracles.record_torn_or_flipped(rec, cut, byte, data.draw(st.integers(0, 7), label="bit"))


# -- journal replay over torn files ------------------------------------------------------------------
@FUZZ
@given(
    st.lists(st.lists(records, max_size=5), min_size=1, max_size=3),
    st.lists(st.one_of(st.just(b""), st.binary(min_size=1, max_size=60)), min_size=3, max_size=3),
)
def test_journal_replay_yields_the_intact_records_and_truncates_torn_tails(
    files: list[list[Record]], tails: list[bytes]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        contents = [b"".join(_encode(r) for r in recs) + tail for recs, tail in zip(files, tails, strict=False)]
        for i, data in enumerate(contents):
            oracles.journal_file(directory, i + 1).write_bytes(data)
        (directory / "garbage.jnl").write_bytes(b"not a journal")  # not a hex file id: skipped
        got = oracles.journal_replay(directory, contents)
        assert [r for _, r in got] == [r for recs in files for r in recs]


# -- the entry log -------------------------------------------------------------------------------------
@FUZZ
@given(st.lists(records, min_size=1, max_size=12), st.integers(200, 2000), st.data())
def test_entry_log_returns_each_record_at_its_location(recs: list[Record], max_bytes: int, data: st.DataObject) -> None:
    encoded = [_encode(r) for r in recs]
    with tempfile.TemporaryDirectory() as tmp:
        log = EntryLogger(Path(tmp), max_bytes)
        log.open()
        try:
            locations = log.append_many(encoded)
            log.sync()
            for (log_id, offset), rec, enc in zip(locations, recs, encoded, strict=True):
                assert decode(log.read(log_id, offset, len(enc))) == (rec, len(enc))
            # A read at a wrong place or of a wrong length is refused, never misread.
            log_id, offset = data.draw(st.sampled_from(locations), label="location")
            shift = data.draw(st.integers(-40, 40), label="shift")
            length = data.draw(st.integers(0, 400), label="length")
            oracles.entry_log_read(log.read(log_id, max(0, offset + shift), length), recs)
        finally:
            log.close()


# -- the index ------------------------------------------------------------------------------------------
ledger_records = st.builds(LedgerRecord, st.booleans(), I64, I64)


@FUZZ
@given(
    st.dictionaries(st.tuples(U64, U64), st.builds(Location, st.integers(0, 2**32 - 1), U64, st.integers(0, 2**32 - 1)), max_size=20),
    st.dictionaries(U64, ledger_records, max_size=10),
    st.dictionaries(st.integers(0, 2**32 - 1), st.sets(U64, max_size=10), max_size=5),
)
def test_index_round_trips_locations_ledgers_and_logs(
    locations: dict[tuple[int, int], Location], ledgers: dict[int, LedgerRecord], logs: dict[int, set[int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        index = LedgerIndex(Path(tmp), 1 << 24)
        try:
            pairs = sorted((entry_key(lid, e), pack_location(*loc)) for (lid, e), loc in locations.items())
            index.commit_flush(pairs, ledgers, logs)
            assert index.load_ledgers() == ledgers
            assert index.load_logs() == logs
            for (lid, e), loc in locations.items():
                assert index.get_many(lid, [e]) == {e: loc}
            if locations:
                victim = next(iter(locations))[0]
                index.delete_ledger(victim)
                assert victim in index.load_deleted()
                for (lid, e), loc in locations.items():
                    assert index.get_many(lid, [e]) == ({} if lid == victim else {e: loc})
        finally:
            index.close()


# -- the LastLogMark ----------------------------------------------------------------------------------
positions = st.builds(JournalPosition, st.integers(0, 2**64 - 1), st.integers(1, 2**64 - 1))


def _lastmark_bytes(position: JournalPosition) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        return oracles.lastmark_bytes(position, Path(tmp))


@FUZZ
@given(positions, positions)
def test_lastmark_round_trips_and_never_moves_back(first: JournalPosition, second: JournalPosition) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        oracles.lastmark_round_trip(first, second, Path(tmp))


@FUZZ
@given(st.one_of(st.binary(max_size=40), mutated(positions.map(_lastmark_bytes))))
def test_lastmark_refuses_damaged_files_with_value_error_only(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        oracles.lastmark_file(data, Path(tmp))


@FUZZ
@given(positions, st.data())
def test_lastmark_detects_any_single_bit_flip(position: JournalPosition, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = bytearray(oracles.lastmark_bytes(position, Path(tmp)))
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
        assert oracles.read_lastmark(bytes(raw), Path(tmp)) is None


# -- the cookie ------------------------------------------------------------------------------------------
cookie_values = st.builds(
    cookies.Cookie,
    bookie_id=st.text(min_size=1, max_size=30),
    data_dir=st.text(min_size=1, max_size=30),
    journal_dir=st.text(min_size=1, max_size=30),
    instance_id=st.text(alphabet="0123456789abcdef", min_size=32, max_size=32),
    layout_version=st.integers(0, 10),
    created=st.text(max_size=30),
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _cookie_file_texts() -> st.SearchStrategy[bytes]:
    valid = cookie_values.map(lambda c: json.dumps(cookies.asdict(c)).encode())
    some_docs = st.dictionaries(
        st.sampled_from(["bookie_id", "data_dir", "journal_dir", "instance_id", "layout_version", "created", "x"]),
        json_values,
        max_size=7,
    )
    return st.one_of(st.binary(max_size=80), valid, mutated(valid), some_docs.map(lambda d: json.dumps(d).encode()))


@FUZZ
@given(cookie_values)
def test_cookie_round_trips(cookie: cookies.Cookie) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        oracles.cookie_round_trip(cookie, Path(tmp))


@FUZZ
@given(_cookie_file_texts())
@example(b"[" * 100_000)  # regression: json.loads raised RecursionError, which escaped
@example(b"\xff\xfe")  # not UTF-8
@example(b'{"bookie_id": "b", "data_dir": "d", "journal_dir": "j", "instance_id": "i"}')  # defaults fill the rest
def test_cookie_read_refuses_only_with_precondition_failed(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        oracles.cookie_file(data, Path(tmp))


@FUZZ
@given(st.binary(max_size=PREFIX.size + BODY_HEADER_SIZE - 1))
def test_record_decode_refuses_anything_shorter_than_a_header(buf: bytes) -> None:
    with pytest.raises(CorruptRecord):
        decode(buf)
