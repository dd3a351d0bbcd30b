"""``batching_type``: the SDK producer's Default and KeyBased batch containers, against the
in-memory twin broker (what goes over the wire) and directly."""

from __future__ import annotations

import asyncio

import pytest

import magnetar
import magnetar.asyncio as ma
from magnetar.client.batching import KeyBasedBatchContainer, batch_key
from magnetar.common.errors import InvalidConfiguration
from magnetar.proto.v1 import broker_pb2 as pb


def _keys(entry: pb.EntryBatch) -> list[bytes]:
    return [batch_key(m) for m in entry.messages]


async def test_key_based_batches_hold_one_key_each_in_send_order(twin, client):
    producer = await client.create_producer(
        "kb", batching_type=ma.BatchingType.KeyBased, batching_max_publish_delay_ms=1000, batching_max_messages=100,
    )  # fmt: skip
    # Ordering key first, else partition key, else none (those share a batch).
    sends = [
        ("a", None), ("b", None), ("a", None), (None, None), ("b", "x"), ("c", "x"), ("a", None), (None, None),
    ]  # fmt: skip
    futs = [
        producer.send_async(f"m{i}".encode(), None, partition_key=pk, ordering_key=ok)
        for i, (pk, ok) in enumerate(sends)
    ]  # fmt: skip
    await producer.flush()
    ids = await asyncio.gather(*futs)

    entries = twin.state.entry_batches("kb")
    assert sorted(_keys(e)[0] for e in entries) == [b"", b"a", b"b", b"x"]
    for e in entries:
        assert e.batched and len(set(_keys(e))) == 1  # one key per batch
        seqs = [m.sequence_id for m in e.messages]
        assert seqs == sorted(seqs)  # a key's messages in send order
    got = {m.payload for e in entries for m in e.messages}
    assert got == {f"m{i}".encode() for i in range(len(sends))}  # each once
    # Each message's id names the entry and the index its key's batch gave it.
    by_payload = {m.payload: (i, j) for i, e in enumerate(entries) for j, m in enumerate(e.messages)}
    assert [(mid.entry_id(), mid.batch_index()) for mid in ids] == [by_payload[f"m{i}".encode()] for i in range(len(sends))]
    # Every send claims only its highest sequence id, and those rise from send to send:
    # the broker's deduplication takes none of the interleaved batches for a resend.
    claimed = [(s.lowest_sequence_id, s.highest_sequence_id) for _, s in twin.state.batches]
    assert all(lo == hi for lo, hi in claimed)
    assert [hi for _, hi in claimed] == sorted({hi for _, hi in claimed})
    assert [hi for _, hi in claimed] == [max(m.sequence_id for m in e.messages) for e in entries]


async def test_key_based_limits_count_all_keys_together(twin, client):
    producer = await client.create_producer(
        "kb-limits", batching_type=magnetar.BatchingType.KeyBased, batching_max_messages=4,
        batching_max_publish_delay_ms=1000,
    )  # fmt: skip
    futs = [producer.send_async(b"x", None, partition_key=f"k{i % 2}") for i in range(8)]
    await asyncio.gather(*futs)  # full twice: no timer needed
    sizes = [len(e.messages) for e in twin.state.entry_batches("kb-limits")]
    assert sizes == [2, 2, 2, 2]


async def test_default_batching_mixes_keys_in_one_batch(twin, client):
    producer = await client.create_producer("default", batching_max_publish_delay_ms=1000, batching_max_messages=4)
    futs = [producer.send_async(b"x", None, partition_key=f"k{i}") for i in range(4)]
    await asyncio.gather(*futs)
    (entry,) = twin.state.entry_batches("default")
    assert _keys(entry) == [b"k0", b"k1", b"k2", b"k3"]


async def test_pulsar_client_batching_type_is_taken_and_bad_values_refused(client):
    import pulsar
    producer = await client.create_producer("kb-pulsar-name", batching_type=pulsar.BatchingType.KeyBased)
    await producer.close()
    with pytest.raises(InvalidConfiguration, match="batching_type"):
        await client.create_producer("kb-bad", batching_type="ByKey")


def test_key_based_container_drains_batches_in_order_of_their_highest_sequence_id():
    loop = asyncio.new_event_loop()
    try:
        box = KeyBasedBatchContainer(max_messages=100, max_bytes=1 << 20)
        for seq, key in enumerate(["A", "B", "B", "A", "A"]):  # A: 0, 3, 4; B: 1, 2
            box.add(pb.SingleMessage(sequence_id=seq, partition_key=key, has_partition_key=True), loop.create_future())
        batches = box.drain_batches()
        assert [[m.sequence_id for m in msgs] for msgs, _ in batches] == [[1, 2], [0, 3, 4]]
        assert len(box) == 0 and box.drain_batches() == []
    finally:
        loop.close()
