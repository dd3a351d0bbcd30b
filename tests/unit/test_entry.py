"""The broker core's entry codec (broker/entry.py) and its own types, and their
translation at the gRPC door (broker/rpc/wire.py): stored bytes stay the SDK's, byte for
byte; corrupt entries give a clear error; the enums have the wire's numbers."""

from __future__ import annotations

import dataclasses

import pytest

from magnetar.broker.consumer import Delivery
from magnetar.broker.entry import (
    PULSAR_MAGIC,
    Message,
    OpaqueEntry,
    decode_entry,
    encode_entry,
    publish_time,
    view_entry,
)
from magnetar.broker.rpc import wire
from magnetar.broker.stats import ConsumerStats, PublisherStats, SubscriptionStats, TopicStats
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.client.batching import build_op
from magnetar.client.message import unpack_entry
from magnetar.client.producer import build_message
from magnetar.common import masks
from magnetar.common.errors import InvalidArgument
from magnetar.managedledger.position import Position
from magnetar.proto.v1 import broker_pb2 as pb

MESSAGES = [
    Message(payload=b"one", properties={"a": "1", "b": "2"}, partition_key="k1", has_partition_key=True,
            event_time_ms=11, sequence_id=7),
    Message(payload=b"", sequence_id=8),
    Message(payload=b"\x00\xff delayed", partition_key="", has_partition_key=True, sequence_id=9,
            deliver_at_ms=1_700_000_123_456),
]  # fmt: skip


def sdk_entry(messages: list[Message], producer: str, batched: bool) -> bytes:
    """What the Magnetar SDK sends for these messages (its own builders)."""
    built = []
    for m in messages:
        msg = build_message(
            m.payload, dict(m.properties), m.partition_key if m.has_partition_key else None, m.event_time_ms or None,
            m.deliver_at_ms or None, None, 1 << 20,
        )
        msg.sequence_id = m.sequence_id
        built.append(msg)
    return build_op(1, producer, built, [], batched=batched).request.send.entry


@pytest.mark.parametrize("messages", [MESSAGES, MESSAGES[:1], MESSAGES[2:]], ids=["batch", "one", "delayed"])
def test_encode_gives_the_bytes_the_sdk_sends(messages):
    batched = len(messages) > 1
    sdk = sdk_entry(messages, "producer-1", batched)
    ours = encode_entry("producer-1", messages[0].sequence_id, publish_time(sdk), batched, messages)
    assert ours == sdk


def test_round_trip_reads_back_every_field():
    data = encode_entry("p", 7, 1_700_000_000_000, True, MESSAGES)
    entry = decode_entry(data)
    assert (entry.producer_name, entry.sequence_id, entry.publish_time_ms, entry.batched) == ("p", 7, 1_700_000_000_000, True)
    got = [
        Message(m.payload, dict(m.properties), m.partition_key, m.has_partition_key, m.event_time_ms, m.sequence_id, m.deliver_at_ms)
        for m in entry.messages
    ]
    assert got == MESSAGES
    # Delivered through the gRPC door, the SDK reads the same messages.
    (delivered,) = wire.deliveries([Delivery(Position(1, 2), data, 0)], -1).deliveries
    got_sdk, batched = unpack_entry("t", -1, delivered)
    assert batched and [(m.data(), str(m.message_id())) for m in got_sdk] == [
        (m.payload, f"1:2:-1:{i}") for i, m in enumerate(MESSAGES)
    ]


@pytest.mark.parametrize("data", [b"\xff\xff garbage", encode_entry("p", 1, 2, True, MESSAGES)[:-3], b"\x0a\x05ab"],
                         ids=["garbage", "torn", "short-field"])  # fmt: skip
def test_a_corrupt_entry_is_a_clear_error(data):
    with pytest.raises(InvalidArgument, match="not a message batch"):
        decode_entry(data)
    with pytest.raises(InvalidArgument, match="not a message batch"):
        publish_time(data)
    assert view_entry(data) == OpaqueEntry((Message(data),))  # delivered and peeked as one message


