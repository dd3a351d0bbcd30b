"""Limits of Pulsar's protocol door, against a real broker and bookie.

Slow clients: a consumer
that asks for 2^32 - 1 messages and does not read is sent no more than the connection's
limit of unsent bytes (plus the kernel's buffers and one dispatcher read), gets the rest
once it reads, and is closed when it stays unread past the write timeout; a pulsar-client
producing and consuming on the same broker goes on meanwhile.

Sizes a client claims: a batch-index ACK whose batch size no entry can have, and a
(compressed) batch claiming more messages than fit in a message, are refused at once; a
compressed send with an unknown codec, a corrupt payload or a lying uncompressed size is
refused with SEND_ERROR and nothing of it stored
(each once stalled the broker for tens of seconds, its ZooKeeper session lost: found by
tests/fuzz/test_pulsar_fuzz.py)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common import compression
from magnetar.common.netutil import free_port
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.protocol.frames import encode_payload_command
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection, lookup_command

pytestmark = pytest.mark.integration

Type = pb.BaseCommand.Type
MAX_UNSENT = 256 * 1024
WRITE_TIMEOUT_S = 8.0
SIZE = 50_000
COUNT = 600  # 30 MB: far more than the limit, the kernel's buffers and a dispatcher read
BOUND = MAX_UNSENT + 4 * 1024 * 1024 + 4 * 1024 * 1024 + 1024 * 1024
"""What may be sent before the client reads: the limit, the broker's socket send buffer
(tcp_wmem at most 4 MiB here), one dispatcher read (4 MiB) and the client's buffers."""


class Cluster:
    def __init__(self, broker, port: int) -> None:
        self.broker = broker
        self.address = broker.address
        self.port = port
        self.url = f"pulsar://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster(module_bookie_factory, module_broker_factory) -> Cluster:
    port = free_port()
    broker = module_broker_factory.create(
        protocol_port=port, ensemble_size=1, write_quorum=1, ack_quorum=1,
        protocol_max_unsent_bytes=MAX_UNSENT, protocol_write_timeout_s=WRITE_TIMEOUT_S,
    )  # fmt: skip
    start_all([module_bookie_factory.create(), broker])  # their start-ups overlap
    return Cluster(broker, port)


