"""Pulsar's binary protocol framing (magnetar.protocol): frames byte for byte, the
streaming decoder, and every way a frame can be wrong refused with ProtocolError."""

from __future__ import annotations

import struct

import crc32c
import pytest

from magnetar.common.errors import ChecksumMismatch, ProtocolError
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.protocol.frames import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    decode_frame,
    encode_command,
    encode_payload_command,
)

SEND = pb.BaseCommand(type=pb.BaseCommand.SEND, send=pb.CommandSend(producer_id=3, sequence_id=7, num_messages=1))
METADATA = pb.MessageMetadata(producer_name="p", sequence_id=7, publish_time=1_700_000_000_000)


def test_a_simple_command_is_sizes_then_the_command() -> None:
    command = commands.ping()
    body = command.SerializeToString()
    assert encode_command(command) == struct.pack(">II", 4 + len(body), len(body)) + body
    assert body == b"\x08\x12\x92\x01\x00"  # type PING (18), an empty CommandPing (field 18)


def test_a_payload_command_carries_magic_crc32c_over_size_metadata_and_payload() -> None:
    frame = encode_payload_command(SEND, METADATA, b"hello")
    body, meta = SEND.SerializeToString(), METADATA.SerializeToString()
    checked = struct.pack(">I", len(meta)) + meta + b"hello"
    tail = struct.pack(">HI", 0x0E01, crc32c.crc32c(checked)) + checked
    assert frame == struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail


def test_a_payload_command_round_trips() -> None:
    bem = pb.BrokerEntryMetadata(broker_timestamp=5, index=9)
    for kwargs in ({}, {"checksum": False}, {"broker_entry_metadata": bem}):
        [frame] = FrameDecoder().feed(encode_payload_command(SEND, METADATA, b"hello", **kwargs))
        assert frame.command == SEND
        assert frame.metadata == METADATA
        assert frame.metadata_bytes == METADATA.SerializeToString()
        assert frame.payload == b"hello"
        assert frame.has_checksum == ("checksum" not in kwargs)
        assert frame.checksum_error is None
        assert frame.broker_entry_metadata == kwargs.get("broker_entry_metadata")


def test_frames_split_anywhere_come_out_whole_and_in_order() -> None:
    stream = b"".join([
        encode_command(commands.ping()),
        encode_payload_command(SEND, METADATA, b"x" * 300),
        encode_command(commands.error(4, pb.NotAllowedError, "no")),
    ])  # fmt: skip
    for step in (1, 2, 3, 7, 64, len(stream)):
        decoder = FrameDecoder()
        frames = []
        for i in range(0, len(stream), step):
            frames.extend(decoder.feed(stream[i : i + step]))
        assert [f.type_name for f in frames] == ["PING", "SEND", "ERROR"]
        assert frames[1].payload == b"x" * 300
        assert frames[2].command.error.request_id == 4
        assert decoder.buffered == 0


def test_a_bad_checksum_is_reported_on_the_frame_and_the_stream_goes_on() -> None:
    frame = bytearray(encode_payload_command(SEND, METADATA, b"hello"))
    frame[-1] ^= 0xFF
    decoder = FrameDecoder()
    bad, after = decoder.feed(bytes(frame) + encode_command(commands.ping()))
    assert isinstance(bad.checksum_error, ChecksumMismatch)
    assert isinstance(bad.checksum_error, ProtocolError)
    assert bad.metadata is None and bad.command.send.sequence_id == 7
    assert "checksum mismatch" in bad.checksum_error.message
    assert after.type_name == "PING"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (struct.pack(">I", DEFAULT_MAX_FRAME_SIZE + 1), "over the limit"),
        (struct.pack(">I", 0xFFFFFFFF), "over the limit"),
        (struct.pack(">I", 3) + b"abc", "too small"),
        (struct.pack(">II", 8, 100) + b"\x08\x12\x92\x01", "does not fit"),
        (struct.pack(">II", 6, 2) + b"\xff\xff", "does not parse"),
        (struct.pack(">II", 6, 2) + b"\x08\x63", "no type"),  # type 99: no such command
        (struct.pack(">II", 6, 2) + b"\x08\x15", "lacks required fields"),  # PARTITIONED_METADATA, no body
        (encode_command(commands.ping()), None),
    ],
)
def test_bad_frames_are_refused_with_a_clear_protocol_error(data: bytes, says: str | None) -> None:
    decoder = FrameDecoder()
    if says is None:  # the control: a good frame decodes
        assert decoder.feed(data)
        return
    with pytest.raises(ProtocolError, match=says):
        decoder.feed(data)
    with pytest.raises(ProtocolError):  # and stays refused: the stream cannot be followed
        decoder.feed(encode_command(commands.ping()))


def test_trailing_bytes_after_a_simple_command_are_refused() -> None:
    ping = commands.ping().SerializeToString() + b"junk"
    with pytest.raises(ProtocolError, match="4 bytes after a PING command"):
        decode_frame(struct.pack(">I", len(ping) - 4) + ping)


