"""Property tests of the decoders of ids, names and client batches (issue 20).

Every input is decoded or refused with the error the decoder documents (nothing else
escapes), and valid values survive encode → decode (and decode → encode where the form
is canonical). The bookie's formats are in ``test_decoders_bookie.py``, the broker's
and the metadata's in ``test_decoders_broker.py`` and ``test_decoders_metadata.py``;
:func:`mutated` is shared by them; the oracles are in ``oracles.py``, shared with the fast
driver (``test_decoders_fast.py``).
"""

from __future__ import annotations

import oracles
from fuzzsettings import FUZZ
from hypothesis import example, given
from hypothesis import strategies as st

from magnetar.common.message_id import INT64_MAX, MessageId
from magnetar.common.names import MAX_PARTITION_INDEX
from magnetar.gateway.websocket import ids as ws_ids
from magnetar.proto.v1 import broker_pb2 as pb

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)


# -- mutations of valid encodings ----------------------------------------------------------
@st.composite
def _mutate(draw: st.DrawFn, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["truncate", "flip", "append", "insert", "delete", "set"]))
        if op == "append" or not buf:
            buf += draw(st.binary(min_size=1, max_size=64))
        elif op == "truncate":
            del buf[draw(st.integers(0, len(buf) - 1)) :]
        elif op == "flip":
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            i = draw(st.integers(0, len(buf)))
            buf[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            i = draw(st.integers(0, len(buf) - 1))
            del buf[i : i + draw(st.integers(1, 16))]
        else:
            buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
    return bytes(buf)


def mutated(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Valid encodings with 1-4 of: truncation, a bit flip, appended or inserted garbage,
    a deleted slice, an overwritten byte."""
    return valid.flatmap(_mutate)


def mutated_text(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Like :func:`mutated` for text (mutating the UTF-8 bytes, decoded leniently)."""
    return mutated(valid.map(str.encode)).map(lambda b: b.decode("utf-8", "replace"))


# -- message ids -------------------------------------------------------------------------------
message_ids = st.builds(
    MessageId,
    ledger_id=st.integers(-1, INT64_MAX),
    entry_id=st.integers(-1, INT64_MAX),
    partition=st.integers(-1, 2**31 - 1),
    batch_index=st.integers(-1, 2**31 - 1),
)


@FUZZ
@given(message_ids)
def test_message_id_round_trips_through_bytes_text_and_proto(mid: MessageId) -> None:
    oracles.message_id_round_trip(mid)


@FUZZ
@given(st.one_of(st.binary(max_size=40), mutated(message_ids.map(MessageId.serialize))))
@example(b"\xff" * 24)  # -1 everywhere: MessageId.earliest
@example(b"\xff" * 8 + b"\x00" * 16)
def test_message_id_deserialize_takes_exactly_the_ids_it_writes(data: bytes) -> None:
    oracles.message_id_bytes(data)


@FUZZ
@given(
    st.one_of(
        st.text(max_size=60),
        st.text(alphabet="-0123456789:elatsr", max_size=60),
        mutated_text(message_ids.map(str)),
    )
)
@example("earliest")
@example("1:2:-01:3")
@example("1:" + "9" * 5000)  # regression: int() refused 5000 digits with a ValueError that escaped
def test_message_id_parse_refuses_only_with_invalid_argument(text: str) -> None:
    oracles.message_id_text(text)


@FUZZ
@given(INT64, INT64, INT32, INT32)
def test_message_id_from_proto_checks_every_wire_value(ledger: int, entry: int, partition: int, batch: int) -> None:
    oracles.message_id_proto(ledger, entry, partition, batch)


# -- the WebSocket API's message ids (base64 MessageIdData) -------------------------------------
@FUZZ
@given(message_ids)
def test_websocket_message_id_round_trips(mid: MessageId) -> None:
    oracles.ws_id_round_trip(mid)


@FUZZ
@given(st.one_of(st.binary(max_size=64), mutated(message_ids.map(ws_ids.to_bytes))))
@example(b"\x08" + b"\xff" * 11)  # a varint longer than 10 bytes
@example(b"\x0a\x7f")  # ledgerId as a length-delimited field
def test_websocket_message_id_from_bytes_refuses_only_with_invalid_argument(data: bytes) -> None:
    oracles.ws_id_bytes(data)


@FUZZ
@given(
    st.one_of(
        st.text(max_size=80),
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=80),
        mutated_text(message_ids.map(ws_ids.encode)),
    )
)
@example("é")
@example("A" * 2000)
def test_websocket_message_id_decode_refuses_only_with_invalid_argument(text: str) -> None:
    oracles.ws_id_text(text)


# -- masks on the wire ---------------------------------------------------------------------------
@FUZZ
@given(st.integers(0, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, (1 << n) - 1))))
def test_mask_round_trips_through_its_wire_form(n_mask: tuple[int, int]) -> None:
    oracles.mask_round_trip(*n_mask)