async def _backlog(cluster: Cluster, name: str) -> str:
    topic = f"persistent://{await new_namespace(cluster.address, 'slow')}/{name}"
    async with mg.Client(cluster.address) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        futures = [await producer.enqueue(n.to_bytes(4, "big") * (SIZE // 4)) for n in range(COUNT)]
        await producer.flush()
        for f in futures:
            await f
        await producer.close()
    return topic


async def _slow_consumer(cluster: Cluster, topic: str) -> RawPulsarConnection:
    """Subscribed with permits for 2^32 - 1 messages, through a socket with a small
    receive buffer, and reading nothing (until the test says)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", cluster.port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=16 * 1024)
    conn = RawPulsarConnection(reader, writer)
    await conn.handshake()
    await conn.send(pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
        topic=topic, subscription="slow", subType=pb.CommandSubscribe.Exclusive, consumer_id=1, request_id=1,
        initialPosition=pb.CommandSubscribe.Earliest,
    )))  # fmt: skip
    assert (await conn.receive()).command.type == Type.SUCCESS
    await conn.send(pb.BaseCommand(type=Type.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=2**32 - 1)))
    return conn


async def _sent_when_settled(admin: AdminClient, topic: str) -> int:
    """The subscription's messages out once they stop growing (sampled every 0.25 s)."""
    last, same_since = -1, time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (sub,) = (await admin.topic_stats(topic)).subscriptions
        if sub.msg_out_counter != last:
            last, same_since = sub.msg_out_counter, time.monotonic()
        elif last > 0 and time.monotonic() - same_since >= 1.0:
            return last
        await asyncio.sleep(0.25)
    raise AssertionError(f"messages out still growing after 30 s: {last}")


def _other_client_goes_on(cluster: Cluster, topic: str) -> list[bytes]:
    client = pulsar_client(cluster.url, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(topic, "other")
        producer = client.create_producer(topic)
        for n in range(5):
            producer.send(f"o{n}".encode())
        got = [consumer.receive(5000).data() for _ in range(5)]
        return got
    finally:
        client.close()


async def test_a_consumer_that_does_not_read_is_sent_a_bounded_amount_then_the_rest(cluster: Cluster) -> None:
    topic = await _backlog(cluster, "bounded")
    other = f"{topic}-other"
    async with AdminClient(cluster.address, 10) as admin, await _slow_consumer(cluster, topic) as conn:
        sent = await _sent_when_settled(admin, topic)
        assert sent * SIZE <= BOUND, f"{sent} messages ({sent * SIZE} bytes) sent to a client that reads nothing"
        assert await asyncio.to_thread(_other_client_goes_on, cluster, other) == [f"o{n}".encode() for n in range(5)]
        got = []
        while len(got) < COUNT:  # it reads now: everything comes, in order
            frame = await conn.receive()
            if frame.command.type == Type.MESSAGE:
                got.append(int.from_bytes(frame.payload[:4], "big"))
        assert got == list(range(COUNT))
    assert "Traceback" not in cluster.broker.log_tail(400)


async def test_a_consumer_that_never_reads_is_closed_after_the_write_timeout(cluster: Cluster) -> None:
    topic = await _backlog(cluster, "stuck")
    async with AdminClient(cluster.address, 10) as admin, await _slow_consumer(cluster, topic):
        started = time.monotonic()
        while True:  # the broker drops the consumer: what it held goes back to the backlog
            (sub,) = (await admin.topic_stats(topic)).subscriptions
            if sub.consumers == 0:
                break
            assert time.monotonic() - started < WRITE_TIMEOUT_S + 15, "the stuck connection is still open"
            await asyncio.sleep(0.25)
        assert sub.backlog == COUNT and sub.unacked == 0
    assert "has not read what it was sent" in cluster.broker.log_tail(400)
    assert cluster.broker.alive
    assert "Traceback" not in cluster.broker.log_tail(400)


async def test_a_batch_ack_claiming_a_batch_no_entry_can_hold_is_refused_at_once(cluster: Cluster) -> None:
    topic = f"persistent://{await new_namespace(cluster.address, 'slow')}/huge-batch"
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        await conn.send(pb.BaseCommand(type=Type.PRODUCER, producer=pb.CommandProducer(topic=topic, producer_id=1, request_id=1)))
        assert (await conn.receive()).command.type == Type.PRODUCER_SUCCESS
        send = pb.BaseCommand(type=Type.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0))
        await conn.send_bytes(encode_payload_command(send, pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1), b"x"))
        receipt = (await conn.receive()).command.send_receipt
        await conn.send(pb.BaseCommand(type=Type.SUBSCRIBE, subscribe=pb.CommandSubscribe(
            topic=topic, subscription="s", subType=pb.CommandSubscribe.Shared, consumer_id=1, request_id=2,
            initialPosition=pb.CommandSubscribe.Earliest,
        )))  # fmt: skip
        assert (await conn.receive()).command.type == Type.SUCCESS
        mid = commands.message_id(receipt.message_id.ledgerId, receipt.message_id.entryId)
        mid.ack_set.append(1)  # messages 1.. acknowledged, of a "batch" of 2^31 - 1
        mid.batch_size = 2**31 - 1
        started = time.monotonic()
        await conn.send(pb.BaseCommand(type=Type.ACK, ack=pb.CommandAck(
            consumer_id=1, ack_type=pb.CommandAck.Individual, message_id=[mid], request_id=3,
        )))  # fmt: skip
        answer = (await conn.receive(timeout_s=30)).command
        assert answer.type == Type.ACK_RESPONSE and answer.ackResponse.error == pb.NotAllowedError, answer
        assert "cannot be stored" in answer.ackResponse.message
        await conn.send(commands.ping())
        assert (await conn.receive()).command.type == Type.PONG
        assert time.monotonic() - started < 2.0
    async with AdminClient(cluster.address, 10) as admin:
        (sub,) = (await admin.topic_stats(topic)).subscriptions
        assert sub.backlog == 1  # nothing was acknowledged
    assert "Traceback" not in cluster.broker.log_tail(400)


async def test_a_compressed_batch_claiming_2_31_messages_is_refused_at_once(cluster: Cluster) -> None:
    topic = f"persistent://{await new_namespace(cluster.address, 'slow')}/huge-count"
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        await conn.send(pb.BaseCommand(type=Type.PRODUCER, producer=pb.CommandProducer(topic=topic, producer_id=1, request_id=1)))
        assert (await conn.receive()).command.type == Type.PRODUCER_SUCCESS
        metadata = pb.MessageMetadata(
            producer_name="p", sequence_id=0, publish_time=1, compression=pb.LZ4, uncompressed_size=2**31,
            num_messages_in_batch=2**31 - 1,
        )  # fmt: skip
        send = pb.BaseCommand(type=Type.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0, num_messages=2**31 - 1))
        started = time.monotonic()
        await conn.send_bytes(encode_payload_command(send, metadata, b"lz4 bytes"))
        refused = (await conn.receive(timeout_s=30)).command
        assert refused.type == Type.SEND_ERROR and refused.send_error.error == pb.NotAllowedError, refused
        await conn.send(commands.ping())
        assert (await conn.receive()).command.type == Type.PONG
        assert time.monotonic() - started < 2.0
    async with AdminClient(cluster.address, 10) as admin:
        assert (await admin.topic_stats(topic)).entries == 0  # nothing stored
    assert "Traceback" not in cluster.broker.log_tail(400)


async def test_a_bad_compressed_send_is_refused_clearly_and_nothing_of_it_is_stored(cluster: Cluster) -> None:
    """An unknown codec, a corrupt payload, a lying uncompressed size (under, over, past
    the broker's limit): each a SEND_ERROR saying so, nothing stored; the connection and
    the topic go on (a good compressed batch after them is stored and read)."""
    topic = f"persistent://{await new_namespace(cluster.address, 'codecs')}/bad"
    records = b"".join(
        struct.pack(">I", len(m)) + m + p
        for p in (b"first" * 40, b"second" * 40)
        for m in [pb.SingleMessageMetadata(payload_size=len(p), partition_key="k").SerializeToString()]
    )  # fmt: skip
    lz4 = compression.compress(compression.CompressionType.LZ4, records)

    def meta(**fields) -> bytes:
        return pb.MessageMetadata(**({"producer_name": "p", "sequence_id": 0, "publish_time": 1} | fields)).SerializeToString()

    bad = [
        (meta(uncompressed_size=len(records), num_messages_in_batch=2) + b"\x40\x09", lz4, "unknown compression type 9"),
        (meta(compression=pb.LZ4, uncompressed_size=len(records), num_messages_in_batch=2), b"\xff" * 64,
         "LZ4-compressed payload of 64 bytes that does not decompress"),
        (meta(compression=pb.LZ4, uncompressed_size=len(records) + 7, num_messages_in_batch=2), lz4,
         f"not the {len(records) + 7} it declares"),
        (meta(compression=pb.LZ4, uncompressed_size=len(records) - 7, num_messages_in_batch=2), lz4, "LZ4-compressed"),
        (meta(compression=pb.ZSTD, uncompressed_size=2**30),
         compression.compress(compression.CompressionType.ZSTD, b"\0" * 10_000_000), "at most 5242880"),
    ]  # fmt: skip
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        await conn.send(pb.BaseCommand(type=Type.PRODUCER, producer=pb.CommandProducer(topic=topic, producer_id=1, request_id=1)))
        assert (await conn.receive()).command.type == Type.PRODUCER_SUCCESS
        for seq, (metadata, payload, why) in enumerate(bad):
            send = pb.BaseCommand(type=Type.SEND, send=pb.CommandSend(producer_id=1, sequence_id=seq, num_messages=2))
            await conn.send_bytes(encode_payload_command(send, metadata, payload))
            refused = (await conn.receive(timeout_s=10)).command
            assert refused.type == Type.SEND_ERROR and refused.send_error.sequence_id == seq, refused
            assert why in refused.send_error.message, refused.send_error.message
        good = meta(compression=pb.LZ4, uncompressed_size=len(records), num_messages_in_batch=2, sequence_id=10)
        send = pb.BaseCommand(type=Type.SEND, send=pb.CommandSend(producer_id=1, sequence_id=10, num_messages=2))
        await conn.send_bytes(encode_payload_command(send, good, lz4))
        receipt = (await conn.receive(timeout_s=10)).command
        assert receipt.type == Type.SEND_RECEIPT and receipt.send_receipt.sequence_id == 10, receipt
    async with AdminClient(cluster.address, 10) as admin:
        assert (await admin.topic_stats(topic)).entries == 1  # the good batch only
    async with mg.Client(cluster.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        got = [await consumer.receive(timeout_millis=10_000) for _ in range(2)]
    assert [(m.data(), m.partition_key()) for m in got] == [(b"first" * 40, "k"), (b"second" * 40, "k")]
    assert "Traceback" not in cluster.broker.log_tail(400)


async def test_an_error_quoting_a_huge_name_is_cut_to_a_readable_frame(cluster: Cluster) -> None:
    topic = "\x01" * 70_000  # quoted as "\\x01": 280,000 characters
    async with await RawPulsarConnection.open("127.0.0.1", cluster.port) as conn:
        await conn.handshake()
        await conn.send(lookup_command(topic, 7))
        answer = (await conn.receive()).command.lookupTopicResponse
        assert (answer.request_id, answer.response, answer.error) == (
            7, pb.CommandLookupTopicResponse.Failed, pb.InvalidTopicName,
        )  # fmt: skip
        assert answer.message.startswith("invalid topic name") and len(answer.message) <= 1024, len(answer.message)
        assert answer.message.endswith("characters)")  # it says it was cut
