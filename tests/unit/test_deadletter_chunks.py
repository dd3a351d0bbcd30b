"""Dead-letter moves of chunked messages: the gathering of diverted chunks
(broker/deadletter/chunks.py), the copies of chunks (copies.py, publisher.py) and the
moves on the topic twin (moves.py), with the recording mover of test_deadletter_moves."""

from __future__ import annotations

import asyncio

import pytest
from test_deadletter_moves import HeldMover, policy, shared
from test_dispatch import Sink, settle
from test_managed_ledger_core import FakeLedgerClient, MemoryStore, open_ml

from magnetar.broker.config import BrokerConfig
from magnetar.broker.deadletter.chunks import ChunkGathering
from magnetar.broker.deadletter.copies import plan_dead_letter
from magnetar.broker.deadletter.publisher import move_chunk, move_entry
from magnetar.broker.entry import CHUNK_METADATA_ROOM, Message, decode_entry, encode_entry
from magnetar.broker.topic import PersistentTopic
from magnetar.common.compression import CompressionType
from magnetar.common.errors import MessageTooBig
from magnetar.ledger.context import LedgerClientConfig
from magnetar.managedledger.position import Position

P = [Position(3, i) for i in range(8)]


def test_gathering_hands_out_a_message_once_all_its_chunks_are_held() -> None:
    g = ChunkGathering()
    assert g.add(P[0], "p-1", 0, 3) is None
    assert g.add(P[1], "p-1", 1, 3) is None and "p-1" in g
    whole = g.add(P[2], "p-1", 2, 3)
    assert whole is not None and whole.chain == (P[0], P[1], P[2]) and whole.extra == ()
    assert "p-1" not in g


def test_gathering_follows_a_resend_from_the_first_chunk_and_keeps_the_old_copies_to_ack() -> None:
    g = ChunkGathering()
    # A producer stored chunks 0 and 1, reconnected, and sent the message again from chunk 0.
    for position, chunk_id in [(P[0], 0), (P[1], 1), (P[2], 0), (P[3], 1)]:
        assert g.add(position, "p-1", chunk_id, 3) is None
    whole = g.add(P[4], "p-1", 2, 3)
    assert whole is not None and whole.chain == (P[2], P[3], P[4]) and whole.extra == (P[0], P[1])


def test_gathering_never_hands_out_a_message_missing_a_chunk_and_drops_it() -> None:
    g = ChunkGathering()
    assert g.add(P[1], "p-1", 1, 3) is None
    assert g.add(P[2], "p-1", 2, 3) is None  # chunk 0 never diverted (acked)
    assert g.add(P[5], "q-1", 0, 2) is None
    assert g.drop("p-1") == [P[1], P[2]] and "p-1" not in g and "q-1" in g
    assert g.drop("p-1") == []


def _chunk_entry(chunk_id: int, n: int, payload: bytes, total: int, codec: int = 0) -> bytes:
    class Fields:
        uuid, num_chunks_from_msg, total_chunk_msg_size, compression, uncompressed_size = "prod-7", n, total, codec, 999

    Fields.chunk_id = chunk_id  # type: ignore[attr-defined]
    msg = Message(payload=payload, properties={"k": "v"}, partition_key="key", has_partition_key=True, sequence_id=7)
    return encode_entry("prod", 7, 1, False, [msg], chunk=Fields())  # type: ignore[arg-type]


def test_a_chunks_copy_is_a_chunk_of_the_moves_own_message_with_the_dead_letter_properties(topic) -> None:
    p = policy(topic)
    original = decode_entry(_chunk_entry(1, 3, b"part", 12, int(CompressionType.ZSTD)))
    move = plan_dead_letter(p, "s", topic.name, "3:0:-1:-1;3:2:-1:-1", original.messages[0], 1, chunk=original)
    assert move.producer_name == "__move:s:3:0:-1:-1;3:2:-1:-1" and move.sequence_id == 1
    assert move_chunk(move) == (1, 3)
    copy = decode_entry(move_entry(move, 5))
    assert (copy.uuid, copy.chunk_id, copy.num_chunks_from_msg, copy.total_chunk_msg_size) == (
        f"{move.producer_name}-1", 1, 3, 12,
    )  # fmt: skip
    assert (copy.compression, copy.uncompressed_size) == (int(CompressionType.ZSTD), 999)  # type: ignore[attr-defined]
    (single,) = copy.messages
    assert single.payload == b"part" and single.partition_key == "key"
    assert single.properties["REAL_TOPIC"] == topic.name
    assert single.properties["ORIGIN_MESSAGE_ID"] == "3:0:-1:-1;3:2:-1:-1"
    assert single.properties["DEAD_LETTER_REASON"] and single.properties["k"] == "v"


