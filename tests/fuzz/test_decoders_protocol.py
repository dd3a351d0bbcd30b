"""Property tests of Pulsar's binary protocol framing (magnetar.protocol.frames): any
bytes, cut anywhere, decode to frames or a ProtocolError, never anything else, and the
decoder never holds more than one frame's limit plus what one feed brought. Stored
Pulsar entries (magnetar.protocol.stored): any bytes decode or raise InvalidArgument."""

from __future__ import annotations

import struct

from fuzzsettings import FUZZ
from hypothesis import example, given
from hypothesis import strategies as st
from test_decoders import mutated

from magnetar.common.errors import InvalidArgument, ProtocolError
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands, stored
from magnetar.protocol.frames import FrameDecoder, encode_command, encode_payload_command
from magnetar.protocol.stored import stored_entry

LIMIT = 4096
U64 = st.integers(0, 2**64 - 1)
text = st.text(max_size=20)

simple_commands = st.one_of(
    st.just(commands.ping()),
    st.just(commands.pong()),
    st.builds(commands.connected, text, st.integers(0, 20), st.integers(0, 2**31 - 1)),
    st.builds(commands.error, U64, st.sampled_from(list(pb.ServerError.values())), text),
    st.builds(
        lambda t, r: pb.BaseCommand(type=pb.BaseCommand.LOOKUP, lookupTopic=pb.CommandLookupTopic(topic=t, request_id=r)),
        text, U64,
    ),
    st.builds(
        lambda t, r: pb.BaseCommand(
            type=pb.BaseCommand.PARTITIONED_METADATA, partitionMetadata=pb.CommandPartitionedTopicMetadata(topic=t, request_id=r)
        ),
        text, U64,
    ),
)  # fmt: skip
sends = st.builds(
    lambda p, s, name, payload, checksum, bem: (
        pb.BaseCommand(type=pb.BaseCommand.SEND, send=pb.CommandSend(producer_id=p, sequence_id=s)),
        pb.MessageMetadata(producer_name=name, sequence_id=s, publish_time=1),
        payload, checksum, bem,
    ),
    U64, U64, text, st.binary(max_size=200), st.booleans(),
    st.none() | st.builds(pb.BrokerEntryMetadata, broker_timestamp=U64, index=U64),
)  # fmt: skip


def _encode_send(send: tuple) -> bytes:
    command, metadata, payload, checksum, bem = send
    return encode_payload_command(command, metadata, payload, checksum=checksum, broker_entry_metadata=bem)


frames = st.one_of(simple_commands.map(encode_command), sends.map(_encode_send))
streams = st.lists(frames, min_size=1, max_size=4).map(b"".join)


def _feed_in_pieces(data: bytes, cuts: list[int]) -> tuple[list[object], ProtocolError | None]:
    decoder = FrameDecoder(max_frame_size=LIMIT)
    out: list[object] = []
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        piece = data[start:end]
        try:
            out.extend(decoder.feed(piece))
        except ProtocolError as exc:
            assert decoder.buffered == 0
            return out, exc
        assert decoder.buffered <= LIMIT + 4 + len(piece)
    return out, None


@FUZZ
@given(st.one_of(st.binary(max_size=300), mutated(streams)), st.lists(st.integers(0, 2**16), max_size=8))
@example(struct.pack(">I", 0xFFFFFFFF), [])
@example(struct.pack(">II", 6, 2) + b"\x08\x63", [1])
def test_any_bytes_cut_anywhere_decode_or_raise_protocol_error(data: bytes, cuts: list[int]) -> None:
    _feed_in_pieces(data, cuts)  # anything but ProtocolError fails the test


@FUZZ
@given(st.lists(st.one_of(simple_commands.map(lambda c: ("simple", c)), sends.map(lambda s: ("send", s))), min_size=1, max_size=5),
       st.lists(st.integers(0, 2**16), max_size=8))
def test_frames_round_trip_whatever_the_cuts(items: list[tuple[str, object]], cuts: list[int]) -> None:
    data = b"".join(encode_command(x) if kind == "simple" else _encode_send(x) for kind, x in items)  # type: ignore[arg-type]
    decoded, error = _feed_in_pieces(data, cuts)
    assert error is None
    assert len(decoded) == len(items)
    for frame, (kind, x) in zip(decoded, items, strict=True):
        if kind == "simple":
            assert frame.command == x  # type: ignore[attr-defined]
        else:
            command, metadata, payload, checksum, bem = x  # type: ignore[misc]
            assert frame.command == command  # type: ignore[attr-defined]
            assert frame.metadata == metadata and frame.payload == payload  # type: ignore[attr-defined]
            assert frame.has_checksum == checksum and frame.checksum_error is None  # type: ignore[attr-defined]
            assert (frame.broker_entry_metadata if bem is not None else None) == bem  # type: ignore[attr-defined]


@FUZZ
@given(st.integers(LIMIT + 1, 2**32 - 1))
def test_a_size_over_the_limit_is_refused_from_its_four_bytes(size: int) -> None:
    decoder = FrameDecoder(max_frame_size=LIMIT)
    try:
        decoder.feed(struct.pack(">I", size))
    except ProtocolError as exc:
        assert "over the limit" in exc.message
    else:
        raise AssertionError("a size over the limit was accepted")


# -- stored Pulsar entries (magnetar.protocol.stored) -------------------------------------------
def _record(payload: bytes, key: str | None) -> bytes:
    single = pb.SingleMessageMetadata(payload_size=len(payload))
    if key is not None:
        single.partition_key = key
    meta = single.SerializeToString()
    return struct.pack(">I", len(meta)) + meta + payload


stored_entries = st.one_of(
    st.builds(
        lambda name, seq, payload: stored_entry(pb.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=1).SerializeToString(), payload),
        text, U64, st.binary(max_size=100),
    ),
    st.lists(st.tuples(st.binary(max_size=40), st.none() | text), min_size=1, max_size=5).map(
        lambda records: stored_entry(
            pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=len(records)).SerializeToString(),
            b"".join(_record(p, k) for p, k in records),
        )
    ),
)  # fmt: skip


@FUZZ
@given(st.one_of(st.binary(max_size=300).map(lambda b: b"\x0e\x01" + b), mutated(stored_entries)))
def test_a_stored_pulsar_entry_decodes_or_raises_invalid_argument(data: bytes) -> None:
    try:
        entry = stored.decode(data)
    except InvalidArgument:
        return
    assert all(isinstance(m.payload, bytes) for m in entry.messages)
    assert len(entry.messages) == (entry.metadata.num_messages_in_batch if entry.batched else 1)


@FUZZ
@given(stored_entries)
def test_a_stored_pulsar_entry_decodes_whole(data: bytes) -> None:
    entry = stored.decode(data)
    assert entry.messages and stored.stored_entry(
        entry.metadata.SerializeToString(), entry.payload
    ) == data  # the same bytes: nothing lost on the way in