def test_a_payload_command_must_hold_its_metadata() -> None:
    body = SEND.SerializeToString()
    with pytest.raises(ProtocolError, match="without metadata"):
        decode_frame(struct.pack(">I", len(body)) + body)
    cut = encode_payload_command(SEND, METADATA, b"", checksum=False)
    size = len(cut) - 4 - 3
    with pytest.raises(ProtocolError, match="ends inside its metadata"):
        FrameDecoder().feed(struct.pack(">I", size) + cut[4:-3])
    no_producer = encode_payload_command(SEND, b"\x10\x01\x18\x01", b"")  # sequence id, publish time
    with pytest.raises(ProtocolError, match="lacks required fields: producer_name"):
        FrameDecoder().feed(no_producer)


def test_an_oversized_frame_is_refused_before_its_bytes_arrive() -> None:
    decoder = FrameDecoder(max_frame_size=1000)
    assert decoder.feed(struct.pack(">I", 1000)) == []  # at the limit: waits for the bytes
    decoder = FrameDecoder(max_frame_size=1000)
    with pytest.raises(ProtocolError, match="frame of 1001 bytes is over the limit of 1000"):
        decoder.feed(struct.pack(">I", 1001))
    assert decoder.buffered == 0


@pytest.mark.parametrize(("signed", "wire"), [(0, 0), (5, 5), (-1, 2**64 - 1), (2**63 - 1, 2**63 - 1), (-(2**63), 2**63)])
def test_message_ids_are_signed_in_meaning_and_unsigned_on_the_wire(signed: int, wire: int) -> None:
    assert commands.to_wire_id(signed) == wire
    assert commands.from_wire_id(wire) == signed
    data = commands.message_id(signed, signed).SerializeToString()
    parsed = pb.MessageIdData.FromString(data)
    assert parsed.ledgerId == wire
    assert commands.position_of(parsed) == (signed, signed)


def test_ids_outside_64_bits_are_refused() -> None:
    with pytest.raises(ValueError, match="not a 64-bit"):
        commands.to_wire_id(2**63)


def test_request_id_is_the_one_the_command_carries() -> None:
    lookup = pb.BaseCommand(type=pb.BaseCommand.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic="t", request_id=42))
    assert commands.request_id(lookup) == 42
    assert commands.request_id(commands.ping()) == 0
    flow = pb.BaseCommand(type=pb.BaseCommand.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=2))
    assert commands.request_id(flow) == 0
    txn = pb.BaseCommand(type=pb.BaseCommand.NEW_TXN)  # kept out: no body
    assert commands.request_id(txn) == 0


def test_builders_make_complete_commands() -> None:
    built = [
        commands.connected("Magnetar", 20, 5 << 20),
        commands.pong(),
        commands.success(1),
        commands.partitioned_metadata(2, 4),
        commands.partitioned_metadata_failed(3, pb.TopicNotFound, "gone"),
        commands.lookup(4, "pulsar://h:1", redirect=True),
        commands.lookup_failed(5, pb.ServiceNotReady, "later"),
        commands.send_error(1, 2, pb.ChecksumError, "bad"),
    ]
    for command in built:
        [frame] = FrameDecoder().feed(encode_command(command))
        assert frame.command == command
    assert built[5].lookupTopicResponse.response == pb.CommandLookupTopicResponse.Redirect
    assert commands.lookup(4, "pulsar://h:1", redirect=False).lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect


def test_the_codec_imports_no_service_code() -> None:
    """magnetar.protocol is layer-neutral: common/, the generated messages and itself."""
    import ast
    from pathlib import Path

    import magnetar.protocol

    allowed = ("magnetar.common", "magnetar.proto.pulsar", "magnetar.protocol")
    for path in Path(magnetar.protocol.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])  # fmt: skip
            for name in names:
                assert not name.startswith("magnetar") or name.startswith(allowed), f"{path.name} imports {name}"
                assert not name.startswith("grpc"), f"{path.name} imports {name}"


@pytest.mark.parametrize("ids", [(12, 34, -1), (12, 34, 3), (-1, -1, -1), (0, 0, 0), ((1 << 63) - 1, 5, 7)])
def test_a_send_receipt_frame_built_in_place_is_the_receipt_command_encoded(ids: tuple[int, int, int]) -> None:
    ledger, entry, partition = ids
    expected = encode_command(commands.send_receipt(4, 9, 11, commands.message_id(ledger, entry, partition)))
    frame = commands.send_receipt_frame(4, 9, 11, ledger, entry, partition)
    assert frame == expected
    (decoded,) = FrameDecoder().feed(frame)
    r = decoded.command.send_receipt
    assert (r.producer_id, r.sequence_id, r.highest_sequence_id) == (4, 9, 11)
    assert (commands.position_of(r.message_id), r.message_id.partition) == ((ledger, entry), partition)