def test_a_pulsar_clients_entry_is_told_apart_from_an_entry_batch():
    # Pulsar's checksummed message: magic, CRC32C, metadata size, metadata ... (this one's
    # checksum is wrong: read as a Pulsar entry, refused as one)
    pulsar = PULSAR_MAGIC + b"\x12\x34\x56\x78" + b"\x00\x00\x00\x05" + b"\x0a\x01p\x10\x01" + b"payload"
    with pytest.raises(InvalidArgument, match="Pulsar entry whose checksum does not match"):
        decode_entry(pulsar)
    # 0x0e is field 1 with wire type 6, which does not exist: no EntryBatch starts so.
    for rest in (b"", b"\x01", b"\x01\x00\x00", bytes(range(256))):
        with pytest.raises(InvalidArgument):
            decode_entry(b"\x0e" + rest)


def test_an_entry_without_messages_is_seen_as_one_opaque_message():
    assert len(decode_entry(b"").messages) == 0
    assert view_entry(b"") == OpaqueEntry((Message(b""),))
    entry = encode_entry("p", 0, 5, False, MESSAGES[:1])
    assert view_entry(entry).messages[0].payload == b"one"


def test_enums_have_pulsars_names_and_the_wires_numbers():
    assert {t.name.upper(): int(t) for t in SubscriptionType} == dict(pb.SubscriptionType.items())
    assert {p.name.upper(): int(p) for p in InitialPosition} == dict(pb.InitialPosition.items())
    assert [t.name for t in SubscriptionType] == ["Exclusive", "Shared", "Failover", "Key_Shared"]
    assert wire.subscription_type(pb.KEY_SHARED) is SubscriptionType.Key_Shared
    assert wire.initial_position(pb.EARLIEST) is InitialPosition.Earliest
    with pytest.raises(InvalidArgument, match="unknown subscription type 9"):
        wire.subscription_type(9)
    with pytest.raises(InvalidArgument, match="unknown initial position 5"):
        wire.initial_position(5)


def test_deliveries_translate_to_the_wires_message_ids_and_ack_sets():
    out = wire.deliveries(
        [Delivery(Position(3, 4), b"e1", 2), Delivery(Position(3, 5), b"e2", 0, skipped=0b101, messages=3)], partition=1
    )
    assert list(out.deliveries) == [
        pb.Delivery(message_id=pb.MessageIdData(ledger_id=3, entry_id=4, partition=1, batch_index=-1), entry=b"e1", redelivery_count=2),
        pb.Delivery(
            message_id=pb.MessageIdData(ledger_id=3, entry_id=5, partition=1, batch_index=-1), entry=b"e2",
            ack_set=masks.to_bytes(0b101, 3),
        ),
    ]


def _fields(cls: type) -> set[str]:
    names = {f.name for f in dataclasses.fields(cls)}
    return names | ({"producers"} if cls is TopicStats else set())


@pytest.mark.parametrize("core,proto", [
    (TopicStats, pb.TopicStats), (PublisherStats, pb.PublisherStats),
    (SubscriptionStats, pb.SubscriptionStats), (ConsumerStats, pb.ConsumerStats),
])  # fmt: skip
def test_the_stats_have_the_wires_fields(core, proto):
    assert _fields(core) == set(proto.DESCRIPTOR.fields_by_name)


def test_topic_stats_translate_field_by_field():
    consumer = ConsumerStats("c", 5, 6, True, 7, 8, 9.5, 10.5, 11)
    sub = SubscriptionStats(
        "s", SubscriptionType.Failover, 1, 2, 3, "4:5", True, 1, [consumer], 6, 7, 8.5, 9.5, 10, "c", 11, 12, 13,
    )
    publisher = PublisherStats("p", 1, 2, 3, 4.5, 5.5, 6)
    stats = TopicStats("t", 1, 2, 3, 4, 5, 6, 7, 8.5, 9.5, 10.5, 11.5, 12, [publisher], [sub])
    out = wire.topic_stats(stats)
    for core, proto in ((stats, out), (publisher, out.publishers[0]), (sub, out.subscriptions[0]),
                        (consumer, out.subscriptions[0].consumer_stats[0])):  # fmt: skip
        for f in dataclasses.fields(core):
            if f.name not in ("publishers", "subscriptions", "consumer_stats"):
                assert getattr(proto, f.name) == getattr(core, f.name), f.name
    assert out.producers == 1 and out.subscriptions[0].type == pb.FAILOVER


def test_a_core_message_translates_to_the_wires_single_message():
    single = wire.single_message(MESSAGES[0])
    assert single.SerializeToString() == decode_entry(encode_entry("p", 7, 0, False, MESSAGES[:1])).messages[0].SerializeToString()
    decoded = decode_entry(encode_entry("p", 7, 0, False, MESSAGES[:1])).messages[0]
    assert wire.single_message(decoded) is decoded  # no copy of what is already the wire's


