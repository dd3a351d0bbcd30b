"""The client SDK's pure parts: service URLs, batching, the receive queue (acks: test_client_acks)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

import magnetar
from magnetar.client.batching import BatchContainer, build_op
from magnetar.client.connection import Backoff, parse_service_url
from magnetar.client.receive_queue import ReceiveQueue
from magnetar.proto.v1 import broker_pb2 as pb


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("magnetar://localhost:6650", ["localhost:6650"]),
        ("localhost:7000", ["localhost:7000"]),
        ("magnetar://b1,b2:6651,b3:6652/", ["b1:6660", "b2:6651", "b3:6652"]),
        ("pulsar://h", ["h:6660"]),
    ],
)
def test_service_urls(url, hosts):
    assert parse_service_url(url) == hosts


@pytest.mark.parametrize("url", ["", "http://h:1", "h:notaport", "magnetar://,", "h:70000"])
def test_bad_service_urls(url):
    with pytest.raises(magnetar.InvalidArgument):
        parse_service_url(url)


def test_backoff_doubles_up_to_five_seconds():
    b = Backoff()
    delays = [b.next() for _ in range(10)]
    assert 0.09 <= delays[0] <= 0.1 and 4.5 <= delays[-1] <= 5.0
    assert all(a <= b_ * 1.12 for a, b_ in zip(delays, delays[1:], strict=False))
    b.reset()
    assert b.next() <= 0.1


def test_batch_container_limits():
    c = BatchContainer(max_messages=3, max_bytes=200)
    small = pb.SingleMessage(payload=b"x" * 10)
    assert not c.add(small, None) and not c.add(small, None)
    assert c.add(small, None)  # count limit reached
    c.drain()
    big = pb.SingleMessage(payload=b"y" * 150)
    assert c.has_room_for(big) and not c.add(big, None)
    assert not c.has_room_for(big)  # two would pass the byte limit
    msgs, _ = c.drain()
    assert len(msgs) == 1 and len(c) == 0
    huge = pb.SingleMessage(payload=b"z" * 1000)
    assert c.has_room_for(huge)  # an empty container takes any one message


def test_build_op_carries_the_sequence_range():
    msgs = [pb.SingleMessage(payload=b"a", sequence_id=s) for s in (7, 8, 9)]
    op = build_op(12, "p", msgs, [None, None, None], batched=True)
    send = op.request.send
    assert (send.request_id, send.num_messages, send.lowest_sequence_id, send.highest_sequence_id) == (12, 3, 7, 9)
    entry = pb.EntryBatch.FromString(send.entry)
    assert entry.producer_name == "p" and entry.sequence_id == 7 and entry.batched and len(entry.messages) == 3


def test_build_op_tells_the_broker_whether_its_one_message_is_delayed():
    plain = build_op(1, "p", [pb.SingleMessage(payload=b"a")], [None], batched=False)
    delayed = build_op(2, "p", [pb.SingleMessage(payload=b"a", deliver_at_ms=1234)], [None], batched=False)
    several = build_op(3, "p", [pb.SingleMessage(payload=b"a"), pb.SingleMessage(payload=b"b")], [None, None], batched=True)
    assert plain.send.HasField("deliver_at_ms") and plain.send.deliver_at_ms == 0
    assert delayed.send.deliver_at_ms == 1234
    assert not several.send.HasField("deliver_at_ms")  # a batch is delivered at once: never parsed


async def test_receive_queue_hands_over_and_times_out():
    q: ReceiveQueue[int] = ReceiveQueue()
    q.put(1)
    assert await q.get(0.01) == 1
    with pytest.raises(magnetar.Timeout):
        await q.get(0.01)
    getter = asyncio.create_task(q.get(1.0))
    await asyncio.sleep(0)
    q.put(2)
    assert await getter == 2
    q.put(3)
    q.put(4)
    assert q.remove_if(lambda i: i == 3) == 1 and len(q) == 1
    q.fail(magnetar.ServiceClosed("closed"))
    assert await q.get() == 4  # queued items first, then the error
    with pytest.raises(magnetar.ServiceClosed):
        await q.get()


async def test_receive_queue_keeps_an_item_when_the_getter_is_cancelled():
    q: ReceiveQueue[int] = ReceiveQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.put(5)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    assert await q.get(0.01) == 5


def test_magnetar_exports_the_pulsar_names():
    assert magnetar.ConsumerType.KeyShared == pb.KEY_SHARED
    assert magnetar.InitialPosition.Earliest == pb.EARLIEST
    assert magnetar.PartitionsRoutingMode.SinglePartition is magnetar.PartitionsRoutingMode.UseSinglePartition
    policy = magnetar.ConsumerDeadLetterPolicy()
    assert policy.max_redeliver_count == 16 and policy.dead_letter_topic is None
    assert issubclass(magnetar.Timeout, magnetar.MagnetarError)
    assert str(magnetar.MessageId(ledger_id=1, entry_id=2)) == "1:2:-1:-1"


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str, trailing: tuple = ()) -> None:
        self._code, self._details, self._trailing = code, details, trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return self._trailing


def test_a_bare_internal_on_a_stream_is_a_lost_connection_not_a_fatal_error() -> None:
    from magnetar.client.connection import stream_rpc_error
    from magnetar.common.errors import MagnetarError, NotConnected, TopicNotFound
    from magnetar.common.grpcutil import ERROR_CODE_KEY

    # What grpc's client reports for a write on a dead connection.
    local = stream_rpc_error(_RpcError(grpc.StatusCode.INTERNAL, "Internal error from Core"), "broker b:1")
    assert isinstance(local, NotConnected)
    assert local.retriable
    # A broker's own errors, and other statuses, keep their type.
    named = _RpcError(grpc.StatusCode.NOT_FOUND, "topic t was deleted", ((ERROR_CODE_KEY, "TOPIC_NOT_FOUND"),))
    assert isinstance(stream_rpc_error(named, "broker b:1"), TopicNotFound)
    named_internal = _RpcError(grpc.StatusCode.INTERNAL, "boom", ((ERROR_CODE_KEY, "INTERNAL"),))
    assert not stream_rpc_error(named_internal, "broker b:1").retriable
    unknown = stream_rpc_error(_RpcError(grpc.StatusCode.UNKNOWN, "Unexpected error"), "broker b:1")
    assert type(unknown) is MagnetarError and not unknown.retriable


async def test_a_write_in_flight_when_the_call_is_cancelled_is_a_lost_stream() -> None:
    """grpc raises CancelledError in a write waiting on flow control when another task
    cancels the call, and in a read for the status of a write refused after the cancel;
    BrokerStream makes both NotConnected (the writer task lives on), unless the writing
    task itself is the one being cancelled."""
    from magnetar.client.connection import BrokerStream
    from magnetar.common.errors import NotConnected

    async def never_reads(requests, context):  # the window fills: writes wait
        await asyncio.sleep(3600)
        yield b""

    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("t.S", {"M": grpc.stream_stream_rpc_method_handler(never_reads)})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:

            async def fill(stream: BrokerStream) -> int:
                n = 0
                while True:
                    await stream.write(b"x" * 65536)
                    n += 1

            stream = BrokerStream(ch.stream_stream("/t.S/M")(), "broker t")
            writer = asyncio.create_task(fill(stream))
            await asyncio.sleep(0.5)
            assert not writer.done()  # blocked on flow control
            stream.cancel()
            with pytest.raises(NotConnected, match="cancelled with a write in flight"):
                await writer
            # A write after the cancel: grpc refuses it (InvalidStateError) and a read for
            # the status raises CancelledError; that once escaped and ended the writer.
            await asyncio.sleep(0.1)
            with pytest.raises(NotConnected, match="the stream to broker t"):
                await stream.write(b"y")

            stream = BrokerStream(ch.stream_stream("/t.S/M")(), "broker t")
            writer = asyncio.create_task(fill(stream))
            await asyncio.sleep(0.5)
            writer.cancel()  # the task itself: stays a cancellation
            with pytest.raises(asyncio.CancelledError):
                await writer
            stream.cancel()
    finally:
        await server.stop(0)


async def test_a_request_failed_by_the_broken_stream_before_it_was_sent_leaves_no_unretrieved_error():
    # The chaos run's workload log: "Future exception was never retrieved: NotConnected:
    # the stream of the consumer ... broke": a reconsume_later whose write failed because
    # the stream broke; the break had failed its request future first, and forget() only
    # cancelled futures not done yet.
    import gc

    from magnetar.client.requests import PendingRequests
    from magnetar.common.errors import NotConnected

    loop = asyncio.get_running_loop()
    logged: list[str] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: logged.append(context["message"]))
    try:
        requests = PendingRequests()
        unsent = requests.new()
        waited = requests.new()
        waiter = asyncio.create_task(requests.wait(waited, 5.0, "seek"))
        await asyncio.sleep(0)
        requests.fail_all(NotConnected("the stream broke"))
        requests.forget(unsent)
        with pytest.raises(NotConnected):
            await waiter
        assert len(requests) == 0
        del requests, waiter
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert logged == []