# -- topic and namespace names ------------------------------------------------------------------------
SEGMENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=:."
segments = st.text(alphabet=SEGMENT_CHARS, min_size=1, max_size=40).filter(lambda s: s not in (".", ".."))
local_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\x85"),
    min_size=1,
    max_size=60,
).filter(lambda s: s == s.strip() and s not in (".", "..") and not any("\ud800" <= c <= "\uf8ff" or c >= "\ufff0" for c in s))


@FUZZ
@given(segments, segments, local_names)
def test_topic_name_round_trips(tenant: str, namespace: str, local: str) -> None:
    oracles.topic_round_trip(tenant, namespace, local)


@FUZZ
@given(segments, segments, local_names, st.integers(0, MAX_PARTITION_INDEX))
def test_partition_names_round_trip(tenant: str, namespace: str, local: str, index: int) -> None:
    oracles.partition_round_trip(tenant, namespace, local, index)


def _topic_texts() -> st.SearchStrategy[str]:
    part = st.one_of(segments, st.text(max_size=12), st.sampled_from(["", ".", "..", " x", "t-partition-7", "t-partition-01"]))
    joined = st.lists(part, min_size=1, max_size=5).map("/".join)
    scheme = st.sampled_from(["", "persistent://", "non-persistent://", "http://", "://"])
    return st.one_of(st.text(max_size=80), st.builds(lambda s, j: s + j, scheme, joined))


@FUZZ
@given(st.one_of(_topic_texts(), mutated_text(st.builds(lambda t, n, x: f"persistent://{t}/{n}/{x}", segments, segments, local_names))))
@example("persistent://a/b/t-partition-2147483648")
@example("persistent://a/b/\x85")
def test_topic_name_parse_refuses_only_with_invalid_topic_name(text: str) -> None:
    oracles.topic_text(text)


@FUZZ
@given(st.one_of(st.text(max_size=40), st.lists(st.one_of(segments, st.text(max_size=8)), max_size=3).map("/".join)))
def test_namespace_name_parse_refuses_only_with_invalid_argument(text: str) -> None:
    oracles.namespace_text(text)


# -- client batches (EntryBatch), as the SDK writes them and the consumer reads them -------------
single_messages = st.builds(
    pb.SingleMessage,
    payload=st.binary(max_size=200),
    properties=st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
    partition_key=st.text(max_size=10),
    sequence_id=st.integers(0, 2**63 - 1),
    event_time_ms=st.integers(0, 2**63 - 1),
)


@FUZZ
@given(st.lists(single_messages, min_size=1, max_size=8), st.booleans(), st.text(max_size=20))
def test_client_batch_round_trips_from_producer_to_consumer(messages: list[pb.SingleMessage], batched: bool, producer: str) -> None:
    oracles.client_batch_round_trip(messages, batched, producer)


def _entries() -> st.SearchStrategy[bytes]:
    return st.lists(single_messages, max_size=3).map(lambda ms: pb.EntryBatch(producer_name="p", messages=ms).SerializeToString())


@FUZZ
@given(st.one_of(st.binary(max_size=200), mutated(_entries())))
@example(b"\x0a" * 200)  # nested length prefixes
@example(b"\x80" * 11)  # a varint that never ends
def test_client_unpack_entry_refuses_only_with_magnetar_error(entry: bytes) -> None:
    oracles.client_entry(entry)
