"""Pulsar's batch codecs (magnetar.common.compression): Pulsar's framing byte for byte,
bounded decompression, and the SDK's compressed EntryBatch read by the broker core, the
SDK's consumer and the Pulsar door."""

from __future__ import annotations

import os
import zlib

import cramjam
import pytest

from magnetar.common import compression
from magnetar.common.compression import CompressionType, codec, compress, decompress
from magnetar.common.errors import InvalidArgument

LOG_LINES = b"".join(b'{"level":"info","msg":"request served","path":"/api/v1/items/%d","ms":%d}\n' % (i, i % 17)
                     for i in range(200))  # fmt: skip
CODECS = [CompressionType.LZ4, CompressionType.ZLib, CompressionType.ZSTD, CompressionType.SNAPPY]


def test_the_codecs_are_numbered_and_named_as_pulsar_and_pulsar_client():
    import pulsar

    from magnetar.proto.pulsar import pulsar_api_pb2 as pb

    for member in pulsar.CompressionType.__members__.values():
        assert CompressionType[member.name] == int(member)  # pulsar-client's spelling (ZLib)
    for name, number in pb.CompressionType.items():
        assert codec(name) == number  # Pulsar's protobuf spelling (ZLIB)
    assert CompressionType.ZLIB is CompressionType.ZLib


@pytest.mark.parametrize("kind", CODECS)
def test_a_payload_round_trips_and_shrinks(kind):
    packed = compress(kind, LOG_LINES)
    assert len(packed) < len(LOG_LINES) // 3
    assert decompress(kind, packed, len(LOG_LINES), len(LOG_LINES)) == LOG_LINES
    assert decompress(kind, compress(kind, b""), 0, 10) == b""


def test_the_framing_is_pulsars():
    """LZ4: a raw block without a size prefix; ZLIB: a zlib stream; ZSTD: a frame (its
    magic) at level 3; SNAPPY: raw (its varint length first), as pulsar-client writes."""
    lz4 = compress(CompressionType.LZ4, LOG_LINES)
    assert bytes(cramjam.lz4.decompress_block(lz4, output_len=len(LOG_LINES))) == LOG_LINES
    assert zlib.decompress(compress(CompressionType.ZLib, LOG_LINES)) == LOG_LINES
    zstd = compress(CompressionType.ZSTD, LOG_LINES)
    assert zstd[:4] == b"\x28\xb5\x2f\xfd" and bytes(cramjam.zstd.decompress(zstd)) == LOG_LINES
    snappy = compress(CompressionType.SNAPPY, b"a" * 300)
    assert snappy[:2] == bytes([0xAC, 0x02])  # varint 300
    assert compress(CompressionType.NONE, b"x") == b"x"


@pytest.mark.parametrize("kind", CODECS)
def test_a_zip_bomb_or_a_lying_size_is_refused_without_a_large_allocation(kind):
    bomb = compress(kind, b"\0" * 4_000_000)
    with pytest.raises(InvalidArgument, match="at most 1000000"):
        decompress(kind, bomb, 4_000_000, 1_000_000)
    with pytest.raises(InvalidArgument, match=kind.name.upper()):
        decompress(kind, bomb, 1000, 1_000_000)  # says 1,000: refused past its 1,000 bytes
    with pytest.raises(InvalidArgument, match=kind.name.upper()):
        decompress(kind, compress(kind, b"abc" * 10), 31, 100)  # says more than there is
    with pytest.raises(InvalidArgument, match=kind.name.upper()):
        decompress(kind, os.urandom(64), 500, 1000)
    with pytest.raises(InvalidArgument, match="at most"):
        decompress(kind, b"", -1, 1000)


def test_an_unknown_codec_is_refused_by_number_and_name():
    with pytest.raises(InvalidArgument, match="unknown compression type 7: one of 0 \\(NONE\\)"):
        compress(7, b"x")
    with pytest.raises(InvalidArgument, match="unknown compression type 5"):
        decompress(5, b"x", 1, 10)
    with pytest.raises(InvalidArgument, match="unknown compression type 'BROTLI'"):
        codec("BROTLI")
    assert codec("zstd") is CompressionType.ZSTD


def test_trailing_bytes_after_a_zlib_stream_are_refused():
    packed = compress(CompressionType.ZLib, b"abc") + b"junk"
    with pytest.raises(InvalidArgument, match="not one zlib stream"):
        decompress(CompressionType.ZLib, packed, 3, 10)


# -- the SDK's compressed EntryBatch --------------------------------------------------
def _sdk_entry(kind: int, n: int = 3) -> bytes:
    from magnetar.client.batching import build_op
    from magnetar.proto.v1 import broker_pb2 as pb

    messages = []
    for i in range(n):
        m = pb.SingleMessage(payload=LOG_LINES[: 100 + i], sequence_id=5 + i, event_time_ms=i + 1, ordering_key=b"o")
        m.properties["i"] = str(i)
        m.partition_key, m.has_partition_key = f"k{i}", True
        messages.append(m)
    return build_op(1, "prod", messages, [None] * n, batched=True, compression=kind).send.entry  # type: ignore[list-item]


