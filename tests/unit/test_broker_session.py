"""The broker's session (broker/session/handles.py) and the SDK's (client/session.py): many
producers and consumers on one stream, each handle served as its own stream would be.

The broker's side runs with stand-in stream servers (what ``produce_stream`` /
``consume_stream`` are to it); the SDK's with a stand-in gRPC call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from magnetar.broker.rpc.session import RESPONSE_BYTES, BrokerSession
from magnetar.client.session import REQUEST_BYTES, ClientSession, GrpcSessionTransport
from magnetar.common.errors import InvalidArgument, NotConnected, TopicNotFound
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.proto.v1 import common_pb2


class Servers:
    """Stand-ins for produce_stream / consume_stream: a producer answers its open and
    each send with a receipt; an open of topic "refused" raises; each records when it
    is detached (its generator closed, as the real ones remove their producer)."""

    def __init__(self) -> None:
        self.detached: list[str] = []

    async def produce(self, requests: AsyncIterator[pb.ProduceRequest]) -> AsyncIterator[pb.ProduceResponse]:
        it = requests.__aiter__()
        first = await it.__anext__()
        if first.WhichOneof("kind") != "open":
            raise InvalidArgument("a produce stream must start with OpenProducer")
        if first.open.topic == "refused":
            raise TopicNotFound("topic refused does not exist")
        try:
            yield pb.ProduceResponse(opened=pb.ProducerOpened(producer_name=first.open.topic))
            async for req in it:
                yield pb.ProduceResponse(receipt=pb.SendReceipt(request_id=req.send.request_id))
        finally:
            self.detached.append(first.open.topic)

    async def consume(self, requests: AsyncIterator[pb.ConsumeRequest]) -> AsyncIterator[pb.ConsumeResponse]:
        it = requests.__aiter__()
        first = await it.__anext__()
        try:
            yield pb.ConsumeResponse(subscribed=pb.Subscribed(consumer_name=first.subscribe.topic))
            async for req in it:
                if req.WhichOneof("kind") == "flow":  # a delivery of an entry of that many bytes
                    entry = pb.Delivery(entry=b"x" * req.flow.permits)
                    yield pb.ConsumeResponse(deliveries=pb.Deliveries(deliveries=[entry]))
                else:
                    yield pb.ConsumeResponse(done=pb.RequestDone(request_id=req.seek.request_id))
        finally:
            self.detached.append(first.subscribe.topic)


def _open(handle: int, topic: str) -> pb.SessionFrame:
    return pb.SessionFrame(handle=handle, produce=pb.ProduceRequest(open=pb.OpenProducer(topic=topic)))


def _send(handle: int, request_id: int) -> pb.SessionFrame:
    return pb.SessionFrame(handle=handle, produce=pb.ProduceRequest(send=pb.SendBatch(request_id=request_id)))


class Conversation:
    """A BrokerSession run with requests written here and its responses read here."""

    def __init__(self) -> None:
        self.servers = Servers()
        self._requests: asyncio.Queue[pb.SessionRequest | None] = asyncio.Queue()
        self.responses = BrokerSession(self.servers.produce, self.servers.consume).run(self._incoming())

    async def _incoming(self) -> AsyncIterator[pb.SessionRequest]:
        while (req := await self._requests.get()) is not None:
            yield req

    def write(self, *frames: pb.SessionFrame) -> None:
        self._requests.put_nowait(pb.SessionRequest(frames=frames))

    def done_writing(self) -> None:
        self._requests.put_nowait(None)

    async def read(self) -> list[pb.SessionReply]:
        return list((await asyncio.wait_for(self.responses.__anext__(), 5)).replies)

    async def read_replies(self, n: int) -> list[pb.SessionReply]:
        replies: list[pb.SessionReply] = []
        while len(replies) < n:
            replies += await self.read()
        return replies


async def test_one_response_carries_what_every_handle_answered_each_tagged_with_its_handle() -> None:
    talk = Conversation()
    talk.write(_open(1, "a"), _open(2, "b"), _open(3, "c"))
    replies = await talk.read_replies(3)
    assert {(r.handle, r.produce.opened.producer_name) for r in replies} == {(1, "a"), (2, "b"), (3, "c")}
    talk.write(_send(2, 7), _send(1, 8), _send(3, 9))
    replies = await talk.read_replies(3)
    assert {(r.handle, r.produce.receipt.request_id) for r in replies} == {(2, 7), (1, 8), (3, 9)}
    await talk.responses.aclose()


async def test_a_refused_open_ends_its_handle_with_the_error_and_no_other() -> None:
    talk = Conversation()
    talk.write(_open(1, "a"), _open(2, "refused"))
    replies = await talk.read_replies(2)
    ends = [r for r in replies if r.WhichOneof("kind") == "end"]
    assert [(r.handle, r.end.error.code) for r in ends] == [(2, TopicNotFound.code)]
    assert "does not exist" in ends[0].end.error.message
    talk.write(_send(1, 5))
    assert [(r.handle, r.produce.receipt.request_id) for r in await talk.read()] == [(1, 5)]
    await talk.responses.aclose()


async def test_a_request_for_a_handle_that_is_not_open_is_answered_with_an_end_and_serves_nothing() -> None:
    talk = Conversation()
    talk.write(_send(9, 1))
    (reply,) = await talk.read()
    assert reply.handle == 9 and reply.end.error.code == InvalidArgument.code
    assert "first request must be produce.open" in reply.end.error.message
    talk.write(pb.SessionFrame(handle=4, consume=pb.ConsumeRequest(subscribe=pb.Subscribe(topic="t"))))
    (subscribed,) = await talk.read()
    talk.write(_send(4, 1))  # a producer's request on a consumer's handle: the handle ends
    (end,) = await talk.read()
    assert subscribed.consume.subscribed.consumer_name == "t"
    assert end.handle == 4 and end.end.error.code == InvalidArgument.code
    await _until(lambda: talk.servers.detached == ["t"])
    await talk.responses.aclose()


async def test_a_cancel_detaches_its_handle_and_a_half_close_ends_it_normally() -> None:
    talk = Conversation()
    talk.write(_open(1, "a"), _open(2, "b"))
    await talk.read_replies(2)
    talk.write(pb.SessionFrame(handle=1, cancel=pb.SessionCancel()))
    await _until(lambda: talk.servers.detached == ["a"])
    talk.write(pb.SessionFrame(handle=2, half_close=pb.SessionHalfClose()))
    (end,) = await talk.read()  # a cancelled handle gets no end; a half-closed one does
    assert end.handle == 2 and end.WhichOneof("kind") == "end" and not end.end.HasField("error")
    assert talk.servers.detached == ["a", "b"]
    talk.write(_open(1, "again"))  # an ended handle's id may be opened again
    assert [r.produce.opened.producer_name for r in await talk.read()] == ["again"]
    await talk.responses.aclose()


async def test_the_session_ending_detaches_every_handle() -> None:
    gone = Conversation()
    gone.write(_open(1, "a"), _open(2, "b"))
    await gone.read_replies(2)
    await gone.responses.aclose()  # the client went away (the call cancelled)
    assert sorted(gone.servers.detached) == ["a", "b"]
    done = Conversation()
    done.write(_open(1, "c"))
    await done.read()
    done.done_writing()  # the client half-closed the session: each handle ends, then it
    (end,) = await done.read()
    assert end.handle == 1 and not end.end.HasField("error")
    with pytest.raises(StopAsyncIteration):
        await done.responses.__anext__()
    assert done.servers.detached == ["c"]


async def test_a_turn_of_large_replies_leaves_in_several_responses_in_order() -> None:
    """Many consumers' deliveries of one loop turn do not add up to one message over
    gRPC's limit: a response that reached RESPONSE_BYTES leaves as it is."""
    talk = Conversation()
    size = RESPONSE_BYTES // 2 + 1
    talk.write(*(pb.SessionFrame(handle=h, consume=pb.ConsumeRequest(subscribe=pb.Subscribe(topic=f"t{h}"))) for h in (1, 2, 3)))
    await talk.read_replies(3)
    talk.write(*(pb.SessionFrame(handle=h, consume=pb.ConsumeRequest(flow=pb.Flow(permits=size))) for h in (1, 2, 3)))
    responses = []
    while sum(len(r) for r in responses) < 3:
        responses.append(await talk.read())
    assert len(responses) >= 2
    assert [r.handle for rs in responses for r in rs] == [1, 2, 3]  # one loop turn, in order
    assert all(len(r.consume.deliveries.deliveries[0].entry) == size for rs in responses for r in rs)
    assert all(sum(r.ByteSize() for r in rs) < RESPONSE_BYTES + size + 1024 for rs in responses)
    await talk.responses.aclose()


