"""The consumer's delivery path with ack sets, cursor resets, seek, unsubscribe and readers.

Part pure (a partition consumer fed deliveries by hand), part against the broker twin of
test_client_sdk (what went over the wire is asserted on).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from test_client_sdk import LEDGER, _eventually

import magnetar
import magnetar.asyncio as ma
from magnetar.client.connection import ConnectionPool
from magnetar.client.options import ConsumerConfig
from magnetar.client.partition_consumer import PartitionConsumer, Queued
from magnetar.client.receive_queue import ReceiveQueue
from magnetar.common.message_id import MessageId
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import common_pb2


# -- the delivery path, by hand ---------------------------------------------------------------
def _entry(n: int, batched: bool = True) -> bytes:
    msgs = [pb.SingleMessage(payload=b"%d" % i) for i in range(n)]
    return pb.EntryBatch(producer_name="p", batched=batched, messages=msgs).SerializeToString()


def _delivery(entry: int, n: int, ack_set: bytes = b"") -> pb.Delivery:
    mid = pb.MessageIdData(ledger_id=LEDGER, entry_id=entry, partition=-1, batch_index=-1)
    return pb.Delivery(message_id=mid, entry=_entry(n), ack_set=ack_set)


@pytest.fixture
def by_hand():
    queue: ReceiveQueue[Queued] = ReceiveQueue()
    conf = ConsumerConfig(subscription_name="s", receiver_queue_size=10)
    pc = PartitionConsumer(ConnectionPool("127.0.0.1:1"), "persistent://public/default/t", -1, conf, "c", queue)
    return pc, queue


def _queued(queue: ReceiveQueue[Queued]) -> list[str]:
    out = []
    while len(queue):
        out.append(str(queue.get_blocking(0)[1].message_id()))
    return out


def test_ack_set_messages_are_not_queued_and_cost_no_permits(by_hand):
    pc, queue = by_hand
    pc._on_delivery(_delivery(0, 12, ack_set=(0b1111_1111_1110).to_bytes(2, "little")))
    assert _queued(queue) == [f"{LEDGER}:0:-1:0"]
    assert pc._taken == 0 and pc._flow == 0  # no permit went back for the 11 masked ones
    # Only message 0 is expected of the entry: acking it acks the entry.
    pc.ack(MessageId(ledger_id=LEDGER, entry_id=0, partition=-1, batch_index=0))
    assert pc.acks.take().individual == [(LEDGER, 0)]


def test_messages_acked_here_already_are_skipped_and_their_permits_go_back(by_hand):
    pc, queue = by_hand
    pc._on_delivery(_delivery(0, 8))
    assert len(_queued(queue)) == 8
    for i in range(5):
        pc.ack(MessageId(ledger_id=LEDGER, entry_id=0, partition=-1, batch_index=i))
    # Redelivered before our mask reached the broker: message 7 is masked by it, 0..4 by us.
    pc._on_delivery(_delivery(0, 8, ack_set=b"\x80"))
    assert _queued(queue) == [f"{LEDGER}:0:-1:5", f"{LEDGER}:0:-1:6"]
    assert pc._flow + pc._taken == 5  # charged for 0..4: given back


def test_cursor_reset_drops_the_queue_and_everything_of_the_old_position(by_hand):
    pc, queue = by_hand
    pc._on_delivery(_delivery(0, 3))
    pc._on_delivery(_delivery(1, 1))
    pc.ack(MessageId(ledger_id=LEDGER, entry_id=0, partition=-1, batch_index=0))
    pc.ack_cumulative(MessageId(ledger_id=LEDGER, entry_id=1))
    pc.nack(MessageId(ledger_id=LEDGER, entry_id=0, partition=-1, batch_index=1))
    pc._redeliver.append((LEDGER, 0))
    pc._on_cursor_reset()
    assert len(queue) == 0 and pc.resets == 1
    assert not pc.acks.take() and pc._nack_due == {} and pc._redeliver == []
    assert pc._flow == 10 and pc._taken == 0  # the whole receiver queue again
    pc._on_delivery(_delivery(0, 3))  # the old acks do not hide anything now
    assert len(_queued(queue)) == 3


# -- over the wire --------------------------------------------------------------------------
async def _fill(client, topic: str, n: int, batched: bool = False) -> list[MessageId]:
    producer = await client.create_producer(topic, batching_enabled=batched)
    if batched:
        return list(await asyncio.gather(*(producer.send_async(b"%d" % i, None) for i in range(n))))
    return [await producer.send(b"%d" % i) for i in range(n)]


async def test_seek_to_an_id_replays_from_there_and_drops_what_was_queued(twin, client):
    ids = await _fill(client, "seek", 5)
    consumer = await client.subscribe("seek", "s", initial_position=ma.InitialPosition.Earliest, receiver_queue_size=3)
    first = [await consumer.receive(timeout_millis=2000) for _ in range(4)]
    assert [m.data() for m in first] == [b"0", b"1", b"2", b"3"]
    await consumer.acknowledge(first[0])
    await consumer.acknowledge(first[3])  # unsent when the seek goes: flushed before it

    await consumer.seek(ids[1])
    (seek,) = twin.state.seeks
    assert seek.WhichOneof("target") == "message_id" and seek.message_id.entry_id == 1 and seek.request_id > 0
    kinds = twin.state.requests
    assert kinds[kinds.index("seek") - 1] in ("ack", "flow")
    assert "ack" in kinds[: kinds.index("seek")]
    assert consumer.partitions[0].resets == 1
    # The broker starts again at entry 1; the consumer drops that one (the seek is
    # exclusive: start_message_id_inclusive is off), as pulsar-client's.
    again = [await consumer.receive(timeout_millis=2000) for _ in range(3)]
    assert [m.data() for m in again] == [b"2", b"3", b"4"]
    flows_after = twin.state.flows[-3:]
    assert 3 in flows_after  # the whole receiver queue granted again after the reset


async def test_seek_to_a_time_and_to_earliest_latest(twin, client):
    ids = await _fill(client, "seekt", 3)
    consumer = await client.subscribe("seekt", "s", initial_position=ma.InitialPosition.Earliest)
    assert (await consumer.receive(timeout_millis=2000)).message_id() == ids[0]
    await consumer.seek(int(time.time() * 1000) + 60_000)  # after everything
    assert twin.state.seeks[-1].timestamp_ms > 0
    with pytest.raises(magnetar.Timeout):
        await consumer.receive(timeout_millis=100)
    await consumer.seek(MessageId.earliest)
    sent = twin.state.seeks[-1].message_id
    assert (sent.ledger_id, sent.entry_id) == (-1, -1)
    assert (await consumer.receive(timeout_millis=2000)).message_id() == ids[0]
    await consumer.seek(0)  # the first message published at or after 1970
    assert (await consumer.receive(timeout_millis=2000)).message_id() == ids[0]
    await consumer.seek(MessageId.latest)
    sent = twin.state.seeks[-1].message_id
    assert (sent.ledger_id, sent.entry_id) == (2**63 - 1, 2**63 - 1)
    with pytest.raises(magnetar.InvalidArgument):
        await consumer.seek(-5)
    with pytest.raises(TypeError):
        await consumer.seek("7:0")  # type: ignore[arg-type]


async def test_seek_on_a_partitioned_topic(twin, client):
    twin.state.partitions["persistent://public/default/pseek"] = 3
    consumer = await client.subscribe("pseek", "s")
    await consumer.seek(MessageId.earliest)
    assert len(twin.state.seeks) == 3  # every partition
    await consumer.seek(1234)
    assert len(twin.state.seeks) == 6
    await consumer.seek(MessageId(ledger_id=LEDGER, entry_id=0, partition=2, batch_index=-1))
    assert len(twin.state.seeks) == 7 and twin.state.seeks[-1].message_id.partition == 2
    with pytest.raises(magnetar.InvalidArgument):
        await consumer.seek(MessageId(ledger_id=LEDGER, entry_id=0, partition=5, batch_index=-1))
    with pytest.raises(magnetar.InvalidArgument):
        await consumer.seek(MessageId(ledger_id=LEDGER, entry_id=0, partition=-1, batch_index=-1))


async def test_a_refused_seek_raises_the_typed_error_and_releases_held_acks(twin, client):
    await _fill(client, "seekerr", 2)
    consumer = await client.subscribe("seekerr", "s", initial_position=ma.InitialPosition.Earliest)
    msg = await consumer.receive(timeout_millis=2000)
    twin.state.seek_error = common_pb2.Error(code="NOT_FOUND", message="no such position")
    with pytest.raises(magnetar.NotFound, match="no such position"):
        await consumer.seek(MessageId(ledger_id=LEDGER, entry_id=99))
    assert consumer.partitions[0].resets == 0
    await consumer.acknowledge(msg)
    await _eventually(lambda: twin.state.acks)


async def test_an_admin_reset_drops_the_queue_and_regrants(twin, client):
    await _fill(client, "reset", 4)
    consumer = await client.subscribe("reset", "s", initial_position=ma.InitialPosition.Earliest)
    await _eventually(lambda: consumer.queued() == 4)
    flows = len(twin.state.flows)
    twin.state.resets_to_send = 1
    async with twin.state.cond:
        twin.state.cond.notify_all()
    await _eventually(lambda: consumer.partitions[0].resets == 1)
    assert consumer.queued() == 0
    await _eventually(lambda: len(twin.state.flows) > flows)
    assert twin.state.flows[-1] == 1000


async def test_unsubscribe_deletes_the_subscription_and_closes(twin, client):
    await _fill(client, "unsub", 1)
    consumer = await client.subscribe("unsub", "s", initial_position=ma.InitialPosition.Earliest)
    assert ("persistent://public/default/unsub", "s") in twin.state.subs
    await consumer.unsubscribe()
    assert ("persistent://public/default/unsub", "s") not in twin.state.subs
    assert "unsubscribe" in twin.state.requests
    with pytest.raises(magnetar.ServiceClosed):
        await consumer.receive(timeout_millis=100)
    await asyncio.sleep(0.3)  # the stream ended: no reconnect, no new subscription
    assert ("persistent://public/default/unsub", "s") not in twin.state.subs
    assert len(twin.state.subscribes) == 1


async def test_a_refused_unsubscribe_raises_and_keeps_the_consumer(twin, client):
    await _fill(client, "unsub2", 1)
    consumer = await client.subscribe("unsub2", "s", initial_position=ma.InitialPosition.Earliest)
    twin.state.unsubscribe_error = common_pb2.Error(code="CONSUMER_BUSY", message="others are attached")
    with pytest.raises(magnetar.ConsumerBusy):
        await consumer.unsubscribe()
    assert (await consumer.receive(timeout_millis=2000)).data() == b"0"
    assert consumer.is_connected()


# -- readers ------------------------------------------------------------------------------------
async def test_reader_subscribes_non_durable_from_its_start_and_never_acks(twin, client):
    ids = await _fill(client, "rlog", 4)
    reader = await client.create_reader("rlog", ids[1], subscription_role_prefix="audit")
    (sub,) = twin.state.subscribes
    assert sub.non_durable and sub.type == pb.EXCLUSIVE and sub.subscription.startswith("audit-")
    assert (sub.start_message_id.ledger_id, sub.start_message_id.entry_id) == (LEDGER, 1)
    assert not sub.start_message_id_inclusive
    assert [(await reader.read_next(1000)).data() for _ in range(2)] == [b"2", b"3"]
    assert not await reader.has_message_available()
    await asyncio.sleep(0.25)
    assert twin.state.acks == [] and twin.state.batch_acks == []
    await reader.close()
    await _eventually(lambda: not any(name.startswith("audit-") for _, name in twin.state.subs))

    await client.create_reader("rlog", MessageId.earliest)
    assert twin.state.subscribes[-1].subscription.startswith("reader-")
    assert twin.state.subscribes[-1].start_message_id.ledger_id == -1


async def test_reader_inclusive_start_counts_the_start_message_as_available(twin, client):
    ids = await _fill(client, "rinc", 3)
    reader = await client.create_reader("rinc", ids[2], start_message_id_inclusive=True)
    assert twin.state.subscribes[-1].start_message_id_inclusive
    await _eventually(lambda: reader._consumer.queued() == 1)
    assert (await reader.read_next(1000)).message_id() == ids[2]
    assert not await reader.has_message_available()
    exclusive = await client.create_reader("rinc", ids[2])
    assert not await exclusive.has_message_available()
    latest = await client.create_reader("rinc", MessageId.latest, start_message_id_inclusive=True)
    assert await latest.has_message_available()
    assert (await latest.read_next(1000)).message_id() == ids[2]


async def test_reader_has_message_available_without_anything_queued(twin, client):
    ids = await _fill(client, "ravail", 2)
    reader = await client.create_reader("ravail", ids[0], start_message_id_inclusive=True)
    assert await reader.has_message_available()
    latest = await client.create_reader("ravail", MessageId.latest)
    assert latest._read_upto == [(LEDGER, 1)]
    assert not await latest.has_message_available()


async def test_reader_seek(twin, client):
    ids = await _fill(client, "rseek", 3)
    reader = await client.create_reader("rseek", MessageId.earliest)
    assert [(await reader.read_next(1000)).data() for _ in range(3)] == [b"0", b"1", b"2"]
    assert not await reader.has_message_available()
    await reader.seek(ids[1])
    assert await reader.has_message_available()
    assert (await reader.read_next(1000)).message_id() == ids[2]  # exclusive: the one after
    await reader.seek(MessageId.latest)
    assert not await reader.has_message_available()
    await reader.seek(MessageId.earliest)
    assert (await reader.read_next(1000)).message_id() == ids[0]


async def test_reader_resumes_after_what_it_read_when_the_broker_restarts(twin, client):
    ids = await _fill(client, "rre", 3, batched=True)  # one entry of 3
    ids += await _fill(client, "rre", 1)
    reader = await client.create_reader("rre", MessageId.earliest)
    assert [(await reader.read_next(1000)).message_id() for _ in range(2)] == ids[:2]
    await twin.restart()
    await _eventually(lambda: len(twin.state.subscribes) == 2 and reader.is_connected())
    assert (await reader.read_next(3000)).message_id() == ids[2]  # not 0 and 1 again
    resub = twin.state.subscribes[-1]
    assert (resub.start_message_id.entry_id, resub.start_message_id.batch_index) == (0, -1)
    assert resub.start_message_id_inclusive
    assert (await reader.read_next(1000)).message_id() == ids[3]
    await twin.restart()
    await _eventually(lambda: len(twin.state.subscribes) == 3)
    resub = twin.state.subscribes[-1]
    assert (resub.start_message_id.entry_id, resub.start_message_id_inclusive) == (1, False)
    with pytest.raises(magnetar.Timeout):
        await reader.read_next(200)


async def test_reader_of_a_partitioned_topic_refuses_a_specific_start(twin, client):
    twin.state.partitions["persistent://public/default/rparts"] = 2
    with pytest.raises(magnetar.InvalidArgument):
        await client.create_reader("rparts", MessageId(ledger_id=LEDGER, entry_id=0, partition=1, batch_index=-1))
    assert twin.state.subscribes == []
    reader = await client.create_reader("rparts", MessageId.earliest)
    assert len(twin.state.subscribes) == 2 and all(s.non_durable for s in twin.state.subscribes)
    await reader.close()


def _single(entry: int) -> pb.Delivery:
    mid = pb.MessageIdData(ledger_id=LEDGER, entry_id=entry, partition=-1, batch_index=-1)
    return pb.Delivery(message_id=mid, entry=_entry(1, batched=False))


@pytest.mark.parametrize("inclusive", [False, True])
def test_after_a_seek_to_an_id_what_comes_before_it_is_dropped_as_pulsar_client_does(inclusive: bool):
    """pulsar-client's startMessageIdInclusive: of the entry sought, a single message is
    dropped unless inclusive; of a batch, the messages before the index sought (and that
    one unless inclusive); an id without a batch index keeps a whole batch. A later entry
    ends the filter. What is dropped gives its permit back."""
    queue: ReceiveQueue[Queued] = ReceiveQueue()
    conf = ConsumerConfig(subscription_name="s", receiver_queue_size=10, start_message_id_inclusive=inclusive)
    pc = PartitionConsumer(ConnectionPool("127.0.0.1:1"), "persistent://public/default/t", -1, conf, "c", queue)

    def seek(target: MessageId) -> None:  # what a seek does around the broker's reset
        pc._seeking_to = target
        pc._on_cursor_reset()
        pc._seeking_to = None

    seek(MessageId(ledger_id=LEDGER, entry_id=3))
    pc._on_delivery(_single(3))
    pc._on_delivery(_single(4))
    assert _queued(queue) == ([f"{LEDGER}:3:-1:-1"] if inclusive else []) + [f"{LEDGER}:4:-1:-1"]
    assert pc._sought is None  # entry 4 is past it

    seek(MessageId(ledger_id=LEDGER, entry_id=5, partition=-1, batch_index=2))
    pc._on_delivery(_delivery(5, 5))
    first = 2 if inclusive else 3
    assert _queued(queue) == [f"{LEDGER}:5:-1:{i}" for i in range(first, 5)]
    assert pc._taken == first  # the dropped ones count as taken: their permits go back

    seek(MessageId(ledger_id=LEDGER, entry_id=5))  # no batch index: the whole batch
    pc._on_delivery(_delivery(5, 5))
    assert _queued(queue) == [f"{LEDGER}:5:-1:{i}" for i in range(5)]

    pc._on_cursor_reset()  # a reset not of our seek (an admin's): nothing is dropped
    pc._on_delivery(_single(3))
    assert _queued(queue) == [f"{LEDGER}:3:-1:-1"]
