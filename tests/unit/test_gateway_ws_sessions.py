"""The WebSocket sessions against twins of the socket and the SDK handles: pipelined
publishing with acks in order and at most max_pending in flight, push and pull flow
control, acks and nacks, bad frames closing with Pulsar's codes, the reader's slots."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import timedelta

import pytest

from magnetar.client.message import Message
from magnetar.common.errors import InvalidArgument, MagnetarError, ServiceClosed, Timeout
from magnetar.common.message_id import MessageId
from magnetar.gateway.websocket import ids
from magnetar.gateway.websocket.consumer import ConsumerSession, ReaderSession
from magnetar.gateway.websocket.producer import ProducerSession
from magnetar.gateway.websocket.socket import SocketClosed
from magnetar.proto.v1 import broker_pb2 as pb


class TwinSocket:
    def __init__(self) -> None:
        self.incoming: asyncio.Queue[str | None] = asyncio.Queue()
        self.sent: list[str] = []
        self.closed: tuple[int, str] | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.reads = 0

    def client_sends(self, *frames: object) -> None:
        for frame in frames:
            self.incoming.put_nowait(frame if frame is None or isinstance(frame, str) else json.dumps(frame))

    async def receive(self) -> str | None:
        frame = await self.incoming.get()
        self.reads += 1
        return frame

    async def send(self, text: str) -> None:
        await self.writable.wait()
        if self.closed:
            raise SocketClosed()
        self.sent.append(text)

    async def close(self, code: int, reason: str) -> None:
        if self.closed is None:
            self.closed = (code, reason)
            self.incoming.put_nowait(None)

    def frames(self) -> list[dict]:
        return [json.loads(s) for s in self.sent]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def message(entry: int, payload: bytes = b"m") -> Message:
    return Message("persistent://t/ns/x", MessageId(ledger_id=1, entry_id=entry), pb.SingleMessage(payload=payload), 1000)


# -- producer ------------------------------------------------------------------------
class TwinProducer:
    def __init__(self) -> None:
        self.sends: list[tuple[bytes, dict]] = []
        self.futures: list[asyncio.Future[MessageId]] = []
        self.refuse: Exception | None = None

    def send_async(self, content: bytes, callback: object, **kwargs: object) -> asyncio.Future[MessageId]:
        if self.refuse is not None:
            raise self.refuse
        self.sends.append((content, kwargs))
        fut: asyncio.Future[MessageId] = asyncio.get_running_loop().create_future()
        self.futures.append(fut)
        return fut


def publish(payload: bytes, context: str, **extra: object) -> dict:
    return {"payload": base64.b64encode(payload).decode(), "context": context, **extra}


async def test_publishing_is_pipelined_and_acks_go_out_in_frame_order():
    socket, producer = TwinSocket(), TwinProducer()
    session = asyncio.create_task(ProducerSession(socket, producer, max_pending=10).run())
    socket.client_sends(publish(b"a", "1"), "{broken", publish(b"b", "2", key="k", properties={"p": "v"}))
    await settle()
    assert [c for c, _ in producer.sends] == [b"a", b"b"]  # both sent before either is stored
    assert socket.sent == []  # the broken frame's error waits for the first ack
    producer.futures[1].set_result(MessageId(ledger_id=1, entry_id=1))
    await settle()
    assert socket.sent == []
    producer.futures[0].set_result(MessageId(ledger_id=1, entry_id=0))
    await settle()
    acks = socket.frames()
    assert acks[0] == {"result": "ok", "messageId": ids.encode(MessageId(ledger_id=1, entry_id=0)), "context": "1"}
    assert acks[1]["result"] == "send-error:3" and "context" not in acks[1]
    assert acks[2] == {"result": "ok", "messageId": ids.encode(MessageId(ledger_id=1, entry_id=1)), "context": "2"}
    assert producer.sends[1][1]["partition_key"] == "k" and producer.sends[1][1]["properties"] == {"p": "v"}
    socket.client_sends(None)
    await session


async def test_failed_sends_and_bad_payloads_answer_with_pulsar_errors():
    socket, producer = TwinSocket(), TwinProducer()
    session = asyncio.create_task(ProducerSession(socket, producer, max_pending=10).run())
    socket.client_sends(publish(b"a", "1"), {"payload": "@@", "context": "2"}, {"context": "3"})
    await settle()
    producer.futures[0].set_exception(Timeout("send not confirmed within 30000 ms"))
    await settle()
    producer.refuse = MagnetarError("ProducerQueueIsFull")
    socket.client_sends(publish(b"d", "4"))
    await settle()
    acks = socket.frames()
    assert [(a["result"], a["context"]) for a in acks] == [
        ("send-error:8", "1"), ("send-error:7", "2"), ("send-error:7", "3"), ("send-error:8", "4")
    ]
    assert "not confirmed" in acks[0]["errorMsg"] and "Invalid Base64" in acks[1]["errorMsg"]
    socket.client_sends(None)
    await session


async def test_at_most_max_pending_frames_are_read_before_their_acks_are_written():
    socket, producer = TwinSocket(), TwinProducer()
    session = asyncio.create_task(ProducerSession(socket, producer, max_pending=3).run())
    socket.client_sends(*(publish(b"x", str(i)) for i in range(10)))
    await settle()
    assert len(producer.sends) == 3 and socket.reads == 3
    # A client that reads no acks: the stored messages cannot be acked, so still no room.
    socket.writable.clear()
    for f in producer.futures:
        f.set_result(MessageId(ledger_id=1, entry_id=0))
    await settle()
    assert len(producer.sends) == 3
    socket.writable.set()
    await settle()
    assert len(producer.sends) == 6 and len(socket.sent) == 3
    while len(socket.sent) < 10:
        for f in producer.futures:
            if not f.done():
                f.set_result(MessageId(ledger_id=1, entry_id=0))
        await settle()
    assert len(producer.sends) == 10
    socket.client_sends(None)
    await session


async def test_options_reach_the_producer_and_sequence_ids_count_from_the_initial_one():
    socket, producer = TwinSocket(), TwinProducer()
    session = asyncio.create_task(ProducerSession(socket, producer, max_pending=10, initial_sequence_id=41).run())
    socket.client_sends(
        publish(b"a", "1", eventTime="1970-01-01T00:00:01Z", deliverAfterMs=500),
        publish(b"b", "2", deliverAt=1234),
    )
    await settle()
    first, second = producer.sends[0][1], producer.sends[1][1]
    assert (first["sequence_id"], second["sequence_id"]) == (42, 43)
    assert first["event_timestamp"] == 1000 and first["deliver_after"] == timedelta(milliseconds=500)
    assert second["deliver_at"] == 1234 and second["deliver_after"] is None
    socket.client_sends(None)
    await session


async def test_the_session_ends_when_acks_cannot_be_written():
    socket, producer = TwinSocket(), TwinProducer()
    session = asyncio.create_task(ProducerSession(socket, producer, max_pending=1).run())
    socket.client_sends(publish(b"a", "1"), publish(b"b", "2"))
    await settle()
    socket.closed = (1006, "gone")
    producer.futures[0].set_result(MessageId(ledger_id=1, entry_id=0))
    await asyncio.wait_for(session, 1)
    assert len(producer.sends) == 1


# -- consumer ------------------------------------------------------------------------
class TwinConsumer:
    def __init__(self, messages: int = 0) -> None:
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        for i in range(messages):
            self.queue.put_nowait(message(i))
        self.acked: list[MessageId] = []
        self.nacked: list[MessageId] = []
        self.unsubscribed = False
        self.refuse_unsubscribe: MagnetarError | None = None
        self.reached_end = False

    def has_reached_end_of_topic(self) -> bool:
        return self.reached_end

    async def receive(self, timeout_millis: int | None = None) -> Message:
        return await self.queue.get()

    async def acknowledge(self, mid: MessageId) -> None:
        if mid.partition() > 0:
            raise InvalidArgument(f"message id {mid} names no partition")
        self.acked.append(mid)

    async def negative_acknowledge(self, mid: MessageId) -> None:
        self.nacked.append(mid)

    async def unsubscribe(self) -> None:
        if self.refuse_unsubscribe:
            raise self.refuse_unsubscribe
        self.unsubscribed = True

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        return await self.queue.get()


def ack(entry: int, kind: str | None = None) -> dict:
    frame = {"messageId": ids.encode(MessageId(ledger_id=1, entry_id=entry))}
    return frame if kind is None else {"type": kind, **frame}


async def test_push_mode_keeps_at_most_queue_size_unacked_messages_out():
    socket, consumer = TwinSocket(), TwinConsumer(messages=10)
    session = ConsumerSession(socket, consumer, queue_size=3)
    task = asyncio.create_task(session.run())
    await settle()
    assert [f["messageId"] for f in socket.frames()] == [ids.encode(MessageId(ledger_id=1, entry_id=i)) for i in range(3)]
    socket.client_sends(ack(0), ack(0))  # a second ack of the same id frees nothing more
    await settle()
    assert len(socket.sent) == 4 and consumer.acked == [MessageId(ledger_id=1, entry_id=0)] * 2
    socket.client_sends(ack(1, "negativeAcknowledge"))
    await settle()
    assert len(socket.sent) == 5 and consumer.nacked == [MessageId(ledger_id=1, entry_id=1)]
    socket.client_sends(ack(99))  # an id that is not out: acked, frees nothing
    await settle()
    assert len(socket.sent) == 5 and session.outstanding == {MessageId(ledger_id=1, entry_id=i) for i in (2, 3, 4)}
    socket.client_sends(None)
    await task


async def test_a_slow_client_holds_back_delivery():
    socket, consumer = TwinSocket(), TwinConsumer(messages=5)
    socket.writable.clear()
    task = asyncio.create_task(ConsumerSession(socket, consumer, queue_size=100).run())
    await settle()
    assert socket.sent == [] and consumer.queue.qsize() == 4  # one taken, waiting to be written
    socket.writable.set()
    await settle()
    assert len(socket.sent) == 5
    socket.client_sends(None)
    await task


async def test_pull_mode_delivers_against_permits_only():
    socket, consumer = TwinSocket(), TwinConsumer(messages=10)
    task = asyncio.create_task(ConsumerSession(socket, consumer, queue_size=3, pull_mode=True).run())
    await settle()
    assert socket.sent == []
    socket.client_sends({"type": "permit", "permitMessages": 2})
    await settle()
    assert len(socket.sent) == 2
    socket.client_sends(ack(0), ack(1))  # acks grant nothing in pull mode
    await settle()
    assert len(socket.sent) == 2
    socket.client_sends({"type": "permit", "permitMessages": 5})
    await settle()
    assert len(socket.sent) == 7
    socket.client_sends(None)
    await task


async def test_permits_do_nothing_in_push_mode():
    socket, consumer = TwinSocket(), TwinConsumer(messages=10)
    task = asyncio.create_task(ConsumerSession(socket, consumer, queue_size=2).run())
    socket.client_sends({"type": "permit", "permitMessages": 5})
    await settle()
    assert len(socket.sent) == 2
    socket.client_sends(None)
    await task


@pytest.mark.parametrize(
    "frame, reason",
    [
        ("{oops", "Failed to de-serialize from JSON: invalid JSON"),
        ({"type": "permit"}, "Failed to de-serialize from JSON: Missing permitMessages"),
        ({"messageId": "???"}, "Failed to de-serialize from JSON: invalid message id"),
        ({"type": "negativeAcknowledge"}, "Failed to de-serialize from JSON: messageId is missing"),
        ({"messageId": ids.encode(MessageId(ledger_id=1, entry_id=2, partition=5))}, "Failed to de-serialize from JSON: message id 1:2:5:-1"),
    ],
)
async def test_bad_frames_close_the_consumer_socket_with_code_4003(frame, reason):
    socket, consumer = TwinSocket(), TwinConsumer()
    task = asyncio.create_task(ConsumerSession(socket, consumer, queue_size=3).run())
    socket.client_sends(frame)
    await asyncio.wait_for(task, 1)
    assert socket.closed is not None and socket.closed[0] == 4003 and socket.closed[1].startswith(reason)


async def test_end_of_topic_and_unsubscribe():
    socket, consumer = TwinSocket(), TwinConsumer()
    task = asyncio.create_task(ConsumerSession(socket, consumer, queue_size=3).run())
    consumer.refuse_unsubscribe = MagnetarError("other consumers are attached")
    socket.client_sends({"type": "isEndOfTopic"}, {"type": "unsubscribe"})
    await settle()
    assert socket.frames() == [{"endOfTopic": False}] and socket.closed is None  # refused: stays open
    consumer.reached_end = True  # the topic was terminated and everything delivered
    socket.client_sends({"type": "isEndOfTopic"})
    await settle()
    assert socket.frames()[-1] == {"endOfTopic": True}
    consumer.refuse_unsubscribe = None
    socket.client_sends({"type": "unsubscribe"})
    await asyncio.wait_for(task, 1)
    assert consumer.unsubscribed and socket.closed == (1000, "Unsubscribed")


async def test_a_consumer_closed_under_the_session_ends_delivery_quietly():
    socket, consumer = TwinSocket(), TwinConsumer()

    async def closed(timeout_millis: int | None = None) -> Message:
        raise ServiceClosed("consumer on x is closed")

    consumer.receive = closed  # type: ignore[method-assign]
    task = asyncio.create_task(ConsumerSession(socket, consumer, queue_size=3).run())
    await settle()
    assert socket.closed is None
    socket.client_sends(None)
    await task


async def test_an_sdk_failure_closes_the_socket_with_code_4008():
    socket, consumer = TwinSocket(), TwinConsumer()

    async def broken(timeout_millis: int | None = None) -> Message:
        raise MagnetarError("undecodable")

    consumer.receive = broken  # type: ignore[method-assign]
    task = asyncio.create_task(ConsumerSession(socket, consumer, queue_size=3).run())
    await asyncio.wait_for(task, 1)
    assert socket.closed == (4008, "Unknown error: undecodable")


# -- reader --------------------------------------------------------------------------
async def test_reader_frees_one_slot_per_frame_and_answers_end_of_topic():
    socket, reader = TwinSocket(), TwinConsumer(messages=10)
    task = asyncio.create_task(ReaderSession(socket, reader, queue_size=2).run())
    await settle()
    assert len(socket.sent) == 2
    socket.client_sends({"type": "isEndOfTopic"})
    await settle()
    assert len(socket.sent) == 3 and socket.frames()[2] == {"endOfTopic": False}
    socket.client_sends(ack(0), {"anything": 1})
    await settle()
    assert len(socket.sent) == 5 and reader.acked == []  # a reader acks nothing
    socket.client_sends("not json")
    await asyncio.wait_for(task, 1)
    assert socket.closed is not None and socket.closed[0] == 4003