async def _until(predicate, timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


# -- the SDK's side ----------------------------------------------------------------------
class FakeCall:
    """A stand-in ``Session`` call: what the client writes is kept, what it reads is fed."""

    def __init__(self) -> None:
        self.written: list[pb.SessionRequest] = []
        self.incoming: asyncio.Queue[pb.SessionResponse | BaseException] = asyncio.Queue()
        self.cancelled = False

    async def write(self, request: pb.SessionRequest) -> None:
        self.written.append(request)

    async def read(self) -> pb.SessionResponse:
        item = await self.incoming.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def cancel(self) -> None:
        self.cancelled = True

    def reply(self, *replies: pb.SessionReply) -> None:
        self.incoming.put_nowait(pb.SessionResponse(replies=replies))


class Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection reset"

    def trailing_metadata(self) -> tuple[()]:
        return ()


async def test_the_writes_of_one_loop_turn_leave_in_one_request_and_replies_reach_their_handle() -> None:
    call, broke = FakeCall(), []
    session = ClientSession(GrpcSessionTransport(call, "broker b"), "broker b", broke.append)  # type: ignore[arg-type]
    handles = [session.open_handle("produce", f"p{i}") for i in range(3)]
    await asyncio.gather(*(h.write(pb.ProduceRequest(send=pb.SendBatch(request_id=i))) for i, h in enumerate(handles)))
    assert len(call.written) == 1
    assert [(f.handle, f.produce.send.request_id) for f in call.written[0].frames] == [(h.id, i) for i, h in enumerate(handles)]
    call.reply(
        pb.SessionReply(handle=handles[1].id, produce=pb.ProduceResponse(receipt=pb.SendReceipt(request_id=1))),
        pb.SessionReply(handle=handles[0].id, end=pb.SessionHandleEnd()),
        pb.SessionReply(handle=handles[2].id, end=pb.SessionHandleEnd(error=_error(TopicNotFound("gone")))),
    )
    assert (await handles[1].read()).receipt.request_id == 1
    assert await handles[0].read() is None  # ended normally
    with pytest.raises(TopicNotFound, match="gone"):
        await handles[2].read()
    with pytest.raises(NotConnected):
        await handles[0].write(pb.ProduceRequest())
    handles[1].cancel()
    await _until(lambda: len(call.written) == 2)
    assert [(f.handle, f.WhichOneof("kind")) for f in call.written[1].frames] == [(handles[1].id, "cancel")]
    assert session.handles == 0 and not broke
    await session.close()


async def test_a_turn_of_large_writes_leaves_in_several_requests_in_order() -> None:
    call, broke = FakeCall(), []
    session = ClientSession(GrpcSessionTransport(call, "broker b"), "broker b", broke.append)  # type: ignore[arg-type]
    size = REQUEST_BYTES // 2 + 1
    handles = [session.open_handle("produce", f"p{i}") for i in range(3)]
    await asyncio.gather(*(
        h.write(pb.ProduceRequest(send=pb.SendBatch(request_id=i, entry=b"x" * size))) for i, h in enumerate(handles)
    ))
    assert len(call.written) == 2
    assert [(f.handle, f.produce.send.request_id) for r in call.written for f in r.frames] == [(h.id, i) for i, h in enumerate(handles)]
    assert all(r.ByteSize() < REQUEST_BYTES + size + 1024 for r in call.written)
    await session.close()


async def test_writes_after_a_cancel_in_the_same_turn_still_leave() -> None:
    """A cancel (sent without waiting) in the turn of another handle's write left the
    session waiting for a stream message that was never to be written: every later
    write hung (a consumer's close then never returned)."""
    call, broke = FakeCall(), []
    session = ClientSession(GrpcSessionTransport(call, "broker b"), "broker b", broke.append)  # type: ignore[arg-type]
    a, b, c = (session.open_handle("produce", name) for name in "abc")
    first = asyncio.create_task(a.write(pb.ProduceRequest(send=pb.SendBatch(request_id=1))))
    await asyncio.sleep(0)  # a's frame is gathered and the writer woken; then, in that turn, b's cancel
    b.cancel()
    await asyncio.wait_for(first, 1)
    for _ in range(5):  # whatever the cancel scheduled runs
        await asyncio.sleep(0)
    await asyncio.wait_for(c.write(pb.ProduceRequest(send=pb.SendBatch(request_id=2))), 1)
    frames = [(f.handle, f.WhichOneof("kind")) for r in call.written for f in r.frames]
    assert frames == [(a.id, "produce"), (b.id, "cancel"), (c.id, "produce")]
    await session.close()


async def test_a_broken_session_ends_every_handle_with_its_error_and_is_given_up() -> None:
    call, broke = FakeCall(), []
    session = ClientSession(GrpcSessionTransport(call, "broker b"), "broker b", broke.append)  # type: ignore[arg-type]
    a, b = session.open_handle("produce", "a"), session.open_handle("consume", "b")
    call.incoming.put_nowait(Unavailable())
    for handle in (a, b):
        with pytest.raises(NotConnected):
            await handle.read()
    assert broke == [session] and call.cancelled
    with pytest.raises(NotConnected):
        session.open_handle("produce", "c")
    await session.close()


def _error(exc: TopicNotFound) -> common_pb2.Error:
    return common_pb2.Error(code=exc.code, message=exc.message, retriable=exc.retriable)


async def test_a_broker_without_sessions_gets_a_stream_per_producer_and_consumer(twin, client) -> None:
    """An older broker answers Session with UNIMPLEMENTED (the twin has no Session): the
    SDK opens a stream per handle there, without failing the producer or consumer."""
    consumer = await client.subscribe("old-broker", "s")
    producer = await client.create_producer("old-broker", batching_enabled=False)
    sent = await producer.send(b"hello")
    msg = await consumer.receive(timeout_millis=5000)
    assert (msg.data(), msg.message_id()) == (b"hello", sent)
    assert not client._pool.uses_session(twin.address)
