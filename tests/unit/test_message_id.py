"""Message ids: text and byte forms, order, sentinels, protobuf (magnetar.common.message_id)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import pytest

from magnetar.common.errors import InvalidArgument
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2

INT64_MAX = 9223372036854775807
INT32_MAX = 2147483647


def test_defaults_and_str() -> None:
    mid = MessageId(ledger_id=12, entry_id=3)
    assert (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()) == (12, 3, -1, -1)
    assert str(mid) == "12:3:-1:-1"
    assert str(MessageId(ledger_id=12, entry_id=3, partition=2, batch_index=7)) == "12:3:2:7"


def test_parts_are_methods_as_in_pulsar_client() -> None:
    # pulsar-client's MessageId: ledger_id(), entry_id(), partition(), batch_index().
    mid = MessageId(ledger_id=1, entry_id=2, partition=3, batch_index=4)
    assert mid.ledger_id() == 1
    assert mid.entry_id() == 2
    assert mid.partition() == 3
    assert mid.batch_index() == 4
    for name in ("ledger_id", "entry_id", "partition", "batch_index"):
        assert callable(getattr(MessageId, name)) and callable(getattr(mid, name))
    fast = MessageId.trusted(3, 1, 2, 4)
    assert (fast.ledger_id(), fast.entry_id(), fast.partition(), fast.batch_index()) == (1, 2, 3, 4)
    assert (MessageId.earliest.ledger_id(), MessageId.earliest.entry_id()) == (-1, -1)
    assert (MessageId.latest.ledger_id(), MessageId.latest.entry_id()) == (INT64_MAX, INT64_MAX)
    assert MessageId(ledger_id=7, entry_id=8, batch_index=0) == MessageId(ledger_id=7, entry_id=8, partition=-1, batch_index=0)
    assert repr(MessageId(ledger_id=1, entry_id=2)) == "MessageId(partition=-1, ledger_id=1, entry_id=2, batch_index=-1)"


def test_positional_arguments_take_pulsar_clients_order() -> None:
    # pulsar-client: MessageId(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1), so
    # positional Pulsar code must build the same id here.
    mid = MessageId(2, 12, 3, 7)
    assert (mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()) == (2, 12, 3, 7)
    assert str(mid) == "12:3:2:7" and mid == MessageId.parse("12:3:2:7")
    assert MessageId(-1, 5, 6) == MessageId.parse("5:6")
    assert MessageId() == MessageId.earliest
    assert list(inspect.signature(MessageId).parameters) == ["partition", "ledger_id", "entry_id", "batch_index"]
    assert MessageId.trusted(2, 12, 3, 7) == mid


def test_equal_ids_hash_and_sort_alike_however_built() -> None:
    built = [MessageId(ledger_id=3, entry_id=1, partition=0, batch_index=2), MessageId.parse("3:1:0:2"), MessageId.trusted(0, 3, 1, 2),
             MessageId.deserialize(MessageId(ledger_id=3, entry_id=1, partition=0, batch_index=2).serialize())]
    assert len(set(built)) == 1 and len({hash(m) for m in built}) == 1
    assert {m: "x" for m in built} == {MessageId(ledger_id=3, entry_id=1, partition=0, batch_index=2): "x"}
    # Order by ledger, then entry, then partition, then batch index, not by any one part.
    assert MessageId(ledger_id=1, entry_id=9, partition=9, batch_index=9) < MessageId(ledger_id=2, entry_id=0, partition=0, batch_index=0)
    assert MessageId(ledger_id=2, entry_id=0, partition=9, batch_index=9) < MessageId(ledger_id=2, entry_id=1, partition=0, batch_index=0)
    assert MessageId(ledger_id=2, entry_id=1, partition=0, batch_index=9) < MessageId(ledger_id=2, entry_id=1, partition=1, batch_index=0)
    assert MessageId(ledger_id=2, entry_id=1, partition=1, batch_index=-1) < MessageId.trusted(1, 2, 1, 0) <= MessageId(ledger_id=2, entry_id=1, partition=1, batch_index=0)
    assert max(built + [MessageId(ledger_id=3, entry_id=0)]) == MessageId(ledger_id=3, entry_id=1, partition=0, batch_index=2)


def test_sentinel_of_ids_and_wire_ids() -> None:
    from magnetar.common.message_id import message_id_sentinel

    def wire(ledger: int, entry: int) -> broker_pb2.MessageIdData:
        return broker_pb2.MessageIdData(ledger_id=ledger, entry_id=entry, partition=-1, batch_index=-1)

    assert message_id_sentinel(MessageId.earliest) == message_id_sentinel(wire(-1, -1)) == "earliest"
    assert message_id_sentinel(MessageId.latest) == message_id_sentinel(wire(INT64_MAX, INT64_MAX)) == "latest"
    assert message_id_sentinel(MessageId(ledger_id=0, entry_id=0)) is message_id_sentinel(wire(0, 0)) is None
    assert message_id_sentinel(MessageId(ledger_id=5, entry_id=-1)) is None


def test_sentinels_are_pulsars() -> None:
    assert str(MessageId.earliest) == "-1:-1:-1:-1"
    assert str(MessageId.latest) == f"{INT64_MAX}:{INT64_MAX}:-1:-1"
    assert MessageId.earliest < MessageId(ledger_id=0, entry_id=0) < MessageId(ledger_id=INT64_MAX, entry_id=INT64_MAX - 1, partition=5, batch_index=5)
    assert MessageId(ledger_id=INT64_MAX, entry_id=INT64_MAX - 1) < MessageId.latest


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12:3:-1:-1", MessageId(ledger_id=12, entry_id=3)),
        ("12:3:2:7", MessageId(ledger_id=12, entry_id=3, partition=2, batch_index=7)),
        ("12:3", MessageId(ledger_id=12, entry_id=3)),
        ("12:3:4", MessageId(ledger_id=12, entry_id=3, partition=4)),
        ("0:0:0:0", MessageId(ledger_id=0, entry_id=0, partition=0, batch_index=0)),
        (
            f"{INT64_MAX}:{INT64_MAX}:{INT32_MAX}:{INT32_MAX}",
            MessageId(ledger_id=INT64_MAX, entry_id=INT64_MAX, partition=INT32_MAX, batch_index=INT32_MAX),
        ),
        ("earliest", MessageId(ledger_id=-1, entry_id=-1, partition=-1, batch_index=-1)),
        ("latest", MessageId(ledger_id=INT64_MAX, entry_id=INT64_MAX, partition=-1, batch_index=-1)),
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
    mid = MessageId(ledger_id=5, entry_id=6, partition=1, batch_index=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mid._entry_id = 7  # type: ignore[misc]
    for name in ("entry_id", "ledger_id"):  # nor can a method be shadowed
        # (3.11's frozen+slots dataclass raises TypeError for a name that is not a field)
        with pytest.raises((AttributeError, TypeError)):
            setattr(mid, name, 7)
    assert mid.entry_id() == 6
    assert not hasattr(mid, "__dict__")  # slotted
    assert hash(mid) == hash(MessageId(ledger_id=5, entry_id=6, partition=1, batch_index=2))
    assert {mid, MessageId(ledger_id=5, entry_id=6, partition=1, batch_index=2)} == {mid}
    assert pickle.loads(pickle.dumps(mid)) == mid == copy.deepcopy(mid)


def test_order_is_ledger_entry_partition_batch() -> None:
    ids = [
        MessageId(ledger_id=2, entry_id=0),
        MessageId(ledger_id=1, entry_id=5, partition=-1, batch_index=3),
        MessageId(ledger_id=1, entry_id=5),
        MessageId(ledger_id=1, entry_id=5, partition=-1, batch_index=0),
        MessageId(ledger_id=1, entry_id=10),
        MessageId(ledger_id=1, entry_id=5, partition=0, batch_index=-1),
        MessageId(ledger_id=0, entry_id=100, partition=3, batch_index=3),
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
    assert MessageId(ledger_id=1, entry_id=5, partition=-1, batch_index=0) > MessageId(ledger_id=1, entry_id=5) >= MessageId(ledger_id=1, entry_id=5) <= MessageId(ledger_id=1, entry_id=5)


def test_entry_id_only() -> None:
    assert MessageId(ledger_id=7, entry_id=8, partition=2, batch_index=9).entry_id_only() == MessageId(ledger_id=7, entry_id=8, partition=2, batch_index=-1)
    plain = MessageId(ledger_id=7, entry_id=8)
    assert plain.entry_id_only() is plain


# -- bytes ------------------------------------------------------------------------

SERIALIZED = [
    (MessageId(ledger_id=1, entry_id=2), "00000000000000010000000000000002ffffffffffffffff"),
    (
        MessageId(ledger_id=0x0102030405060708, entry_id=0x1112131415161718, partition=0x21222324, batch_index=0x31323334),
        "010203040506070811121314151617182122232431323334",
    ),
    (MessageId.earliest, "ff" * 24),
    (MessageId.latest, "7fffffffffffffff7fffffffffffffffffffffffffffffff"),
    (MessageId(ledger_id=0, entry_id=0, partition=0, batch_index=0), "00" * 24),
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
        MessageId(ledger_id=a, entry_id=b, partition=c, batch_index=d)
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
        (MessageId(ledger_id=1, entry_id=2).serialize()[:-1], "24 bytes, got 23"),
        (MessageId(ledger_id=1, entry_id=2).serialize() + b"\x00", "24 bytes, got 25"),
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
    "mid", [MessageId(ledger_id=1, entry_id=2), MessageId(ledger_id=9, entry_id=8, partition=7, batch_index=6), MessageId.earliest, MessageId.latest]
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
    assert MessageId.from_proto(broker_pb2.MessageIdData()) == MessageId(ledger_id=0, entry_id=0, partition=0, batch_index=0)


def test_from_proto_checks_ranges() -> None:
    with pytest.raises(InvalidArgument, match="ledger_id"):
        MessageId.from_proto(broker_pb2.MessageIdData(ledger_id=-5, partition=-1, batch_index=-1))


def test_trusted_constructor_builds_the_same_id():
    from magnetar.common.message_id import MessageId as M

    fast = M.trusted(-1, 7, 3, 2)
    assert fast == M(ledger_id=7, entry_id=3, partition=-1, batch_index=2) and hash(fast) == hash(M(ledger_id=7, entry_id=3, partition=-1, batch_index=2)) and str(fast) == "7:3:-1:2"
    assert fast < M(ledger_id=7, entry_id=4)
