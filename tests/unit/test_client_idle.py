"""An idle SDK consumer costs no CPU: its writer runs only when something is to send now
or is due (grouped acks, negative acks, ack timeouts, incomplete chunked messages), on a
timer armed for the earliest of them, never on a period (against the broker twin of
test_client_sdk; what went over the wire is asserted on)."""

from __future__ import annotations

import asyncio
import time

from test_client_sdk import _eventually

import magnetar.asyncio as ma
from magnetar.client.acks import AckTracker
from magnetar.client.chunks import ChunkedMessageAssembler, ChunkInfo
from magnetar.client.partition_consumer import PartitionConsumer
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb


def _count_writes(pc: PartitionConsumer) -> list[float]:
    """The times the consumer's writer ran ``write_pending`` from now on."""
    runs: list[float] = []
    write_pending = pc.write_pending

    async def counted(*args, **kwargs):
        runs.append(time.monotonic())
        return await write_pending(*args, **kwargs)

    pc.write_pending = counted  # type: ignore[method-assign]
    return runs


async def _settled(pc: PartitionConsumer) -> None:
    """Until the first stream's permits went out (the writer's first run is over)."""
    await _eventually(lambda: pc._flow == 0 and not pc._wakeup.is_set() and not pc._write_lock.locked())


async def test_idle_consumers_never_wake(twin, client):
    consumers = [await client.subscribe(f"idle-{i}", "s") for i in range(20)]
    partitions = [c.partitions[0] for c in consumers]
    for pc in partitions:
        await _settled(pc)
    runs = [_count_writes(pc) for pc in partitions]
    await asyncio.sleep(0.35)  # three ack-group periods: a periodic writer would have run 3 times each
    assert [len(r) for r in runs] == [0] * len(partitions)
    assert all(pc._timer is None for pc in partitions)  # and none is armed


async def test_grouped_acks_go_out_one_group_time_after_the_first_ack(twin, client):
    consumer = await client.subscribe("grouped", "s", initial_position=ma.InitialPosition.Earliest)
    producer = await client.create_producer("grouped", batching_enabled=False)
    for i in range(3):
        await producer.send(b"%d" % i)
    msgs = [await consumer.receive(timeout_millis=2000) for _ in range(3)]
    pc = consumer.partitions[0]
    await _settled(pc)
    runs = _count_writes(pc)
    group_s = pc.conf.ack_group_time_ms / 1000
    started = time.monotonic()
    for msg in msgs:
        await consumer.acknowledge(msg)
    await _eventually(lambda: twin.state.acks)
    took = time.monotonic() - started
    assert [ids for _, _, ids in twin.state.acks] == [[(7, 0), (7, 1), (7, 2)]]  # one grouped ack
    assert group_s * 0.9 <= took < group_s + 1.0
    assert len(runs) == 1  # the timer's run, nothing before it
    await asyncio.sleep(group_s * 2)
    assert len(runs) == 1 and pc._timer is None  # nothing left to send: no timer


async def test_a_nack_is_redelivered_after_its_delay_by_one_timed_run(twin, client):
    consumer = await client.subscribe(
        "nacked", "s", initial_position=ma.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=300
    )
    producer = await client.create_producer("nacked", batching_enabled=False)
    await producer.send(b"x")
    msg = await consumer.receive(timeout_millis=2000)
    pc = consumer.partitions[0]
    await _settled(pc)
    runs = _count_writes(pc)
    started = time.monotonic()
    await consumer.negative_acknowledge(msg)
    again = await consumer.receive(timeout_millis=3000)
    assert again.message_id() == msg.message_id()
    assert 0.3 <= time.monotonic() - started < 1.3
    assert twin.state.redeliveries == [[(7, 0)]]
    assert len(runs) == 1 and runs[0] - started >= 0.3  # woken once, when it was due


async def test_an_ack_timeout_redelivers_after_the_timeout_by_one_timed_run(twin, client):
    consumer = await client.subscribe(
        "timed-out", "s", initial_position=ma.InitialPosition.Earliest, unacked_messages_timeout_ms=300
    )
    pc = consumer.partitions[0]
    await _settled(pc)
    runs = _count_writes(pc)
    producer = await client.create_producer("timed-out", batching_enabled=False)
    started = time.monotonic()
    await producer.send(b"x")
    msg = await consumer.receive(timeout_millis=2000)
    again = await consumer.receive(timeout_millis=3000)  # not acked: it comes again
    assert again.message_id() == msg.message_id()
    assert 0.3 <= time.monotonic() - started < 1.3
    assert twin.state.redeliveries == [[(7, 0)]]
    assert runs and runs[0] - started >= 0.3  # not woken before the timeout


def test_the_oldest_unacked_entry_is_the_first_delivered_still_unacked():
    acks = AckTracker()
    assert acks.oldest_unacked() is None
    acks.on_delivery((7, 0), 1, False, 10.0, True)
    acks.on_delivery((7, 1), 1, False, 11.0, True)
    acks.on_delivery((7, 0), 1, False, 12.0, True)  # a redelivery keeps its first time
    assert acks.oldest_unacked() == 10.0
    acks.ack_cumulative(_mid(7, 0))
    assert acks.oldest_unacked() == 11.0
    assert acks.expired(11.5, 0.5) == [(7, 1)]
    assert acks.oldest_unacked() is None


def test_the_next_chunk_expiry_is_the_oldest_incomplete_messages():
    now = [100.0]
    chunks = ChunkedMessageAssembler(0, False, 2000, clock=lambda: now[0])
    assert chunks.next_expiry() is None
    chunks.add(object(), _mid(7, 0), b"a", ChunkInfo("u1", 0, 2, 2, 0, 0, 0))
    now[0] = 101.0
    chunks.add(object(), _mid(7, 1), b"b", ChunkInfo("u2", 0, 2, 2, 0, 0, 0))
    assert chunks.next_expiry() == 102.0
    now[0] = 102.0
    assert chunks.expire() == [_mid(7, 0)]
    assert chunks.next_expiry() == 103.0
    assert ChunkedMessageAssembler(0, False, 0).next_expiry() is None  # 0: never expires


def _mid(ledger: int, entry: int) -> MessageId:
    return MessageId(ledger_id=ledger, entry_id=entry)


async def test_an_incomplete_chunked_message_expires_by_one_timed_run(twin, client):
    consumer = await client.subscribe("chunky", "s", expire_time_of_incomplete_chunked_message_ms=300)
    pc = consumer.partitions[0]
    await _settled(pc)
    runs = _count_writes(pc)
    first_chunk = pb.EntryBatch(
        producer_name="p", uuid="p-0", chunk_id=0, num_chunks_from_msg=2, total_chunk_msg_size=2,
        publish_time_ms=int(time.time() * 1000), messages=[pb.SingleMessage(payload=b"a")],
    )  # fmt: skip
    started = time.monotonic()
    pc._on_delivery(pb.Delivery(
        message_id=pb.MessageIdData(ledger_id=7, entry_id=0, partition=-1, batch_index=-1),
        entry=first_chunk.SerializeToString(),
    ))  # fmt: skip
    await _eventually(lambda: twin.state.acks)  # its last chunk never comes: dropped, its chunk acked
    assert 0.3 <= time.monotonic() - started < 1.3
    assert [ids for _, _, ids in twin.state.acks] == [[(7, 0)]]
    assert runs and runs[0] - started >= 0.3  # not woken before it expired
