"""Chunked messages in the broker core: every chunk carries its message's sequence id,
so deduplication goes by the last chunk alone (stored chunks 1..n-1 are not resends), a
broker taking a topic over does not count a message whose last chunk it never stored,
and the Pulsar door's chunk check refuses chunk fields that make no chunk. Over a real
ManagedLedger on the in-memory twins."""

from __future__ import annotations

import pytest
from test_dedup_snapshot import Owner
from test_managed_ledger_core import FakeLedgerClient, MemoryStore

from magnetar.broker.entry import decode_entry, is_partial_chunk
from magnetar.broker.topic import PersistentTopic
from magnetar.common.errors import InvalidArgument, MessageTooBig
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import stored


def chunk_meta(seq: int, chunk_id: int, n: int, total: int = 100, producer: str = "p") -> pb.MessageMetadata:
    return pb.MessageMetadata(
        producer_name=producer, sequence_id=seq, publish_time=1, uuid=f"{producer}-{seq}",
        chunk_id=chunk_id, num_chunks_from_msg=n, total_chunk_msg_size=total,
    )  # fmt: skip


def chunk(seq: int, chunk_id: int, n: int) -> bytes:
    return stored.stored_entry(chunk_meta(seq, chunk_id, n).SerializeToString(), b"c%d" % chunk_id)


async def send_chunk(topic: PersistentTopic, seq: int, chunk_id: int, n: int) -> bool:
    """Publish one chunk as the Pulsar door does; True when stored (False: a resend)."""
    result = await topic.publish("p", chunk(seq, chunk_id, n), 1, seq, seq, maybe_delayed=False, chunk=(chunk_id, n))
    return not result.duplicate


async def test_every_chunk_of_a_message_is_stored_and_a_resent_last_chunk_is_not():
    topic = await Owner(FakeLedgerClient(), MemoryStore()).take_over()
    assert [await send_chunk(topic, 0, i, 3) for i in range(3)] == [True, True, True]
    assert [await send_chunk(topic, 1, i, 2) for i in range(2)] == [True, True]
    assert await send_chunk(topic, 1, 1, 2) is False  # the last chunk again: the message is stored
    entries = await topic.ml.read_entries(topic.ml.first_position, 10, 1 << 30)
    assert [(decode_entry(d).sequence_id, decode_entry(d).chunk_id) for _, d in entries] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]  # fmt: skip


async def test_a_new_owner_does_not_count_a_message_whose_last_chunk_was_not_stored():
    client, store = FakeLedgerClient(), MemoryStore()
    first = await Owner(client, store).take_over()
    assert [await send_chunk(first, 0, i, 2) for i in range(2)] == [True, True]
    assert [await send_chunk(first, 1, i, 3) for i in range(2)] == [True, True]  # the owner dies here
    second = await Owner(client, store).take_over()
    assert second._dedup.persisted["p"] == 0
    assert await send_chunk(second, 1, 2, 3)  # the producer's resend completes message 1
    assert await send_chunk(second, 0, 1, 2) is False


def test_the_door_checks_chunk_fields():
    assert stored.check_chunk(pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), 10, 64) is None
    assert stored.check_chunk(chunk_meta(0, 2, 3), 64, 64) == (2, 3)
    for meta, error in [
        (chunk_meta(0, 3, 3), "chunk ids are 0 to 2"),
        (chunk_meta(0, -1, 3), "chunk ids are 0 to 2"),
        (pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_chunks_from_msg=2), "without the uuid"),
        (chunk_meta(0, 0, 2, total=5), "holds 10 bytes of a message of 5"),
    ]:
        with pytest.raises(InvalidArgument, match=error):
            stored.check_chunk(meta, 10, 64)
    batched = chunk_meta(0, 0, 2)
    batched.num_messages_in_batch = 1
    with pytest.raises(InvalidArgument, match="cannot be a batch"):
        stored.check_chunk(batched, 10, 64)
    with pytest.raises(MessageTooBig):
        stored.check_chunk(chunk_meta(0, 0, 2), 65, 64)


def test_partial_chunks_are_told_from_last_chunks_and_ordinary_entries():
    assert [is_partial_chunk(decode_entry(chunk(0, i, 3))) for i in range(3)] == [True, True, False]
    plain = stored.stored_entry(pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1).SerializeToString(), b"x")
    assert is_partial_chunk(decode_entry(plain)) is False


def sdk_chunk(seq: int, chunk_id: int, n: int, uuid: str = "", batched: bool = False) -> bytes:
    """A chunk as the Magnetar SDK sends it through the gRPC door (an EntryBatch)."""
    from magnetar.proto.v1 import broker_pb2 as v1

    return v1.EntryBatch(
        producer_name="p", sequence_id=seq, publish_time_ms=1, batched=batched, uuid=uuid or f"p-{seq}",
        chunk_id=chunk_id, num_chunks_from_msg=n, total_chunk_msg_size=100,
        messages=[v1.SingleMessage(payload=b"c%d" % chunk_id, sequence_id=seq)],
    ).SerializeToString()  # fmt: skip


async def test_sdk_chunks_through_the_grpc_door_are_deduplicated_by_the_last_chunk():
    """As the gRPC door publishes a SendBatch with chunk fields (checked=False: the
    entry is decoded and its chunk fields must agree with the send's)."""
    topic = await Owner(FakeLedgerClient(), MemoryStore()).take_over()

    async def send(seq: int, chunk_id: int, n: int, data: bytes | None = None) -> bool:
        entry = sdk_chunk(seq, chunk_id, n) if data is None else data
        result = await topic.publish("p", entry, 1, seq, seq, maybe_delayed=False, chunk=(chunk_id, n))
        return not result.duplicate

    assert [await send(0, i, 3) for i in range(3)] == [True, True, True]
    assert [await send(0, i, 3) for i in range(3)] == [True, True, False]  # a resend: the last is recognised
    for data, error in [
        (sdk_chunk(1, 1, 3), "the send says chunk 0 of 3, its entry chunk 1 of 3"),
        (sdk_chunk(1, 0, 3, batched=True), "never a batch"),
    ]:
        with pytest.raises(InvalidArgument, match=error):
            await send(1, 0, 3, data)
    entries = await topic.ml.read_entries(topic.ml.first_position, 10, 1 << 30)
    assert [decode_entry(d).chunk_id for _, d in entries] == [0, 1, 2, 0, 1]  # nothing of the refused ones