@pytest.mark.parametrize("kind", CODECS)
def test_an_sdk_batch_is_compressed_and_read_back_by_the_core_and_the_sdk(kind):
    from magnetar.broker.entry import count_messages, decode_entry, view_entry
    from magnetar.broker.rpc import wire
    from magnetar.client.message import unpack_entry
    from magnetar.proto.v1 import broker_pb2 as pb

    data = _sdk_entry(kind)
    stored = pb.EntryBatch.FromString(data)
    assert stored.compression == kind and not stored.messages and stored.num_messages == 3
    assert LOG_LINES[:100] not in data  # the messages travel and are stored compressed
    entry = decode_entry(data)
    want = [(LOG_LINES[: 100 + i], {"i": str(i)}, f"k{i}", 5 + i, i + 1, b"o") for i in range(3)]
    got = [(m.payload, dict(m.properties), m.partition_key, m.sequence_id, m.event_time_ms, m.ordering_key)
           for m in entry.messages]  # fmt: skip
    assert got == want and (entry.producer_name, entry.sequence_id, entry.batched) == ("prod", 5, True)
    assert count_messages(data) == 3 and len(view_entry(data).messages) == 3
    delivery = pb.Delivery(entry=wire.deliveries([_delivery(data)], -1).deliveries[0].entry)
    messages, batched = unpack_entry("t", -1, delivery)
    assert batched
    assert [(m.data(), m.properties(), m.partition_key(), m.sequence_id()) for m in messages] == [w[:3] + (w[3],) for w in want]


def test_the_pulsar_door_sends_an_sdk_compressed_batch_as_a_batch_pulsar_reads():
    from magnetar.broker.entry import view_entry
    from magnetar.protocol import messages, stored

    data = _sdk_entry(CompressionType.ZSTD)
    metadata, payload = messages.metadata_and_payload(view_entry(data))
    read = stored.decode(messages.checksummed(metadata, payload))
    assert [(m.payload, m.partition_key) for m in read.messages] == [(LOG_LINES[: 100 + i], f"k{i}") for i in range(3)]


@pytest.mark.parametrize(("change", "why"), [
    (lambda b: setattr(b, "num_messages", 4), "declaring 4 messages whose compressed part holds 3"),
    (lambda b: setattr(b, "uncompressed_size", b.uncompressed_size + 1), "not the"),
    (lambda b: setattr(b, "compressed_messages", b.compressed_messages[:-3]), "LZ4"),
    (lambda b: setattr(b, "compression", 9), "unknown compression type 9"),
    (lambda b: b.messages.add(payload=b"x"), "uncompressed messages beside"),
])  # fmt: skip
def test_a_corrupt_or_lying_sdk_batch_is_refused_at_publish_and_opaque_to_readers(change, why):
    from magnetar.broker.entry import OpaqueEntry, count_messages, decode_entry, view_entry
    from magnetar.proto.v1 import broker_pb2 as pb

    batch = pb.EntryBatch.FromString(_sdk_entry(CompressionType.LZ4))
    change(batch)
    data = batch.SerializeToString()
    with pytest.raises(InvalidArgument, match=why):
        count_messages(data)
    with pytest.raises(InvalidArgument, match=why):
        decode_entry(data)
    assert isinstance(view_entry(data), OpaqueEntry)


def test_an_sdk_batch_over_the_broker_limit_uncompressed_is_refused():
    from magnetar.broker.entry import count_messages

    data = _sdk_entry(CompressionType.SNAPPY)
    with pytest.raises(InvalidArgument, match="at most 100"):
        count_messages(data, max_uncompressed=100)
    assert compression.MAX_UNCOMPRESSED_SIZE >= 64 * 1024 * 1024


def _delivery(entry: bytes):
    from magnetar.broker.consumer import Delivery

    return Delivery((3, 4), entry, 0)


def test_the_sdk_option_takes_its_own_and_pulsar_clients_members_and_refuses_others():
    import pulsar

    import magnetar
    from magnetar.client.options import PRODUCER_DEFAULTS, check_compression_type

    assert PRODUCER_DEFAULTS.compression_type is magnetar.CompressionType.NONE
    assert check_compression_type(magnetar.CompressionType.ZSTD) is CompressionType.ZSTD
    assert check_compression_type(pulsar.CompressionType.ZLib) is CompressionType.ZLib
    assert check_compression_type("SNAPPY") is CompressionType.SNAPPY
    for bad in (9, "BROTLI", 1.5, None, True):
        with pytest.raises(InvalidArgument):
            check_compression_type(bad)