VERSION = (3).to_bytes(8, "big")  # a schema version as the broker gives one (a big-endian long)


def _pulsar_entry(batched: bool) -> bytes:
    """A Pulsar client's entry with ordering keys and a schema version, stored as sent."""
    import struct

    from magnetar.proto.pulsar import pulsar_api_pb2 as ppb
    from magnetar.protocol import stored

    meta = ppb.MessageMetadata(producer_name="pp", sequence_id=4, publish_time=1_700_000_000_000, schema_version=VERSION)
    if not batched:
        meta.partition_key, meta.ordering_key, meta.event_time = "k", b"\x00ord", 55
        return stored.stored_entry(meta.SerializeToString(), b"alone")
    meta.num_messages_in_batch = 2
    records = b""
    for i, key in enumerate((b"o1", b"")):
        single = ppb.SingleMessageMetadata(payload_size=2, sequence_id=4 + i, partition_key=f"k{i}")
        if key:
            single.ordering_key = key
        body = single.SerializeToString()
        records += struct.pack(">I", len(body)) + body + b"m%d" % i
    return stored.stored_entry(meta.SerializeToString(), records)


@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_a_pulsar_entry_reaches_the_sdk_with_its_ordering_keys_and_schema_version(batched: bool):
    translated = wire.sdk_entry(_pulsar_entry(batched))
    batch = pb.EntryBatch.FromString(translated)
    assert batch.schema_version == VERSION
    (delivered,) = wire.deliveries([Delivery(Position(1, 2), _pulsar_entry(batched), 0)], -1).deliveries
    got, _ = unpack_entry("t", -1, delivered)
    expected = [(b"alone", b"\x00ord")] if not batched else [(b"m0", b"o1"), (b"m1", b"")]
    assert [(m.data(), m.ordering_key()) for m in got] == expected
    assert [m.schema_version() for m in got] == [VERSION] * len(expected)


def test_a_pulsar_chunk_reaches_the_sdk_with_its_chunk_fields():
    from magnetar.proto.pulsar import pulsar_api_pb2 as ppb
    from magnetar.protocol import stored

    meta = ppb.MessageMetadata(
        producer_name="p", sequence_id=3, publish_time=1, uuid="p-3", chunk_id=1, num_chunks_from_msg=3,
        total_chunk_msg_size=30,
    )  # fmt: skip
    batch = pb.EntryBatch.FromString(wire.sdk_entry(stored.stored_entry(meta.SerializeToString(), b"part-1")))
    assert (batch.uuid, batch.chunk_id, batch.num_chunks_from_msg, batch.total_chunk_msg_size) == ("p-3", 1, 3, 30)
    assert [m.payload for m in batch.messages] == [b"part-1"]
    plain = pb.EntryBatch.FromString(wire.sdk_entry(_pulsar_entry(False)))
    assert (plain.uuid, plain.num_chunks_from_msg) == ("", 0)  # not a chunk: no chunk fields


def test_encode_entry_carries_the_schema_version_and_ordering_keys():
    sent = [dataclasses.replace(MESSAGES[0], ordering_key=b"\xffo"), MESSAGES[1]]
    entry = decode_entry(encode_entry("p", 7, 9, True, sent, VERSION))
    assert entry.schema_version == VERSION
    assert [m.ordering_key for m in entry.messages] == [b"\xffo", b""]
    assert decode_entry(encode_entry("p", 7, 9, True, sent)).schema_version == b""  # none unless given
    assert view_entry(b"\xff not an entry").schema_version == b""  # an opaque entry has none


def test_the_sdk_sends_an_ordering_key_in_the_single_message():
    as_bytes = build_message(b"x", None, None, None, None, None, 1 << 20, b"\x00k")
    as_text = build_message(b"x", None, None, None, None, None, 1 << 20, "ключ")
    assert (as_bytes.ordering_key, as_text.ordering_key) == (b"\x00k", "ключ".encode())
    assert build_message(b"x", None, None, None, None, None, 1 << 20).ordering_key == b""
    with pytest.raises(TypeError, match="ordering_key"):
        build_message(b"x", None, None, None, None, None, 1 << 20, 5)  # type: ignore[arg-type]
