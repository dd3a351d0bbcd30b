"""A Pulsar client's entry, stored as sent, read back by the core (magnetar.protocol.stored
through broker/entry.py): single messages, batches, compressed entries, torn and
corrupted bytes."""

from __future__ import annotations

import struct

import pytest

from magnetar.broker.entry import (
    Message,
    OpaqueEntry,
    count_messages,
    decode_entry,
    publish_time,
    view_entry,
)
from magnetar.broker.topic import delivery_time
from magnetar.common import compression
from magnetar.common.errors import InvalidArgument
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import stored
from magnetar.protocol.checksum import crc32c


def _metadata(**fields) -> pb.MessageMetadata:
    props = fields.pop("properties", {})
    fields = {"producer_name": "prod", "sequence_id": 7, "publish_time": 1_700_000_000_000} | fields
    m = pb.MessageMetadata(**fields)
    m.properties.extend(pb.KeyValue(key=k, value=v) for k, v in props.items())
    return m


def _record(payload: bytes, **fields) -> bytes:
    props = fields.pop("properties", {})
    single = pb.SingleMessageMetadata(payload_size=len(payload), **fields)
    single.properties.extend(pb.KeyValue(key=k, value=v) for k, v in props.items())
    meta = single.SerializeToString()
    return struct.pack(">I", len(meta)) + meta + payload


def test_a_single_message_is_read_from_its_metadata():
    meta = _metadata(properties={"a": "1"}, partition_key="k", event_time=123, deliver_at_time=1_700_000_005_000,
                     ordering_key=b"ok", schema_version=b"\0" * 8)  # fmt: skip
    data = stored.stored_entry(meta.SerializeToString(), b"hello")
    assert data[:2] == stored.MAGIC
    entry = decode_entry(data)
    assert (entry.producer_name, entry.sequence_id, entry.publish_time_ms, entry.batched) == ("prod", 7, 1_700_000_000_000, False)
    assert entry.schema_version == b"\0" * 8 and not entry.compressed
    [m] = entry.messages
    assert (m.payload, dict(m.properties), m.partition_key, m.has_partition_key) == (b"hello", {"a": "1"}, "k", True)
    assert (m.ordering_key, m.event_time_ms, m.sequence_id, m.deliver_at_ms) == (b"ok", 123, 7, 1_700_000_005_000)
    assert publish_time(data) == 1_700_000_000_000
    assert delivery_time(data) == 1_700_000_005_000  # the core's delayed delivery reads it


def test_a_batch_is_split_into_its_records():
    payload = (
        _record(b"one", partition_key="k1", properties={"x": "y"}, event_time=5, sequence_id=10)
        + _record(b"", null_value=True)
        + _record(b"three", partition_key="k3", sequence_id=12)
    )
    meta = _metadata(num_messages_in_batch=3, sequence_id=10, highest_sequence_id=12)
    entry = decode_entry(stored.stored_entry(meta.SerializeToString(), payload))
    assert entry.batched and entry.highest_sequence_id == 12
    got = [(m.payload, dict(m.properties), m.partition_key, m.has_partition_key, m.event_time_ms, m.sequence_id, m.null_value)
           for m in entry.messages]  # fmt: skip
    assert got == [
        (b"one", {"x": "y"}, "k1", True, 5, 10, False),
        (b"", {}, "", False, 0, 11, True),  # no sequence id of its own: the first one's + its index
        (b"three", {}, "k3", True, 0, 12, False),
    ]
    assert view_entry(stored.stored_entry(meta.SerializeToString(), payload)).messages == entry.messages


