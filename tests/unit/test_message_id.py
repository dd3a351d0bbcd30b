"""Message ids: text and byte forms, order, sentinels, protobuf (magnetar.common.message_id)."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2

INT64_MAX = 9223372036854775807
INT32_MAX = 2147483647


def test_defaults_and_str() -> None:
    mid = MessageId(12, 3)
    assert (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()) == (12, 3, -1, -1)
    assert str(mid) == "12:3:-1:-1"
    assert str(MessageId(12, 3, 2, 7)) == "12:3:2:7"


def test_parts_are_methods_as_in_pulsar_client() -> None:
    # pulsar-client's MessageId: ledger_id(), entry_id(), partition(), batch_index().
    mid = MessageId(1, 2, 3, 4)
    assert mid.ledger_id() == 1
    assert mid.entry_id() == 2
    assert mid.partition() == 3
    assert mid.batch_index() == 4
    for name in ("ledger_id", "entry_id", "partition", "batch_index"):
        assert callable(getattr(MessageId, name)) and callable(getattr(mid, name))
    fast = MessageId.trusted(1, 2, 3, 4)
    assert (fast.ledger_id(), fast.entry_id(), fast.partition(), fast.batch_index()) == (1, 2, 3, 4)
    assert (MessageId.earliest.ledger_id(), MessageId.earliest.entry_id()) == (-1, -1)
    assert (MessageId.latest.ledger_id(), MessageId.latest.entry_id()) == (INT64_MAX, INT64_MAX)
    assert MessageId(ledger_id=7, entry_id=8, batch_index=0) == MessageId(7, 8, -1, 0)
    assert repr(MessageId(1, 2)) == "MessageId(ledger_id=1, entry_id=2, partition=-1, batch_index=-1)"


def test_equal_ids_hash_and_sort_alike_however_built() -> None:
    built = [MessageId(3, 1, 0, 2), MessageId.parse("3:1:0:2"), MessageId.trusted(3, 1, 0, 2),
             MessageId.deserialize(MessageId(3, 1, 0, 2).serialize())]
    assert len(set(built)) == 1 and len({hash(m) for m in built}) == 1
    assert {m: "x" for m in built} == {MessageId(3, 1, 0, 2): "x"}
    # Order by ledger, then entry, then partition, then batch index, not by any one part.
    assert MessageId(1, 9, 9, 9) < MessageId(2, 0, 0, 0)
    assert MessageId(2, 0, 9, 9) < MessageId(2, 1, 0, 0)
    assert MessageId(2, 1, 0, 9) < MessageId(2, 1, 1, 0)
    assert MessageId(2, 1, 1, -1) < MessageId.trusted(2, 1, 1, 0) <= MessageId(2, 1, 1, 0)
    assert max(built + [MessageId(3, 0)]) == MessageId(3, 1, 0, 2)


def test_sentinel_of_ids_and_wire_ids() -> None:
    from magnetar.common.message_id import message_id_sentinel

    def wire(ledger: int, entry: int) -> broker_pb2.MessageIdData:
        return broker_pb2.MessageIdData(ledger_id=ledger, entry_id=entry, partition=-1, batch_index=-1)

    assert message_id_sentinel(MessageId.earliest) == message_id_sentinel(wire(-1, -1)) == "earliest"
    assert message_id_sentinel(MessageId.latest) == message_id_sentinel(wire(INT64_MAX, INT64_MAX)) == "latest"
    assert message_id_sentinel(MessageId(0, 0)) is message_id_sentinel(wire(0, 0)) is None
    assert message_id_sentinel(MessageId(5, -1)) is None


def test_sentinels_are_pulsars() -> None:
    assert str(MessageId.earliest) == "-1:-1:-1:-1"
    assert str(MessageId.latest) == f"{INT64_MAX}:{INT64_MAX}:-1:-1"
    assert MessageId.earliest < MessageId(0, 0) < MessageId(INT64_MAX, INT64_MAX - 1, 5, 5)
    assert MessageId(INT64_MAX, INT64_MAX - 1) < MessageId.latest


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12:3:-1:-1", MessageId(12, 3)),
        ("12:3:2:7", MessageId(12, 3, 2, 7)),
        ("12:3", MessageId(12, 3)),
        ("12:3:4", MessageId(12, 3, 4)),
        ("0:0:0:0", MessageId(0, 0, 0, 0)),
        (
            f"{INT64_MAX}:{INT64_MAX}:{INT32_MAX}:{INT32_MAX}",
            MessageId(INT64_MAX, INT64_MAX, INT32_MAX, INT32_MAX),
        ),
        ("earliest", MessageId(-1, -1, -1, -1)),
        ("latest", MessageId(INT64_MAX, INT64_MAX, -1, -1)),
    ],
)
def test_parse(text: str, expected: MessageId) -> None:
    assert MessageId.parse(text) == expected
    assert MessageId.parse(str(expected)) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "expected ledgerId:entryId:partitionIndex:batchIndex"),
        ("12", "expected ledgerId"),
        ("1:2:3:4:5", "expected ledgerId"),
        ("a:b", "expected ledgerId"),
        ("1:2:", "expected ledgerId"),
        (" 1:2", "expected ledgerId"),
        ("1_0:2", "expected ledgerId"),
        ("+1:2", "expected ledgerId"),
        ("١:2", "expected ledgerId"),  # an Arabic-Indic digit, which int() would accept
        ("(1,2,-1,-1)", "expected ledgerId"),
        ("-2:0", "ledger_id must be from -1"),
        ("1:-5", "entry_id must be from -1"),
        (f"{INT64_MAX + 1}:0", "ledger_id must be from -1"),
        (f"1:2:{INT32_MAX + 1}:0", "partition must be from -1"),
        ("1:2:0:-2", "batch_index must be from -1"),
    ],
)
def test_parse_invalid(text: str, fragment: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        MessageId.parse(text)
    assert fragment in info.value.message
    assert repr(text) in info.value.message


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(InvalidArgument, match="must be a string"):
        MessageId.parse(b"1:2")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args",
    [(1.0, 2), (1, "2"), (True, 2), (1, 2, None), (-2, 0), (0, 0, -7), (0, 0, 0, 2**31)],
)
def test_constructor_checks(args: tuple[object, ...]) -> None:
    with pytest.raises(InvalidArgument):
        MessageId(*args)  # type: ignore[arg-type]


def test_frozen_hashable_picklable() -> None:
    mid = MessageId(5, 6, 1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mid._entry_id = 7  # type: ignore[misc]
    for name in ("entry_id", "ledger_id"):  # nor can a method be shadowed
        # (3.11's frozen+slots dataclass raises TypeError for a name that is not a field)
        with pytest.raises((AttributeError, TypeError)):
            setattr(mid, name, 7)
    assert mid.entry_id() == 6
    assert not hasattr(mid, "__dict__")  # slotted
    assert hash(mid) == hash(MessageId(5, 6, 1, 2))
    assert {mid, MessageId(5, 6, 1, 2)} == {mid}
    assert pickle.loads(pickle.dumps(mid)) == mid == copy.deepcopy(mid)


def test_order_is_ledger_entry_partition_batch() -> None:
    ids = [
        MessageId(2, 0),
        MessageId(1, 5, -1, 3),
        MessageId(1, 5),
        MessageId(1, 5, -1, 0),
        MessageId(1, 10),
        MessageId(1, 5, 0, -1),
        MessageId(0, 100, 3, 3),
        MessageId.latest,
        MessageId.earliest,
    ]
    assert [str(m) for m in sorted(ids)] == [
        "-1:-1:-1:-1",
        "0:100:3:3",
        "1:5:-1:-1",  # the whole entry sorts before the messages of its batch
        "1:5:-1:0",
        "1:5:-1:3",
        "1:5:0:-1",
        "1:10:-1:-1",
        "2:0:-1:-1",
        f"{INT64_MAX}:{INT64_MAX}:-1:-1",
    ]
    assert MessageId(1, 5, -1, 0) > MessageId(1, 5) >= MessageId(1, 5) <= MessageId(1, 5)


def test_entry_id_only() -> None:
    assert MessageId(7, 8, 2, 9).entry_id_only() == MessageId(7, 8, 2, -1)
    plain = MessageId(7, 8)
    assert plain.entry_id_only() is plain


# -- bytes ------------------------------------------------------------------------

SERIALIZED = [
    (MessageId(1, 2), "00000000000000010000000000000002ffffffffffffffff"),
    (
        MessageId(0x0102030405060708, 0x1112131415161718, 0x21222324, 0x31323334),
        "010203040506070811121314151617182122232431323334",
    ),
    (MessageId.earliest, "ff" * 24),
    (MessageId.latest, "7fffffffffffffff7fffffffffffffffffffffffffffffff"),
    (MessageId(0, 0, 0, 0), "00" * 24),
]


@pytest.mark.parametrize(("mid", "hex_"), SERIALIZED)
def test_serialize_byte_for_byte(mid: MessageId, hex_: str) -> None:
    data = mid.serialize()
    assert data.hex() == hex_
    assert len(data) == MessageId.SIZE == 24
    # Independent decoding of the layout: big-endian signed int64, int64, int32, int32.
    fields = (
        int.from_bytes(data[0:8], "big", signed=True),
        int.from_bytes(data[8:16], "big", signed=True),
        int.from_bytes(data[16:20], "big", signed=True),
        int.from_bytes(data[20:24], "big", signed=True),
    )
    assert fields == (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())
    assert MessageId.deserialize(data) == mid
    assert MessageId.deserialize(bytearray(data)) == mid
    assert MessageId.deserialize(memoryview(data)) == mid


def test_serialized_order_needs_no_decoding_for_non_negative_ids() -> None:
    # Not a promise of the format, a property worth knowing: for ids >= 0 byte order = id order.
    ids = [
        MessageId(a, b, c, d)
        for a in (0, 1, 300)
        for b in (0, 2, 70000)
        for c in (0, 1)
        for d in (0, 5)
    ]
    assert sorted(ids, key=MessageId.serialize) == sorted(ids)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "24 bytes, got 0"),
        (MessageId(1, 2).serialize()[:-1], "24 bytes, got 23"),
        (MessageId(1, 2).serialize() + b"\x00", "24 bytes, got 25"),
        (bytes.fromhex("fffffffffffffffe" + "00" * 16), "ledger_id must be from -1"),
        (bytes.fromhex("00" * 16 + "80000000" + "00" * 4), "partition must be from -1"),
    ],
)
def test_deserialize_rejects_torn_and_corrupt_input(data: bytes, fragment: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        MessageId.deserialize(data)
    assert fragment in info.value.message


def test_deserialize_rejects_non_bytes() -> None:
    with pytest.raises(InvalidArgument, match="must be bytes"):
        MessageId.deserialize("1:2:-1:-1")  # type: ignore[arg-type]


# -- protobuf ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "mid", [MessageId(1, 2), MessageId(9, 8, 7, 6), MessageId.earliest, MessageId.latest]
)
def test_proto_round_trip(mid: MessageId) -> None:
    msg = mid.to_proto()
    assert isinstance(msg, broker_pb2.MessageIdData)
    assert (msg.ledger_id, msg.entry_id, msg.partition, msg.batch_index) == (
        mid.ledger_id(),
        mid.entry_id(),
        mid.partition(),
        mid.batch_index(),
    )
    wire = msg.SerializeToString()
    assert MessageId.from_proto(broker_pb2.MessageIdData.FromString(wire)) == mid


def test_from_proto_of_an_unset_message_is_all_zero() -> None:
    # Proto3 cannot tell 0 from unset: senders must set -1 explicitly (to_proto does).
    assert MessageId.from_proto(broker_pb2.MessageIdData()) == MessageId(0, 0, 0, 0)


def test_from_proto_checks_ranges() -> None:
    with pytest.raises(InvalidArgument, match="ledger_id"):
        MessageId.from_proto(broker_pb2.MessageIdData(ledger_id=-5, partition=-1, batch_index=-1))


def test_trusted_constructor_builds_the_same_id():
    from magnetar.common.message_id import MessageId as M

    fast = M.trusted(7, 3, -1, 2)
    assert fast == M(7, 3, -1, 2) and hash(fast) == hash(M(7, 3, -1, 2)) and str(fast) == "7:3:-1:2"
    assert fast < M(7, 4)
