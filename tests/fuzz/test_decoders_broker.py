"""Property tests of the broker's formats (issue 20): range sets, the cursor document,
entries as the broker parses them (peek, delayed delivery), delay-bucket records,
ledger entry framing and the managed ledger's ledger list entries."""

from __future__ import annotations

import oracles
import pytest
from fuzzsettings import FUZZ
from hypothesis import example, given
from hypothesis import strategies as st
from test_decoders import mutated

from magnetar.common.errors import MetadataError
from magnetar.managedledger.cursor_state import CursorDocument
from magnetar.managedledger.layout import LedgerInfo
from magnetar.managedledger.position import Position
from magnetar.proto.v1 import broker_pb2 as pb

I64 = st.integers(-(2**63), 2**63 - 1)
json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)


# -- range sets: checked against a plain set of positions --------------------------------------------
ENTRIES_PER_LEDGER = oracles.ENTRIES_PER_LEDGER


small_positions = st.builds(Position, st.integers(0, 4), st.integers(0, ENTRIES_PER_LEDGER - 1))
range_ops = st.one_of(
    st.tuples(st.just("add"), small_positions, small_positions),
    st.tuples(st.just("remove_through"), small_positions, st.none()),
    st.tuples(st.just("pop_first"), st.none(), st.none()),
)


@FUZZ
@given(st.lists(range_ops, max_size=30), small_positions)
def test_range_set_agrees_with_a_set_of_positions(ops: list[tuple[str, Position | None, Position | None]], probe: Position) -> None:
    oracles.range_set_ops(ops, probe)


# -- the cursor document ---------------------------------------------------------------------------
positions = st.builds(Position, st.integers(0, 2**63 - 1), st.integers(-1, 2**63 - 1))
batch_acks = st.integers(1, 200).flatmap(lambda n: st.tuples(positions, st.just(n), st.integers(0, (1 << n) - 1)))
cursor_documents = st.builds(
    CursorDocument,
    mark_delete=positions,
    ranges=st.lists(st.tuples(positions, positions), max_size=6),
    batch_acks=st.lists(batch_acks, max_size=6),
    redelivery_counts=st.lists(st.tuples(positions, st.integers(0, 2**40)), max_size=6),
    properties=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    read_position=st.none() | positions,
)


@FUZZ
@given(cursor_documents)
def test_cursor_document_round_trips(doc: CursorDocument) -> None:
    oracles.cursor_round_trip(doc)


@FUZZ
@given(cursor_documents, st.integers(100, 3000))
def test_cursor_document_is_cut_to_fit_keeping_the_lowest_prefixes(doc: CursorDocument, max_bytes: int) -> None:
    oracles.cursor_cut_to_fit(doc, max_bytes)


def _damaged_cursor_documents() -> st.SearchStrategy[object]:
    keys = ["mark_delete", "individually_acked", "batch_acks", "redelivery_counts", "properties", "read_position"]

    @st.composite
    def damage(draw: st.DrawFn, doc: CursorDocument) -> object:
        stored = oracles.stored_cursor(doc)
        for _ in range(draw(st.integers(1, 3))):
            key = draw(st.sampled_from(keys))
            if draw(st.booleans()):
                stored.pop(key, None)
            else:
                stored[key] = draw(json_values)
        return stored

    return st.one_of(json_values, cursor_documents.flatmap(damage))


@FUZZ
@given(_damaged_cursor_documents())
@example({"mark_delete": [1, 2], "batch_acks": [[1, 3, 2, "-1"]]})
@example({"mark_delete": [1, 2], "batch_acks": [[1, 3, 2, "zz"]]})
@example({"mark_delete": [1, 2], "properties": "ab"})
@example({"mark_delete": [1, 2], "individually_acked": {"ab": 1}})
@example({"mark_delete": [1, 2], "properties": ["ab", "cd"]})  # regression: pairs taken as an object
@example({"mark_delete": [1, 2], "properties": [[1.5, 2], [None, 3]]})  # keys that JSON writes as strings
def test_cursor_document_from_doc_refuses_only_with_metadata_error(stored: object) -> None:
    oracles.cursor_stored(stored)


# -- entries as the broker parses them -------------------------------------------------------------
single_messages = st.builds(
    pb.SingleMessage, payload=st.binary(max_size=50), sequence_id=st.integers(0, 2**64 - 1), deliver_at_ms=I64,
)
entry_batches = st.builds(
    pb.EntryBatch, producer_name=st.text(max_size=10), publish_time_ms=I64, batched=st.booleans(),
    messages=st.lists(single_messages, max_size=4),
)


@FUZZ
@given(st.one_of(st.binary(max_size=200), mutated(entry_batches.map(pb.EntryBatch.SerializeToString))))
@example(b"\x2a" * 100)  # field 5 (messages), length 42, nested again and again
def test_peek_and_delayed_delivery_take_any_entry(data: bytes) -> None:
    oracles.broker_entry(data)


@FUZZ
@given(entry_batches.filter(lambda b: len(b.messages) > 0))
def test_peek_decode_round_trips_batches(batch: pb.EntryBatch) -> None:
    oracles.broker_entry_round_trip(batch)


# -- delay-bucket records ----------------------------------------------------------------------------
bucket_records = st.tuples(I64, st.builds(Position, I64, I64), st.none() | st.binary(min_size=1, max_size=60))


@FUZZ
@given(st.lists(bucket_records, max_size=10), st.binary(max_size=40))
def test_delay_bucket_records_round_trip_and_a_torn_tail_is_ignored(records: list, tail: bytes) -> None:
    oracles.delay_bucket_round_trip(records, tail)


@FUZZ
@given(st.binary(max_size=200))
def test_delay_bucket_decode_takes_any_bytes(buf: bytes) -> None:
    oracles.delay_bucket_bytes(buf)


# -- ledger entry framing ------------------------------------------------------------------------
@FUZZ
@given(st.integers(0, 2**64 - 1), st.binary(max_size=100))
def test_ledger_entry_frame_round_trips(length: int, payload: bytes) -> None:
    oracles.frame_round_trip(length, payload)


@FUZZ
@given(st.binary(max_size=40))
def test_ledger_entry_unframe_refuses_only_with_magnetar_error(data: bytes) -> None:
    oracles.framed_bytes(data)


# -- the managed ledger's list of ledgers ------------------------------------------------------------
ledger_infos = st.builds(
    LedgerInfo, st.integers(0, 2**63 - 1), st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**42), st.integers(0, 2**42),
)


@FUZZ
@given(ledger_infos)
def test_ledger_info_round_trips(info: LedgerInfo) -> None:
    oracles.ledger_info_round_trip(info)


@FUZZ
@given(st.one_of(json_values, st.dictionaries(st.sampled_from(["ledger_id", "entries", "size", "created_ms", "max_deliver_at_ms"]), json_values, max_size=5)))
def test_ledger_info_from_dict_refuses_only_with_metadata_error(doc: object) -> None:
    oracles.ledger_info_doc(doc)


def test_cursor_document_properties_must_be_an_object() -> None:
    # Regression (found by the fast fuzzer): dict() read a list of pairs as properties, whose
    # non-string keys (1.5, None, inf) came back as strings after the cursor was stored.
    for properties in (["ab", "cd"], [[1.5, 2]], [[None, 3]]):
        with pytest.raises(MetadataError):
            CursorDocument.from_doc({"mark_delete": [1, 2], "properties": properties}, "c")
    assert CursorDocument.from_doc({"mark_delete": [1, 2], "properties": {"a": [1]}}, "c").properties == {"a": [1]}