@pytest.mark.parametrize("codec", ["LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_a_compressed_batch_is_decompressed_and_split_into_its_records(codec):
    records = _record(b"one" * 50, partition_key="k1", properties={"x": "y"}, sequence_id=10) + _record(b"two" * 50)
    kind = pb.CompressionType.Value(codec)
    meta = _metadata(num_messages_in_batch=2, compression=kind, uncompressed_size=len(records), partition_key="k1")
    data = stored.stored_entry(meta.SerializeToString(), compression.compress(kind, records))
    entry = decode_entry(data)
    assert entry.compressed and entry.compression_name == codec and entry.batched
    assert entry.payload != records  # kept as sent: what a Pulsar consumer is sent
    got = [(m.payload, dict(m.properties), m.partition_key, m.sequence_id) for m in entry.messages]
    assert got == [(b"one" * 50, {"x": "y"}, "k1", 10), (b"two" * 50, {}, "", 8)]
    assert view_entry(data).messages == entry.messages
    assert count_messages(data) == 2


def test_a_compressed_delayed_message_is_delayed_and_a_compressed_batch_routes_by_its_records_keys():
    from magnetar.broker.entry import routing_key

    meta = _metadata(compression=pb.SNAPPY, uncompressed_size=4, deliver_at_time=1_700_000_009_000)
    assert delivery_time(stored.stored_entry(meta.SerializeToString(), compression.compress(4, b"late"))) == 1_700_000_009_000
    records = _record(b"a", partition_key="k1") + _record(b"b", ordering_key=b"o2") + _record(b"c")
    meta = _metadata(num_messages_in_batch=3, compression=pb.ZLIB, uncompressed_size=len(records), partition_key="k1")
    entry = view_entry(stored.stored_entry(meta.SerializeToString(), compression.compress(2, records)))
    assert [routing_key(m) for m in entry.messages] == ["k1", b"o2", ""]  # Key_Shared: each record's own key


def test_a_compressed_single_message_is_decompressed():
    meta = _metadata(compression=pb.CompressionType.ZSTD, uncompressed_size=5, partition_key="k")
    entry = decode_entry(stored.stored_entry(meta.SerializeToString(), compression.compress(3, b"hello")))
    [m] = entry.messages
    assert (m.payload, m.partition_key, entry.batched) == (b"hello", "k", False)


@pytest.mark.parametrize(("fields", "payload", "why"), [
    ({"compression": pb.LZ4, "uncompressed_size": 40}, b"\xff" * 30, "does not decompress"),
    ({"compression": pb.LZ4, "uncompressed_size": 10_000}, compression.compress(1, b"a" * 100), "not the 10000 it declares"),
    ({"compression": pb.ZLIB, "uncompressed_size": 50}, compression.compress(2, b"a" * 100), "not one zlib stream"),
    ({"compression": pb.ZSTD, "uncompressed_size": 2**30}, compression.compress(3, b"a"), "at most"),
    ({"compression": pb.SNAPPY, "uncompressed_size": 10, "num_messages_in_batch": 1},
     compression.compress(4, b"\0" * 10), "message 0 metadata lacks payload_size"),
])  # fmt: skip
def test_a_corrupt_or_lying_compressed_entry_is_refused_and_seen_as_opaque(fields, payload, why):
    data = stored.stored_entry(_metadata(**fields).SerializeToString(), payload)
    with pytest.raises(InvalidArgument, match=why):
        decode_entry(data)
    with pytest.raises(InvalidArgument, match=why):
        count_messages(data)
    assert isinstance(view_entry(data), OpaqueEntry)


def test_an_unknown_codec_number_is_refused_not_read_as_uncompressed():
    # MessageMetadata is proto2: compression=9 parses into its unknown fields.
    meta = _metadata(uncompressed_size=4).SerializeToString() + b"\x40\x09"
    data = stored.stored_entry(meta, b"abcd")
    with pytest.raises(InvalidArgument, match="unknown compression type 9"):
        decode_entry(data)
    with pytest.raises(InvalidArgument, match="unknown compression type 9"):
        stored.check_codec(pb.MessageMetadata.FromString(meta), meta)
    assert isinstance(view_entry(data), OpaqueEntry)
    stored.check_codec(_metadata(producer_name="@@"), _metadata(producer_name="@@").SerializeToString())  # 0x40 in a string


def test_the_publish_check_bounds_the_uncompressed_size_by_the_broker_limit():
    raw = b"x" * 2000
    data = stored.stored_entry(
        _metadata(compression=pb.LZ4, uncompressed_size=len(raw)).SerializeToString(), compression.compress(1, raw)
    )
    assert count_messages(data) == 1
    with pytest.raises(InvalidArgument, match="at most 1000"):
        count_messages(data, max_uncompressed=1000)


def test_a_checksum_is_added_for_a_client_below_protocol_6():
    meta = _metadata().SerializeToString()
    data = stored.stored_entry(meta, b"p")
    checked = struct.pack(">I", len(meta)) + meta + b"p"
    assert data == b"\x0e\x01" + struct.pack(">I", crc32c(checked)) + checked


def _corrupt() -> dict[str, bytes]:
    good_meta = _metadata(num_messages_in_batch=2).SerializeToString()
    two = _record(b"a") + _record(b"bb")
    good = stored.stored_entry(good_meta, two)
    flipped = bytearray(good)
    flipped[-1] ^= 1
    return {
        "torn": good[:-1],
        "bit-flip": bytes(flipped),
        "header-only": good[:6],
        "metadata-size-too-big": b"\x0e\x01" + struct.pack(">I", crc32c(b"\xff\xff\xff\xff")) + b"\xff\xff\xff\xff",
        "batch-short": stored.stored_entry(good_meta, _record(b"a")),
        "batch-record-too-long": stored.stored_entry(good_meta, _record(b"a") + _record(b"bb")[:-1]),
        "bytes-after-batch": stored.stored_entry(good_meta, two + b"x"),
        "zero-batch": stored.stored_entry(_metadata(num_messages_in_batch=0).SerializeToString(), b""),
        "metadata-garbage": stored.stored_entry(b"\xff\xff", b""),
        "metadata-missing-fields": stored.stored_entry(pb.MessageMetadata(producer_name="p").SerializePartialToString(), b""),
    }


@pytest.mark.parametrize("name", list(_corrupt()))
def test_a_corrupt_pulsar_entry_is_a_clear_error_and_delivered_opaque(name):
    data = _corrupt()[name]
    with pytest.raises(InvalidArgument, match="Pulsar"):
        decode_entry(data)
    assert view_entry(data) == OpaqueEntry((Message(data),))  # delivered and peeked as one message


def _delivered(entry: bytes):
    from magnetar.broker.consumer import Delivery
    from magnetar.broker.rpc import wire

    return wire.deliveries([Delivery((3, 4), entry, 2)], 1).deliveries[0]


def test_the_grpc_door_gives_the_sdk_a_pulsar_batch_as_an_entry_batch():
    from magnetar.client.message import unpack_entry

    payload = _record(b"one", partition_key="k1", properties={"x": "y"}, event_time=5) + _record(b"two")
    meta = _metadata(num_messages_in_batch=2, sequence_id=10, highest_sequence_id=11)
    messages, batched = unpack_entry("t-partition-1", 1, _delivered(stored.stored_entry(meta.SerializeToString(), payload)))
    assert batched
    got = [(str(m.message_id()), m.data(), m.properties(), m.partition_key(), m.event_timestamp(), m.sequence_id(),
            m.producer_name(), m.publish_timestamp(), m.redelivery_count()) for m in messages]  # fmt: skip
    assert got == [
        ("3:4:1:0", b"one", {"x": "y"}, "k1", 5, 10, "prod", 1_700_000_000_000, 2),
        ("3:4:1:1", b"two", {}, "", 0, 11, "prod", 1_700_000_000_000, 2),
    ]
    single, batched = unpack_entry("t", 1, _delivered(stored.stored_entry(_metadata(partition_key="k").SerializeToString(), b"solo")))
    assert not batched and [(str(m.message_id()), m.data(), m.partition_key()) for m in single] == [("3:4:1:-1", b"solo", "k")]


@pytest.mark.parametrize("codec", [pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY])
def test_a_compressed_pulsar_batch_reaches_the_sdk_decompressed(codec):
    from magnetar.client.message import unpack_entry

    records = _record(b"one" * 30, partition_key="k1", properties={"x": "y"}, event_time=5) + _record(b"two" * 30)
    meta = _metadata(num_messages_in_batch=2, compression=codec, uncompressed_size=len(records))
    delivery = _delivered(stored.stored_entry(meta.SerializeToString(), compression.compress(codec, records)))
    messages, batched = unpack_entry("t", 1, delivery)
    got = [(m.data(), m.properties(), m.partition_key(), m.event_timestamp(), m.sequence_id()) for m in messages]
    assert batched and got == [(b"one" * 30, {"x": "y"}, "k1", 5, 7), (b"two" * 30, {}, "", 0, 8)]


def test_a_corrupt_compressed_pulsar_entry_reaches_the_sdk_as_stored_and_is_refused_clearly():
    from magnetar.client.message import unpack_entry
    from magnetar.common.errors import MagnetarError

    meta = _metadata(num_messages_in_batch=2, compression=pb.LZ4, uncompressed_size=20)
    data = stored.stored_entry(meta.SerializeToString(), b"lz4")
    delivery = _delivered(data)
    assert delivery.entry == data
    with pytest.raises(MagnetarError, match="LZ4-compressed payload of 3 bytes that does not decompress"):
        unpack_entry("t", 1, delivery)


@pytest.mark.parametrize("name", list(_corrupt()))
def test_counting_a_corrupt_entry_refuses_what_decoding_refuses(name):
    with pytest.raises(InvalidArgument, match="Pulsar"):
        stored.count_messages(_corrupt()[name])


def test_counting_a_batch_gives_what_decoding_reads():
    batch = stored.stored_entry(_metadata(num_messages_in_batch=3).SerializeToString(),
                                _record(b"a") + _record(b"") + _record(b"ccc", partition_key="k"))  # fmt: skip
    single = stored.stored_entry(_metadata().SerializeToString(), b"one")
    records = _record(b"a") + _record(b"") + _record(b"c") + _record(b"d")
    compressed = stored.stored_entry(
        _metadata(num_messages_in_batch=4, compression=pb.LZ4, uncompressed_size=len(records)).SerializeToString(),
        compression.compress(pb.LZ4, records),
    )
    for data in (batch, single, compressed):
        assert stored.count_messages(data) == len(decode_entry(data).messages)
    assert [stored.count_messages(d) for d in (batch, single, compressed)] == [3, 1, 4]


async def test_publishing_a_pulsar_batch_checks_it_without_building_its_messages(persistent_topic, monkeypatch):
    """The publish path walks a batch's records (each one's payload size) and stores it;
    its messages are built only when something reads them (a peek, the SDK's door)."""
    built: list[int] = []
    real = stored._messages
    monkeypatch.setattr(stored, "_messages", lambda metadata, payload: built.append(1) or real(metadata, payload))
    batch = stored.stored_entry(_metadata(num_messages_in_batch=2).SerializeToString(), _record(b"a") + _record(b"bb"))
    result = await persistent_topic.publish("prod", batch, 2, 7, 8, maybe_delayed=False)
    assert result.position is not None and not built
    torn = stored.stored_entry(_metadata(num_messages_in_batch=2).SerializeToString(), _record(b"a") + _record(b"bb")[:-1])
    with pytest.raises(InvalidArgument, match="does not fit"):
        await persistent_topic.publish("prod", torn, 2, 9, 10, maybe_delayed=False)
    with pytest.raises(InvalidArgument, match="says 3 messages, its entry holds 2"):
        await persistent_topic.publish("prod", batch, 3, 11, 13, maybe_delayed=False)
    assert not built
    assert [m.payload for m in decode_entry(batch).messages] == [b"a", b"bb"] and built == [1]


def test_the_dispatchers_view_of_a_pulsar_batch_counts_it_and_builds_its_messages_only_when_read(monkeypatch):
    built: list[int] = []
    real = stored._messages
    monkeypatch.setattr(stored, "_messages", lambda metadata, payload: built.append(1) or real(metadata, payload))
    data = stored.stored_entry(_metadata(num_messages_in_batch=2).SerializeToString(),
                               _record(b"a", partition_key="k") + _record(b"bb"))  # fmt: skip
    entry = view_entry(data)
    assert len(entry.messages) == 2 and entry.batched and not built  # what a dispatcher reads of every entry
    assert [(m.payload, m.partition_key) for m in entry.messages] == [(b"a", "k"), (b"bb", "")]
    assert entry.messages[1].payload == b"bb" and built == [1]  # built once, when read
    assert entry == decode_entry(data)


async def test_an_entry_the_door_checked_is_not_checked_again_unless_it_must_be_decoded(persistent_topic, monkeypatch):
    from magnetar.broker import topic as topic_module

    counted: list[bytes] = []
    real = topic_module.count_messages
    monkeypatch.setattr(topic_module, "count_messages", lambda data, *limit: counted.append(data) or real(data, *limit))
    single = stored.stored_entry(_metadata().SerializeToString(), b"one")
    result = await persistent_topic.publish("prod", single, 1, 7, 7, maybe_delayed=False, checked=True)
    assert result.position is not None and counted == []
    await persistent_topic.publish("prod", single, 1, 8, 8, maybe_delayed=False)  # not checked by a door: checked here
    assert counted == [single]
    delayed = stored.stored_entry(_metadata(deliver_at_time=1).SerializeToString(), b"late")
    assert (await persistent_topic.publish("prod", delayed, 1, 9, 9, maybe_delayed=True, checked=True)).position
    assert counted == [single]  # decoded (for its delivery time), not counted


def test_deduplication_rebuilt_from_entries_claims_what_the_sends_claimed():
    """A take-over rebuilds deduplication from the entries: a pulsar-client batch claims its
    metadata's highest sequence id, else its own sequence id, as its SEND did (a key-based
    batch holds 0 and 12 while another key's holds 1 and 13: claiming 12 would make the
    second a resend); an EntryBatch claims its messages' highest, as the SDK's send does."""
    from magnetar.broker.entry import claimed_sequence_id, view_entry
    from magnetar.proto.v1 import broker_pb2

    key_batch = _record(b"a0", partition_key="a", sequence_id=0) + _record(b"a12", partition_key="a", sequence_id=12)
    meta = _metadata(num_messages_in_batch=2, sequence_id=0, partition_key="a")
    assert claimed_sequence_id(view_entry(stored.stored_entry(meta.SerializeToString(), key_batch))) == 0
    meta = _metadata(num_messages_in_batch=2, sequence_id=0, highest_sequence_id=12)
    assert claimed_sequence_id(view_entry(stored.stored_entry(meta.SerializeToString(), key_batch))) == 12
    sdk = broker_pb2.EntryBatch(producer_name="p", sequence_id=3, batched=True, messages=[
        broker_pb2.SingleMessage(payload=b"x", sequence_id=3), broker_pb2.SingleMessage(payload=b"y", sequence_id=9),
    ])  # fmt: skip
    assert claimed_sequence_id(view_entry(sdk.SerializeToString())) == 9
