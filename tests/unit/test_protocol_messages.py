"""magnetar.protocol.messages: EntryBatch entries as Pulsar's single and batch messages,
MESSAGE frames, and ack sets."""

from __future__ import annotations

import struct

import pytest

from magnetar.broker.entry import Message, decode_entry, encode_entry
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands, messages
from magnetar.protocol.checksum import crc32c
from magnetar.protocol.frames import FrameDecoder


def _records(payload: bytes) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """A batch payload split as a Pulsar client splits it."""
    out = []
    pos = 0
    while pos < len(payload):
        (size,) = struct.unpack_from(">I", payload, pos)
        single = pb.SingleMessageMetadata.FromString(payload[pos + 4 : pos + 4 + size])
        pos += 4 + size
        out.append((single, payload[pos : pos + single.payload_size]))
        pos += single.payload_size
    return out


def test_a_message_sent_alone_carries_its_fields_in_the_message_metadata() -> None:
    stored = encode_entry("p", 7, 1_700_000_000_000, False, [Message(
        b"hello", {"a": "1"}, partition_key="k", has_partition_key=True, event_time_ms=123, sequence_id=7,
        deliver_at_ms=1_800_000_000_000,
    )])  # fmt: skip
    metadata, payload = messages.metadata_and_payload(decode_entry(stored))
    assert payload == b"hello"
    assert (metadata.producer_name, metadata.sequence_id, metadata.publish_time) == ("p", 7, 1_700_000_000_000)
    assert [(kv.key, kv.value) for kv in metadata.properties] == [("a", "1")]
    assert (metadata.partition_key, metadata.event_time, metadata.deliver_at_time) == ("k", 123, 1_800_000_000_000)
    assert not metadata.HasField("num_messages_in_batch")  # a client reads it as one message


def test_a_batch_becomes_pulsar_batch_records() -> None:
    sent = [
        Message(b"one", {"x": "y"}, partition_key="k1", has_partition_key=True, event_time_ms=5, sequence_id=3),
        Message(b"", sequence_id=4),
        Message(b"three" * 100, sequence_id=5),
    ]
    metadata, payload = messages.metadata_and_payload(decode_entry(encode_entry("p", 3, 99, True, sent)))
    assert (metadata.num_messages_in_batch, metadata.sequence_id, metadata.highest_sequence_id) == (3, 3, 5)
    assert metadata.partition_key == "k1"
    records = _records(payload)
    assert [body for _, body in records] == [b"one", b"", b"three" * 100]
    first = records[0][0]
    assert ([(kv.key, kv.value) for kv in first.properties], first.partition_key, first.event_time) == ([("x", "y")], "k1", 5)
    assert [s.sequence_id for s, _ in records] == [3, 4, 5]
    assert not records[1][0].HasField("partition_key") and not records[1][0].properties


def test_a_batch_of_one_is_still_a_batch() -> None:
    metadata, payload = messages.metadata_and_payload(decode_entry(encode_entry("p", 1, 2, True, [Message(b"x", sequence_id=1)])))
    assert metadata.num_messages_in_batch == 1
    assert [body for _, body in _records(payload)] == [b"x"]


def test_a_message_frame_decodes_with_a_valid_checksum() -> None:
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    message = messages.checksummed(metadata, b"payload")
    assert message[:2] == b"\x0e\x01" and messages.is_pulsar_entry(message)
    assert struct.unpack_from(">I", message, 2)[0] == crc32c(message[6:])
    command = pb.BaseCommand(type=pb.BaseCommand.MESSAGE, message=pb.CommandMessage(
        consumer_id=4, message_id=commands.message_id(12, 34), redelivery_count=2,
    ))  # fmt: skip
    (frame,) = FrameDecoder().feed(messages.message_frame(command, message))
    assert frame.checksum_error is None and frame.has_checksum
    assert (frame.command.message.consumer_id, frame.command.message.redelivery_count) == (4, 2)
    assert frame.metadata == metadata and frame.payload == b"payload"


def test_an_entry_that_is_not_an_entry_batch_is_not_taken_for_a_pulsar_one() -> None:
    assert not messages.is_pulsar_entry(encode_entry("p", 1, 2, False, [Message(b"x")]))


@pytest.mark.parametrize("n", [1, 5, 63, 64, 65, 130])
def test_ack_sets_are_signed_little_endian_words_both_ways(n: int) -> None:
    for mask in (0, 1, (1 << n) - 1, (1 << (n - 1)), 0b1010 & ((1 << n) - 1)):
        words = messages.ack_set_words(mask, n)
        assert len(words) == (n + 63) // 64
        assert all(-(1 << 63) <= w < 1 << 63 for w in words)
        assert messages.mask_of_ack_set(words) == mask


def test_ack_set_words_match_javas_bitset() -> None:
    # BitSet with bits 0 and 63 set: toLongArray() == [Long.MIN_VALUE + 1]
    assert messages.ack_set_words((1 << 63) | 1, 64) == [-(1 << 63) + 1]
    assert messages.ack_set_words(1 << 64, 65) == [0, 1]


def test_ordering_keys_and_the_schema_version_reach_a_pulsar_consumer() -> None:
    version = (2).to_bytes(8, "big")
    alone = encode_entry("p", 1, 2, False, [Message(b"x", ordering_key=b"\x00o", sequence_id=1)], version)
    metadata, _ = messages.metadata_and_payload(decode_entry(alone))
    assert (metadata.ordering_key, metadata.schema_version) == (b"\x00o", version)
    batch = encode_entry("p", 1, 2, True, [Message(b"a", ordering_key=b"o1", sequence_id=1), Message(b"b", sequence_id=2)])
    metadata, payload = messages.metadata_and_payload(decode_entry(batch))
    assert not metadata.HasField("schema_version")  # none given: none sent
    records = _records(payload)
    assert records[0][0].ordering_key == b"o1" and not records[1][0].HasField("ordering_key")
