"""The client SDK against an in-memory twin of the broker (a real grpc.aio server).

The twin keeps each topic as a list of entries in one ledger (id 7), deduplicates by
producer name and sequence id, dispatches by permits (masking acked messages of a batch
out with the delivery's ack_set, as the broker does), seeks, unsubscribes, and records
every batch, ack, batch-index ack, redelivery request, seek and subscribe it gets, so
tests assert on what went over the wire.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

import grpc
import pytest

import magnetar
import magnetar.asyncio as ma
from magnetar.common.errors import NotConnected, TopicNotFound
from magnetar.common.grpcutil import abort
from magnetar.common.keyhash import partition_for_key
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import broker_pb2_grpc as pb_grpc
from magnetar.proto.v1 import common_pb2

LEDGER = 7


@dataclass
class Sub:
    next_read: int
    consumer: object | None = None
    acked: set[int] = field(default_factory=set)
    mark_delete: int = -1
    delivered: set[int] = field(default_factory=set)
    redeliver: list[int] = field(default_factory=list)
    deliveries: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    batch_acked: dict[int, int] = field(default_factory=dict)  # entry -> acked mask

    def is_acked(self, idx: int) -> bool:
        return idx <= self.mark_delete or idx in self.acked

    def move_to(self, idx: int) -> None:
        """A seek: everything before ``idx`` acked, nothing after."""
        self.next_read, self.mark_delete = idx, idx - 1
        self.acked.clear()
        self.delivered.clear()
        self.redeliver.clear()
        self.batch_acked.clear()


class TwinState:
    """What the twin stores; survives a twin restart (like bookies survive a broker)."""

    def __init__(self) -> None:
        self.entries: dict[str, list[bytes]] = defaultdict(list)
        self.partitions: dict[str, int] = {}
        self.missing: set[str] = set()
        self.last_seq: dict[tuple[str, str], int] = {}
        self.seq_entry: dict[tuple[str, str, int], int] = {}
        self.batches: list[tuple[str, pb.SendBatch]] = []
        self.subs: dict[tuple[str, str], Sub] = {}
        self.acks: list[tuple[str, int, list[tuple[int, int]]]] = []
        self.redeliveries: list[list[tuple[int, int]]] = []
        self.flows: list[int] = []
        self.batch_acks: list[tuple[int, int, bytes]] = []  # (entry, batch size, ack_set)
        self.requests: list[str] = []  # kinds of consume requests, in arrival order
        self.seeks: list[pb.Seek] = []
        self.subscribes: list[pb.Subscribe] = []
        self.deliveries: list[pb.Delivery] = []
        self.seek_error: common_pb2.Error | None = None
        self.unsubscribe_error: common_pb2.Error | None = None
        self.reconsume_error: common_pb2.Error | None = None  # the answer to a ReconsumeLater
        self.resets_to_send = 0  # CursorResets pushed without a seek (an admin reset)
        self.hold_receipts = False
        self.stall_produce = False  # the next produce stream reads nothing after its open ...
        self.cut_stalled = asyncio.Event()  # ... until this is set; then it ends (retriable)
        self.producers = 0
        self.cond = asyncio.Condition()

    def entry_batches(self, topic: str) -> list[pb.EntryBatch]:
        return [pb.EntryBatch.FromString(e) for e in self.entries[_full(topic)]]


def _full(topic: str) -> str:
    return str(TopicName.parse(topic))


def _mid(idx: int, topic: str) -> pb.MessageIdData:
    return pb.MessageIdData(
        ledger_id=LEDGER, entry_id=idx, partition=TopicName.parse(topic).partition_index, batch_index=-1
    )


class BrokerTwin(pb_grpc.BrokerServicer):
    def __init__(self, state: TwinState, address: str) -> None:
        self.st = state
        self.address = address

    async def Lookup(self, request, context):
        return pb.LookupResponse(broker_address=self.address, owned_here=True)

    async def GetPartitionedTopicMetadata(self, request, context):
        if request.topic in self.st.missing:
            await abort(context, TopicNotFound(f"topic {request.topic} does not exist"))
        return pb.PartitionedTopicMetadata(partitions=self.st.partitions.get(request.topic, 0))

    async def GetLastMessageId(self, request, context):
        n = len(self.st.entries[request.topic])
        return pb.GetLastMessageIdResponse(
            message_id=pb.MessageIdData(ledger_id=LEDGER if n else -1, entry_id=n - 1, partition=-1, batch_index=-1)
        )

    async def Produce(self, request_iterator, context):
        st = self.st
        topic = name = ""
        async for req in request_iterator:
            if req.HasField("open"):
                topic = req.open.topic
                st.producers += 1
                name = req.open.producer_name or f"twin-{st.producers}"
                last = st.last_seq.get((topic, name), -1)
                yield pb.ProduceResponse(opened=pb.ProducerOpened(producer_name=name, last_sequence_id=last))
                if st.stall_produce:  # flow control fills: the producer's writes wait
                    await st.cut_stalled.wait()
                    st.stall_produce = False
                    yield pb.ProduceResponse(closed=common_pb2.Error(code=NotConnected.code, message="cut", retriable=True))
                    return
                continue
            sends = [req.send] if req.HasField("send") else list(req.sends.batches)
            for send in sends:
                st.batches.append((topic, send))
                if send.highest_sequence_id <= st.last_seq.get((topic, name), -1):
                    idx = st.seq_entry.get((topic, name, send.lowest_sequence_id))
                    receipt = pb.SendReceipt(request_id=send.request_id, duplicate=True)
                    if idx is not None:
                        receipt.message_id.CopyFrom(_mid(idx, topic))
                else:
                    entries = st.entries[topic]
                    idx = len(entries)
                    entries.append(send.entry)
                    st.last_seq[(topic, name)] = send.highest_sequence_id
                    st.seq_entry[(topic, name, send.lowest_sequence_id)] = idx
                    async with st.cond:
                        st.cond.notify_all()
                    receipt = pb.SendReceipt(request_id=send.request_id, message_id=_mid(idx, topic))
                if not st.hold_receipts:
                    yield pb.ProduceResponse(receipt=receipt)

    async def Consume(self, request_iterator, context):
        st = self.st
        requests = request_iterator.__aiter__()
        s = (await requests.__anext__()).subscribe
        st.subscribes.append(s)
        topic, entries = s.topic, self.st.entries[s.topic]
        sub = st.subs.get((topic, s.subscription))
        if sub is None or s.non_durable:  # a non-durable cursor starts anew on every subscribe
            start = 0 if s.initial_position == pb.EARLIEST else len(entries)
            if s.HasField("start_message_id"):
                start = self._index_of(s.start_message_id, entries)
                if s.start_message_id.ledger_id == LEDGER and not s.start_message_id_inclusive:
                    start += 1
                elif s.start_message_id.ledger_id != LEDGER and s.start_message_id_inclusive:
                    start = max(0, start - 1)  # latest, inclusive: the last message
            sub = st.subs[(topic, s.subscription)] = Sub(next_read=start)
            sub.mark_delete = start - 1
        if s.type == pb.EXCLUSIVE and sub.consumer is not None:
            error = common_pb2.Error(code="CONSUMER_BUSY", message=f"{s.subscription} has a consumer already")
            await context.write(pb.ConsumeResponse(error=error))
            return
        token = sub.consumer = object()
        sub.redeliver = sorted(sub.delivered)
        sub.delivered.clear()
        subscribed = pb.Subscribed(consumer_name=s.consumer_name or "twin-c")
        if s.enable_retry:  # the names the broker resolves (<topic>-<subscription>-RETRY, -DLQ)
            subscribed.dead_letter_policy.CopyFrom(pb.DeadLetterPolicy(
                max_redeliver_count=16, retry_letter_topic=f"{topic}-{s.subscription}-RETRY",
                dead_letter_topic=f"{topic}-{s.subscription}-DLQ", initial_subscription_name=f"{s.subscription}-DLQ-sub",
            ))
        await context.write(pb.ConsumeResponse(subscribed=subscribed))
        permits = 0
        outbox: list[pb.ConsumeResponse] = []
        ending = False

        async def read_requests() -> None:
            nonlocal permits, ending
            try:
                async for req in requests:
                    kind = req.WhichOneof("kind")
                    st.requests.append(kind)
                    if kind == "seek":
                        st.seeks.append(req.seek)
                        done = pb.RequestDone(request_id=req.seek.request_id)
                        if st.seek_error is not None:
                            done.error.CopyFrom(st.seek_error)
                        else:
                            target = req.seek.WhichOneof("target")
                            if target == "message_id":
                                sub.move_to(self._index_of(req.seek.message_id, entries))
                            else:
                                times = [pb.EntryBatch.FromString(e).publish_time_ms for e in entries]
                                later = [i for i, t in enumerate(times) if t >= req.seek.timestamp_ms]
                                sub.move_to(later[0] if later else len(entries))
                            permits = 0
                            outbox.append(pb.ConsumeResponse(reset=pb.CursorReset()))
                        outbox.append(pb.ConsumeResponse(done=done))
                    elif kind == "unsubscribe":
                        done = pb.RequestDone(request_id=req.unsubscribe.request_id)
                        if st.unsubscribe_error is not None:
                            done.error.CopyFrom(st.unsubscribe_error)
                        else:
                            st.subs.pop((topic, s.subscription), None)
                            ending = True
                        outbox.append(pb.ConsumeResponse(done=done))
                    elif kind == "reconsume_later":
                        done = pb.RequestDone(request_id=req.reconsume_later.request_id)
                        if st.reconsume_error is not None:  # the copy was not stored: nothing acked
                            done.error.CopyFrom(st.reconsume_error)
                        else:
                            sub.acked.add(req.reconsume_later.message_id.entry_id)
                            sub.delivered.discard(req.reconsume_later.message_id.entry_id)
                        outbox.append(pb.ConsumeResponse(done=done))
                    elif kind == "flow":
                        permits += req.flow.permits
                        st.flows.append(req.flow.permits)
                    elif kind == "ack":
                        ids = [(m.ledger_id, m.entry_id) for m in req.ack.message_ids]
                        if ids:
                            st.acks.append((topic, req.ack.type, ids))
                        for b in req.ack.batch_acks:
                            st.batch_acks.append((b.message_id.entry_id, b.batch_size, b.ack_set))
                            e = b.message_id.entry_id
                            sub.batch_acked[e] = sub.batch_acked.get(e, 0) | int.from_bytes(b.ack_set, "little")
                        for _, e in ids:
                            if req.ack.type == pb.CUMULATIVE:
                                sub.mark_delete = max(sub.mark_delete, e)
                            else:
                                sub.acked.add(e)
                        sub.delivered = {e for e in sub.delivered if not sub.is_acked(e)}
                    elif kind == "redeliver":
                        ids = [m.entry_id for m in req.redeliver.message_ids] or sorted(sub.delivered)
                        st.redeliveries.append([(LEDGER, e) for e in ids])
                        sub.delivered -= set(ids)
                        sub.redeliver.extend(ids)
                    async with st.cond:
                        st.cond.notify_all()
            finally:
                async with st.cond:
                    st.cond.notify_all()

        def next_entry() -> int | None:
            while sub.redeliver:
                e = sub.redeliver.pop(0)
                if not sub.is_acked(e):
                    return e
            while sub.next_read < len(entries):
                sub.next_read += 1
                if not sub.is_acked(sub.next_read - 1):
                    return sub.next_read - 1
            return None

        def has_work() -> bool:
            return any(not sub.is_acked(e) for e in sub.redeliver) or sub.next_read < len(entries)

        def ready() -> bool:
            return reader.done() or bool(outbox) or st.resets_to_send > 0 or (permits > 0 and has_work())

        reader = asyncio.create_task(read_requests())
        try:
            while True:
                async with st.cond:
                    await st.cond.wait_for(ready)
                if reader.done():
                    return
                while st.resets_to_send > 0:
                    st.resets_to_send -= 1
                    permits = 0
                    await context.write(pb.ConsumeResponse(reset=pb.CursorReset()))
                while outbox:
                    await context.write(outbox.pop(0))
                if ending:
                    return
                out = []
                while permits > 0 and (idx := next_entry()) is not None:
                    n = len(pb.EntryBatch.FromString(entries[idx]).messages)
                    masked = sub.batch_acked.get(idx, 0) & ((1 << n) - 1)
                    permits -= n - masked.bit_count()
                    sub.delivered.add(idx)
                    delivery = pb.Delivery(
                        message_id=_mid(idx, topic), entry=entries[idx], redelivery_count=sub.deliveries[idx]
                    )
                    if masked:
                        delivery.ack_set = masked.to_bytes((n + 7) // 8, "little")
                    st.deliveries.append(delivery)
                    out.append(delivery)
                    sub.deliveries[idx] += 1
                if out:
                    await context.write(pb.ConsumeResponse(deliveries=pb.Deliveries(deliveries=out)))
        finally:
            reader.cancel()
            if sub.consumer is token:
                sub.consumer = None
            if s.non_durable:
                st.subs.pop((topic, s.subscription), None)

    @staticmethod
    def _index_of(mid: pb.MessageIdData, entries: list[bytes]) -> int:
        """The entry a seek or a start id names (earliest: 0, latest: after the last)."""
        if mid.ledger_id == -1:
            return 0
        if mid.ledger_id != LEDGER:
            return len(entries)
        return mid.entry_id


class Twin:
    """A twin broker server on 127.0.0.1; ``restart()`` brings it back on the same port."""

    def __init__(self, state: TwinState | None = None) -> None:
        self.state = state or TwinState()
        self.port = 0
        self.server: grpc.aio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        server = grpc.aio.server()
        port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        assert port, "could not bind the twin's port"
        self.port = port
        pb_grpc.add_BrokerServicer_to_server(BrokerTwin(self.state, self.address), server)
        await server.start()
        self.server = server

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=None)
            self.server = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


async def _eventually(predicate, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


# -- produce and consume ------------------------------------------------------------------
async def test_round_trip_without_batching(twin, client):
    consumer = await client.subscribe("orders", "billing", initial_position=ma.InitialPosition.Earliest)
    producer = await client.create_producer("orders", batching_enabled=False)
    ids = [await producer.send(f"m{i}".encode(), properties={"i": str(i)}, event_timestamp=1000 + i) for i in range(3)]

    assert [str(m) for m in ids] == [f"{LEDGER}:{i}:-1:-1" for i in range(3)]
    stored = twin.state.entry_batches("orders")
    assert [b.batched for b in stored] == [False] * 3
    assert [b.messages[0].sequence_id for b in stored] == [0, 1, 2]
    assert all(b.producer_name == producer.producer_name() for b in stored)
    for i in range(3):
        msg = await consumer.receive(timeout_millis=2000)
        assert msg.data() == msg.value() == f"m{i}".encode()
        assert msg.properties() == {"i": str(i)}
        assert msg.message_id() == ids[i]
        assert msg.event_timestamp() == 1000 + i
        assert msg.redelivery_count() == 0
        assert msg.topic_name() == "persistent://public/default/orders"
        assert abs(msg.publish_timestamp() - time.time() * 1000) < 10_000
        await consumer.acknowledge(msg)
    await consumer.close()  # flushes the grouped acks
    assert [(t, ids) for _, t, ids in twin.state.acks] == [(pb.INDIVIDUAL, [(LEDGER, i) for i in range(3)])]


async def test_batching_gathers_messages_into_one_entry(twin, client):
    producer = await client.create_producer("batched", batching_max_publish_delay_ms=50)
    futs = [producer.send_async(f"m{i}".encode(), None, partition_key="k") for i in range(5)]
    ids = await asyncio.gather(*futs)
    assert [str(m) for m in ids] == [f"{LEDGER}:0:-1:{i}" for i in range(5)]
    (entry,) = twin.state.entry_batches("batched")
    assert entry.batched and entry.sequence_id == 0
    assert [m.payload for m in entry.messages] == [f"m{i}".encode() for i in range(5)]
    (_, send), = twin.state.batches
    assert (send.num_messages, send.lowest_sequence_id, send.highest_sequence_id) == (5, 0, 4)


async def test_batch_limits_and_delayed_messages_go_alone(twin, client):
    producer = await client.create_producer("limits", batching_max_messages=3, batching_max_publish_delay_ms=1000)
    futs = [producer.send_async(b"x", None) for _ in range(7)]
    later = producer.send_async(b"later", None, deliver_after=timedelta(seconds=5))
    await producer.flush()
    await asyncio.gather(*futs, later)
    sizes = [(len(b.messages), b.batched) for b in twin.state.entry_batches("limits")]
    assert sizes == [(3, True), (3, True), (1, True), (1, False)]
    delayed = twin.state.entry_batches("limits")[-1].messages[0]
    assert delayed.deliver_at_ms > time.time() * 1000 + 4000


def test_deliver_after_is_rounded_up_to_the_next_millisecond(monkeypatch):
    """deliver_at is whole ms: 0.9 ms into a millisecond, 3 s later is the next one's end,
    never 0.9 ms early (a delayed message came 50 us before its 3 s were up)."""
    from magnetar.client.producer import build_message

    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0009)
    msg = build_message(b"x", None, None, None, None, timedelta(seconds=3), 1 << 20)
    assert msg.deliver_at_ms == 1_700_000_003_001


async def test_batch_unpacking_and_batch_level_acks(twin, client):
    consumer = await client.subscribe(
        "acks", "s", initial_position=ma.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=0
    )
    producer = await client.create_producer("acks")
    await asyncio.gather(*(producer.send_async(f"m{i}".encode(), None) for i in range(3)))
    msgs = [await consumer.receive(timeout_millis=2000) for _ in range(3)]
    assert [str(m.message_id()) for m in msgs] == [f"{LEDGER}:0:-1:{i}" for i in range(3)]

    await consumer.acknowledge(msgs[0])
    await consumer.acknowledge(msgs[1].message_id())
    await _eventually(lambda: twin.state.batch_acks)
    await asyncio.sleep(0.25)  # two more ack periods: the unchanged mask is not sent again
    assert twin.state.acks == []  # no entry ack for a partly acked batch, but its mask:
    assert twin.state.batch_acks == [(0, 3, b"\x03")]

    # The nacked message comes back alone: the broker masks the acked ones out.
    await consumer.negative_acknowledge(msgs[2])
    again = await consumer.receive(timeout_millis=2000)
    assert again.message_id() == msgs[2].message_id() and again.redelivery_count() == 1
    with pytest.raises(magnetar.Timeout):
        await consumer.receive(timeout_millis=100)
    assert twin.state.redeliveries == [[(LEDGER, 0)]]
    assert twin.state.deliveries[-1].ack_set == b"\x03"

    await consumer.acknowledge(again)
    await _eventually(lambda: twin.state.acks)
    assert twin.state.acks == [("persistent://public/default/acks", pb.INDIVIDUAL, [(LEDGER, 0)])]


async def test_a_nack_goes_out_after_the_acks_of_its_siblings_in_one_write(twin, client):
    consumer = await client.subscribe(
        "nack", "s", initial_position=ma.InitialPosition.Earliest, negative_ack_redelivery_delay_ms=300
    )
    producer = await client.create_producer("nack")
    await asyncio.gather(*(producer.send_async(b"%d" % i, None) for i in range(4)))
    msgs = [await consumer.receive(timeout_millis=2000) for _ in range(4)]
    started = time.monotonic()
    await consumer.negative_acknowledge(msgs[1])
    for i in (0, 2, 3):
        await consumer.acknowledge(msgs[i])
    again = await consumer.receive(timeout_millis=3000)
    assert again.message_id() == msgs[1].message_id() and again.data() == b"1"
    assert 0.3 <= time.monotonic() - started < 1.3
    # The acks reached the broker before the redelivery request.
    assert twin.state.requests.index("redeliver") > twin.state.requests.index("ack")
    assert twin.state.batch_acks[-1] == (0, 4, b"\x0d")
    with pytest.raises(magnetar.Timeout):
        await consumer.receive(timeout_millis=100)


async def test_a_failed_reconsume_later_brings_the_message_back_like_a_nack(twin, client):
    # The Spark DLQ helper under load: a reconsume_later the broker could not do (its copy
    # not stored) left the message held by the consumer, unacked, never delivered again.
    consumer = await client.subscribe(
        "retry", "s", initial_position=ma.InitialPosition.Earliest, consumer_type=ma.ConsumerType.Shared,
        enable_retry=True, negative_ack_redelivery_delay_ms=200,
    )
    producer = await client.create_producer("retry", batching_enabled=False)
    sent = await producer.send(b"m")
    msg = await consumer.receive(timeout_millis=2000)
    twin.state.reconsume_error = common_pb2.Error(code="SERVICE_CLOSED", message="topic closing", retriable=True)
    started = time.monotonic()
    with pytest.raises(magnetar.ServiceClosed):
        await consumer.reconsume_later(msg, timedelta(seconds=1))
    again = await consumer.receive(timeout_millis=3000)
    assert again.message_id() == sent and again.data() == b"m"
    assert time.monotonic() - started >= 0.2  # after the negative-ack delay, as a nack
    assert twin.state.redeliveries == [[(LEDGER, 0)]]

    twin.state.reconsume_error = None  # the broker can now: acked, and gone for good
    await consumer.reconsume_later(again, timedelta(seconds=1))
    with pytest.raises(magnetar.Timeout):
        await consumer.receive(timeout_millis=500)
    assert twin.state.redeliveries == [[(LEDGER, 0)]]
    assert twin.state.subs[("persistent://public/default/retry", "s")].is_acked(0)


async def test_cumulative_ack_inside_a_batch_acks_the_entry_before(twin, client):
    consumer = await client.subscribe("cum", "s", initial_position=ma.InitialPosition.Earliest)
    producer = await client.create_producer("cum", batching_enabled=False)
    await producer.send(b"single")
    batcher = await client.create_producer("cum")
    await asyncio.gather(*(batcher.send_async(b"b", None) for _ in range(3)))
    msgs = [await consumer.receive(timeout_millis=2000) for _ in range(4)]
    assert [str(m.message_id()) for m in msgs] == ["7:0:-1:-1", "7:1:-1:0", "7:1:-1:1", "7:1:-1:2"]

    await consumer.acknowledge_cumulative(msgs[2])
    await _eventually(lambda: twin.state.acks)
    assert twin.state.acks[-1][1:] == (pb.CUMULATIVE, [(LEDGER, 0)])
    await _eventually(lambda: twin.state.batch_acks)
    assert twin.state.batch_acks == [(1, 3, b"\x03")]  # messages 0..1 of entry 1, kept by the broker
    await consumer.acknowledge_cumulative(msgs[3])
    await _eventually(lambda: len(twin.state.acks) == 2)
    assert twin.state.acks[-1][1:] == (pb.CUMULATIVE, [(LEDGER, 1)])

    shared = await client.subscribe("cum", "shared", consumer_type=ma.ConsumerType.Shared)
    with pytest.raises(magnetar.InvalidArgument):
        await shared.acknowledge_cumulative(msgs[0])


async def test_flow_permits_are_granted_in_halves(twin, client):
    producer = await client.create_producer("flow", batching_enabled=False)
    consumer = await client.subscribe("flow", "s", receiver_queue_size=4)
    for i in range(6):
        await producer.send(b"%d" % i)
    for _ in range(6):
        await consumer.receive(timeout_millis=2000)
    await _eventually(lambda: sum(twin.state.flows) >= 10)
    # The whole queue first, then back in halves (grants made meanwhile go out together).
    assert twin.state.flows[0] == 4 and sum(twin.state.flows) == 10
    assert all(f % 2 == 0 for f in twin.state.flows[1:])


async def test_partitioned_topic_routes_by_key(twin, client):
    twin.state.partitions["persistent://public/default/parts"] = 4
    consumer = await client.subscribe("parts", "s", initial_position=ma.InitialPosition.Earliest)
    producer = await client.create_producer("parts", batching_enabled=False)
    sent = {}
    for key in ("alice", "bob", "carol", "dave"):
        ids = [await producer.send(key.encode(), partition_key=key) for _ in range(3)]
        assert {m.partition() for m in ids} == {partition_for_key(key, 4)}
        sent[key] = ids
    for i in range(4):  # unkeyed: round robin over the partitions
        await producer.send(b"rr%d" % i)
    received = [await consumer.receive(timeout_millis=2000) for _ in range(16)]
    by_key = defaultdict(set)
    for msg in received:
        if msg.partition_key():
            by_key[msg.partition_key()].add(msg.topic_name())
            assert msg.topic_name().endswith(f"-partition-{msg.message_id().partition()}")
    assert {k: len(v) for k, v in by_key.items()} == {"alice": 1, "bob": 1, "carol": 1, "dave": 1}
    used = {t for t, _ in twin.state.batches}
    assert used <= {f"persistent://public/default/parts-partition-{i}" for i in range(4)}
    unkeyed = {m.message_id().partition() for m in received if not m.partition_key()}
    assert len(unkeyed) == 4
    assert await client.get_topic_partitions("parts") == [
        f"persistent://public/default/parts-partition-{i}" for i in range(4)
    ]


# -- errors ---------------------------------------------------------------------------------
async def test_message_too_big_is_raised_before_sending(twin, client):
    producer = await client.create_producer("big")
    with pytest.raises(magnetar.MessageTooBig):
        await producer.send(b"x" * (5 * 1024 * 1024 + 1))
    small = await client.create_producer("big", max_message_size=10)
    with pytest.raises(magnetar.MessageTooBig):
        small.send_async(b"x" * 11, None)
    await producer.flush()
    assert twin.state.batches == []


async def test_options_magnetar_cannot_honour_are_refused_not_ignored(twin, client):
    producer = await client.create_producer("geo", batching_enabled=False)
    opened = twin.state.producers
    with pytest.raises(magnetar.InvalidArgument, match="replication_clusters=\\['us-west'\\] is not supported"):
        await producer.send(b"x", replication_clusters=["us-west"])
    with pytest.raises(magnetar.InvalidArgument, match="replication_clusters"):
        producer.send_async(b"x", None, replication_clusters=["us-west", "eu"])
    for scheme in (ma.HashingScheme.BoostHash, ma.HashingScheme.JavaStringHash):
        with pytest.raises(magnetar.InvalidArgument, match=f"hashing_scheme={scheme.name} is not supported"):
            await client.create_producer("geo", hashing_scheme=scheme)
    with pytest.raises(magnetar.InvalidArgument, match="connection_timeout_ms=5000 is not supported"):
        ma.Client(f"magnetar://{twin.address}", connection_timeout_ms=5000)
    with pytest.raises(magnetar.InvalidArgument, match="priority_level=1 is not supported on a Shared subscription"):
        await client.subscribe("geo", "s", consumer_type=ma.ConsumerType.Shared, priority_level=1)
    assert ("persistent://public/default/geo", "s") not in twin.state.subs
    await producer.flush()
    assert twin.state.batches == [] and twin.state.producers == opened  # nothing sent, nothing opened
    # What Magnetar does do stays accepted: no clusters, no replication, Murmur3.
    mid = await producer.send(b"ok", replication_clusters=[], disable_replication=True)
    assert [b.messages[0].payload for b in twin.state.entry_batches("geo")] == [b"ok"] and str(mid) == f"{LEDGER}:0:-1:-1"
    await (await client.create_producer("geo", hashing_scheme=ma.HashingScheme.Murmur3_32Hash)).close()
    await (await client.subscribe("geo", "f", consumer_type=ma.ConsumerType.Failover, priority_level=1)).close()


def test_blocking_client_refuses_what_it_cannot_honour():
    server = _TwinThread()
    try:
        with pytest.raises(magnetar.InvalidArgument, match="connection_timeout_ms"):
            magnetar.Client(f"magnetar://{server.twin.address}", connection_timeout_ms=1000)
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            with pytest.raises(magnetar.InvalidArgument, match="hashing_scheme=JavaStringHash"):
                client.create_producer("sync-geo", hashing_scheme=magnetar.HashingScheme.JavaStringHash)
            producer = client.create_producer("sync-geo")
            with pytest.raises(magnetar.InvalidArgument, match="replication_clusters"):
                producer.send(b"x", replication_clusters=["us-west"])
            with pytest.raises(magnetar.InvalidArgument, match="replication_clusters"):
                producer.send_async(b"x", None, replication_clusters=["us-west"])
            producer.flush()
            assert server.twin.state.batches == []
    finally:
        server.close()


async def test_consumer_busy_from_the_subscribe_error(twin, client):
    await client.subscribe("busy", "only")
    with pytest.raises(magnetar.ConsumerBusy):
        await client.subscribe("busy", "only")


async def test_topic_not_found_from_a_grpc_status(twin, client):
    twin.state.missing.add("persistent://public/default/nope")
    with pytest.raises(magnetar.TopicNotFound):
        await client.create_producer("nope")


async def test_receive_timeout_raises_timeout(twin, client):
    consumer = await client.subscribe("quiet", "s")
    started = time.monotonic()
    with pytest.raises(magnetar.Timeout):
        await consumer.receive(timeout_millis=100)
    assert 0.09 < time.monotonic() - started < 1.0


async def test_send_timeout_fails_unconfirmed_sends(twin, client):
    twin.state.hold_receipts = True
    producer = await client.create_producer("slow", send_timeout_millis=200, batching_enabled=False)
    with pytest.raises(magnetar.Timeout):
        await producer.send(b"never confirmed")


async def test_each_send_times_out_at_its_own_deadline(twin, client):
    # One timer per producer serves every pending send: a later send keeps its own deadline.
    twin.state.hold_receipts = True
    producer = await client.create_producer("slow-staggered", send_timeout_millis=400, batching_enabled=False)
    first = producer.send_async(b"first", None)
    await asyncio.sleep(0.3)
    second = producer.send_async(b"second", None)
    await asyncio.wait({first}, timeout=5)
    assert isinstance(first.exception(), magnetar.Timeout)
    assert not second.done()  # 300 ms of its 400 still to go
    await asyncio.wait({second}, timeout=5)
    assert isinstance(second.exception(), magnetar.Timeout)


async def test_unreachable_service_raises_not_connected():
    c = ma.Client("127.0.0.1:1", operation_timeout_seconds=0.3)
    try:
        with pytest.raises(magnetar.NotConnected):
            await c.create_producer("t")
    finally:
        await c.close()


# -- reconnect -------------------------------------------------------------------------------
async def test_producer_resends_pending_batches_after_the_broker_restarts(twin, client):
    producer = await client.create_producer("resend", producer_name="p1", batching_max_publish_delay_ms=5)
    first = await producer.send(b"before")
    twin.state.hold_receipts = True  # stored, but the receipts are "lost"
    futs = [producer.send_async(f"m{i}".encode(), None) for i in range(4)]
    await _eventually(lambda: len(twin.state.batches) >= 2)
    before = [(s.lowest_sequence_id, s.highest_sequence_id) for _, s in twin.state.batches[1:]]

    await twin.stop()
    twin.state.hold_receipts = False
    await asyncio.sleep(0.05)
    await twin.start()  # same port, same stored state
    ids = await asyncio.wait_for(asyncio.gather(*futs), 5)

    resent = [(s.lowest_sequence_id, s.highest_sequence_id) for _, s in twin.state.batches[1 + len(before) :]]
    assert resent == before  # the same batches with the same sequence ids
    assert len(twin.state.entries["persistent://public/default/resend"]) == 1 + len(before)  # deduplicated
    assert [m.entry_id() for m in ids] == sorted(m.entry_id() for m in ids) and ids[0].entry_id() == 1
    assert producer.producer_name() == "p1" and producer.partitions[0].reconnects == 1
    assert first.entry_id() == 0
    after = await producer.send(b"after")
    assert after.entry_id() == 1 + len(before)
    assert twin.state.entry_batches("resend")[-1].sequence_id == 5


async def test_a_stream_cut_while_a_write_waits_keeps_the_producer_writing(twin, client):
    """grpc raises CancelledError in a write in flight when the call is cancelled (here:
    the reader cancels the stream the broker ended, while the writer waits on flow
    control). That once ended the producer's writer task for good: reconnected, it sent
    nothing again and every send timed out (the stuck producer of the chaos runs)."""
    producer = await client.create_producer("cut", producer_name="p1", batching_enabled=False)
    await producer.send(b"first")
    twin.state.stall_produce = True
    await twin.restart()  # the producer reconnects to a stream that reads nothing
    await _eventually(lambda: producer.partitions[0].reconnects == 1)
    payload = b"x" * (256 * 1024)
    futs = []
    for _ in range(40):  # 10 MiB: more than the stream's flow-control window
        futs.append(producer.send_async(payload, None))
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.3)
    twin.state.cut_stalled.set()  # the broker ends the stream; the reader cancels the call
    ids = await asyncio.wait_for(asyncio.gather(*futs), 10)
    assert [m.entry_id() for m in ids] == list(range(1, 41))
    assert producer.partitions[0].reconnects == 2
    assert (await producer.send(b"after")).entry_id() == 41


async def test_consumer_resubscribes_after_the_broker_restarts(twin, client):
    producer = await client.create_producer("again", batching_enabled=False)
    consumer = await client.subscribe("again", "s", initial_position=ma.InitialPosition.Earliest)
    await producer.send(b"one")
    msg = await consumer.receive(timeout_millis=2000)
    await twin.restart()
    # Unacked: the broker delivers it again on the new stream.
    again = await consumer.receive(timeout_millis=3000)
    assert again.message_id() == msg.message_id() and again.redelivery_count() == 1
    await consumer.acknowledge(again)
    await producer.send(b"two")
    assert (await consumer.receive(timeout_millis=3000)).data() == b"two"


# -- reader -----------------------------------------------------------------------------------
async def test_reader_from_earliest_and_from_an_id(twin, client):
    producer = await client.create_producer("log", batching_enabled=False)
    ids = [await producer.send(b"%d" % i) for i in range(4)]
    reader = await client.create_reader("log", ma.MessageId.earliest)
    assert await reader.has_message_available()
    assert [(await reader.read_next(1000)).data() for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    assert not await reader.has_message_available()
    after = await client.create_reader("log", ids[1])
    assert (await after.read_next(1000)).message_id() == ids[2]
    latest = await client.create_reader("log", ma.MessageId.latest)
    assert not await latest.has_message_available()
    await producer.send(b"new")
    assert (await latest.read_next(2000)).data() == b"new"


# -- the blocking client -------------------------------------------------------------------------
class _TwinThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.twin = Twin()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._call(self._make_and_start())

    async def _make_and_start(self) -> None:
        self.twin.state = TwinState()
        await self.twin.start()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def close(self) -> None:
        self._call(self.twin.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


def test_blocking_client_from_plain_code():
    server = _TwinThread()
    try:
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            consumer = client.subscribe("sync", "s", initial_position=magnetar.InitialPosition.Earliest)
            producer = client.create_producer("sync")
            msg_id = producer.send(b"hello", properties={"a": "b"})
            assert isinstance(msg_id, magnetar.MessageId) and str(msg_id) == f"{LEDGER}:0:-1:0"

            results = []
            done = threading.Event()

            def callback(res, mid):
                results.append((res, mid, threading.current_thread().name))
                if len(results) == 3:
                    done.set()

            for i in range(3):
                producer.send_async(b"async-%d" % i, callback)
            producer.flush()
            assert done.wait(5)
            assert all(r is magnetar.Result.Ok for r, _, _ in results)
            assert {t for _, _, t in results} == {"magnetar-client"}

            got = [consumer.receive(timeout_millis=2000) for _ in range(4)]
            assert [m.data() for m in got] == [b"hello", b"async-0", b"async-1", b"async-2"]
            for m in got:
                consumer.acknowledge(m)
            with pytest.raises(magnetar.Timeout):
                consumer.receive(timeout_millis=50)
            consumer.seek(magnetar.MessageId.earliest)
            assert consumer.receive(timeout_millis=2000).data() == b"hello"
            consumer.unsubscribe()
            assert ("persistent://public/default/sync", "s") not in server.twin.state.subs
            with pytest.raises(magnetar.ServiceClosed):
                consumer.receive(timeout_millis=50)
            reader = client.create_reader("sync", magnetar.MessageId.earliest)
            assert reader.read_next(2000).data() == b"hello"
            reader.seek(msg_id)  # exclusive (start_message_id_inclusive off): the next one
            assert reader.read_next(2000).data() == b"async-0"
            producer.close()
            consumer.close()  # closed already: a no-op
    finally:
        server.close()


async def test_close_while_the_broker_is_down_fails_waiters_without_hanging(twin, client):
    producer = await client.create_producer("down", batching_enabled=False)
    consumer = await client.subscribe("down", "s")
    waiting = asyncio.create_task(consumer.receive())
    await twin.stop()
    pending = producer.send_async(b"lost", None)
    # Both notice the broker is gone and are reconnecting (waited for, not slept on: a
    # loaded machine takes longer than the usual few ms).
    await _eventually(lambda: not producer.is_connected() and not consumer.is_connected(), timeout=5.0)
    await asyncio.wait_for(client.close(), 2)
    with pytest.raises(magnetar.ServiceClosed):
        await pending
    with pytest.raises(magnetar.ServiceClosed):
        await waiting
    with pytest.raises(magnetar.ServiceClosed):
        await producer.send(b"after close")