async def _publish_chunks(topic, payloads: list[bytes]) -> None:
    total = sum(map(len, payloads))
    for i, part in enumerate(payloads):
        await topic.publish("prod", _chunk_entry(i, len(payloads), part, total), 1, 7, 7, chunk=(i, len(payloads)))
    await settle()


async def _until(condition, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_a_dead_chunked_message_is_copied_chunk_by_chunk_in_order_and_acked_after_the_last(topic):
    p = (await shared(topic, HeldMover()))[1]
    mover = HeldMover(hold=p.dead_letter_topic)
    topic.mover = mover
    sub = topic.subscriptions["s"]
    a = Sink(sub, "a")
    parts = [b"aaaa", b"bbbb", b"cc"]
    await _publish_chunks(topic, parts)
    positions = [d.position for d in a.deliveries]
    assert len(positions) == 3
    sub.send_back(a.consumer, positions)  # the nack of the message: every chunk
    await mover.waiting.wait()  # the first copy is being stored ...
    await settle()
    assert not any(sub.cursor.is_acked(q) for q in positions)  # ... nothing acked yet
    mover.release.set()
    await _until(lambda: all(sub.cursor.is_acked(q) for q in positions))
    await sub.moves.close()
    origin = f"{positions[0][0]}:{positions[0][1]}:-1:-1;{positions[2][0]}:{positions[2][1]}:-1:-1"
    assert [m.message.payload for m in mover.stored] == parts
    assert [(m.chunk.chunk_id, m.chunk.num_chunks_from_msg, m.chunk.total_chunk_msg_size) for m in mover.stored] == [
        (0, 3, 10), (1, 3, 10), (2, 3, 10),
    ]  # fmt: skip
    assert {(m.producer_name, m.sequence_id, m.chunk.uuid) for m in mover.stored} == {
        (f"__move:s:{origin}", 1, f"__move:s:{origin}-1")
    }
    assert all(m.message.properties["ORIGIN_MESSAGE_ID"] == origin for m in mover.stored)
    assert len(a.deliveries) == 3  # diverted, not delivered again


async def test_chunks_whose_message_is_not_all_diverted_are_not_copied_but_delivered_again(topic):
    mover = HeldMover()
    sub, _ = await shared(topic, mover)
    sub.moves.chunk_wait_s = 0.05
    a = Sink(sub, "a")
    await _publish_chunks(topic, [b"aaaa", b"bbbb", b"cc"])
    positions = [d.position for d in a.deliveries]
    sub.ack(a.consumer, positions[:1], cumulative=False)  # chunk 0 acked, the others nacked
    sub.send_back(a.consumer, positions[1:])
    await _until(lambda: len(a.deliveries) == 5)  # handed back once the wait is over
    assert [d.position for d in a.deliveries[3:]] == positions[1:]
    assert mover.stored == []
    assert not any(sub.cursor.is_acked(q) for q in positions[1:])
    sub.send_back(a.consumer, positions[1:])  # nacked again: diverted again, never copied in part
    await _until(lambda: len(a.deliveries) == 7)
    assert mover.stored == [] and not any(sub.cursor.is_acked(q) for q in positions[1:])
    await sub.moves.close()


async def test_the_publish_path_takes_a_chunks_copy_over_the_max_message_size_as_a_chunk() -> None:
    limit = 2048
    ledgers = FakeLedgerClient(config=LedgerClientConfig(max_entry_bytes=limit + CHUNK_METADATA_ROOM))
    ml = await open_ml(ledgers, MemoryStore())
    topic = PersistentTopic("persistent://public/default/t", -1, ml, BrokerConfig(max_message_bytes=limit))
    original = decode_entry(_chunk_entry(0, 2, b"x" * limit, limit + 1))
    move = plan_dead_letter(policy(topic), "s", topic.name, "1:0:-1:-1;1:1:-1:-1", original.messages[0], 1, chunk=original)
    entry = move_entry(move, 5)
    assert limit < len(entry) <= limit + CHUNK_METADATA_ROOM
    with pytest.raises(MessageTooBig):
        await topic.publish(move.producer_name, entry, 1, 1, 1)  # as a whole message: too big
    stored = await topic.publish(move.producer_name, entry, 1, 1, 1, chunk=move_chunk(move))
    assert stored.position is not None
    await topic.close()
