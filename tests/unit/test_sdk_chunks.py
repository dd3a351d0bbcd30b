"""The SDK's chunked messages: splitting on the producer (client/chunks.py) and
reassembly on the consumer (ChunkedMessageAssembler), and the chunked message id."""

from __future__ import annotations

import asyncio
import itertools
import os

import pytest

from magnetar.client.chunks import (
    ChunkedMessageAssembler,
    ChunkInfo,
    build_chunk_ops,
    chunk_payload,
)
from magnetar.common.compression import CompressionType, compress
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.proto.v1 import broker_pb2 as pb


def _info(uuid: str, chunk_id: int, n: int, total: int, codec: int = 0, raw: int = 0, published: int = 0) -> ChunkInfo:
    return ChunkInfo(uuid, chunk_id, n, total, codec, raw, published)


def _id(entry: int) -> MessageId:
    return MessageId(-1, 7, entry)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_chunk_ops_cut_the_compressed_payload_and_carry_the_chunk_fields() -> None:
    payload = b"log line 42 " * 20_000
    data, parts = chunk_payload(payload, CompressionType.ZLIB, 50) or (b"", [])
    assert data == compress(CompressionType.ZLIB, payload) and b"".join(parts) == data
    assert chunk_payload(payload, CompressionType.ZLIB, len(data)) is None  # fits compressed: not chunked

    async def build() -> list[pb.SendBatch]:
        msg = pb.SingleMessage(payload=payload, sequence_id=5, properties={"k": "v"})
        ops = build_chunk_ops(itertools.count(1), "prod", msg, data, parts, CompressionType.ZLIB, asyncio.get_running_loop())
        return [op.send for op in ops]

    sends = asyncio.run(build())
    assert [s.chunk_id for s in sends] == list(range(len(parts)))
    assert {s.num_chunks_from_msg for s in sends} == {len(parts)}
    assert {(s.lowest_sequence_id, s.highest_sequence_id) for s in sends} == {(5, 5)}
    entries = [pb.EntryBatch.FromString(s.entry) for s in sends]
    assert {e.uuid for e in entries} == {"prod-5"}
    assert {(e.total_chunk_msg_size, e.uncompressed_size, e.compression) for e in entries} == {
        (len(data), len(payload), CompressionType.ZLIB)
    }
    assert b"".join(e.messages[0].payload for e in entries) == data
    assert {e.messages[0].properties["k"] for e in entries} == {"v"}


def test_reassembles_interleaved_messages_and_ignores_a_resent_chunk() -> None:
    a, b = os.urandom(30), os.urandom(20)
    asm = ChunkedMessageAssembler(10, False, 60_000)
    assert asm.add("a0", _id(1), a[:10], _info("a", 0, 3, 30)).message is None
    assert asm.add("b0", _id(2), b[:10], _info("b", 0, 2, 20)).message is None
    assert asm.add("a0", _id(3), a[:10], _info("a", 0, 3, 30)).message is None  # a resend from the start
    assert asm.add("a1", _id(4), a[10:20], _info("a", 1, 3, 30)).message is None
    assert asm.add("a1", _id(5), a[10:20], _info("a", 1, 3, 30)).message is None  # a resent chunk
    done_b = asm.add("b1", _id(6), b[10:], _info("b", 1, 2, 20))
    done_a = asm.add("a2", _id(7), a[20:], _info("a", 2, 3, 30))
    assert done_b.message == ("b0", b, ChunkMessageId(_id(2), _id(6)))
    assert done_a.message is not None
    first, payload, mid = done_a.message
    assert (first, payload) == ("a0", a)
    assert mid.first_chunk_message_id() == _id(3) and mid.last_chunk_message_id() == _id(7)
    assert set(mid.chunk_message_ids()) == {_id(e) for e in (1, 3, 4, 5, 7)}  # every copy gets acked
    assert len(asm) == 0


def test_out_of_order_chunk_delivers_nothing_of_its_message() -> None:
    wall = [1_000_000.0]
    asm = ChunkedMessageAssembler(10, False, 60_000, wall_ms=lambda: wall[0])
    asm.add("a0", _id(1), b"x" * 10, _info("a", 0, 3, 30, published=int(wall[0])))
    skipped = asm.add("a2", _id(2), b"x" * 10, _info("a", 2, 3, 30, published=int(wall[0])))
    assert skipped.message is None and skipped.ack == []  # recent: left to redelivery
    assert asm.add("a1", _id(3), b"x" * 10, _info("a", 1, 3, 30)).message is None  # its start is gone
    wall[0] += 61_000  # a chunk without its start, older than the expiry: acked
    assert asm.add("c1", _id(4), b"x", _info("c", 1, 2, 2, published=1_000_000)).ack == [_id(4)]
    assert len(asm) == 0


def test_too_many_pending_drop_the_oldest_acked_only_with_auto_ack() -> None:
    for auto_ack in (False, True):
        asm = ChunkedMessageAssembler(2, auto_ack, 0)
        asm.add("a", _id(1), b"a", _info("a", 0, 2, 2))
        asm.add("b", _id(2), b"b", _info("b", 0, 2, 2))
        dropped = asm.add("c", _id(3), b"c", _info("c", 0, 2, 2))
        assert dropped.ack == ([_id(1)] if auto_ack else [])
        assert asm.add("a", _id(4), b"a", _info("a", 1, 2, 2)).message is None  # a was dropped
        assert asm.add("b", _id(5), b"b", _info("b", 1, 2, 2)).message == ("b", b"bb", ChunkMessageId(_id(2), _id(5)))


def test_incomplete_messages_expire_and_their_chunks_are_acked() -> None:
    clock = Clock()
    asm = ChunkedMessageAssembler(10, False, 5_000, clock=clock)
    asm.add("a", _id(1), b"a", _info("a", 0, 3, 3))
    asm.add("a", _id(2), b"a", _info("a", 1, 3, 3))
    clock.now += 2
    asm.add("b", _id(3), b"b", _info("b", 0, 2, 2))
    assert asm.expire() == []
    clock.now += 3.5
    assert asm.expire() == [_id(1), _id(2)]
    assert len(asm) == 1


def test_a_whole_that_does_not_decompress_is_not_delivered_and_is_acked() -> None:
    asm = ChunkedMessageAssembler(10, False, 0)
    asm.add("a", _id(1), b"garbage!", _info("a", 0, 2, 16, CompressionType.LZ4, 100))
    done = asm.add("a", _id(2), b"garbage!", _info("a", 1, 2, 16, CompressionType.LZ4, 100))
    assert done.message is None and done.ack == [_id(1), _id(2)]


def test_chunk_message_id_prints_parses_and_serializes_as_first_and_last_chunk() -> None:
    mid = ChunkMessageId(MessageId(2, 5, 1), MessageId(2, 5, 4))
    assert str(mid) == "5:1:2:-1;5:4:2:-1"
    assert MessageId.parse(str(mid)) == mid
    assert len(mid.serialize()) == 48 and MessageId.deserialize(mid.serialize()) == mid
    assert mid == MessageId(2, 5, 4) and mid > MessageId(2, 5, 3) and hash(mid) == hash(MessageId(2, 5, 4))
    assert mid != ChunkMessageId(MessageId(2, 5, 2), MessageId(2, 5, 4))
    with pytest.raises(Exception, match="message id"):
        MessageId.parse("5:1;oops")
