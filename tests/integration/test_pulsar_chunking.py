"""Chunked messages (Pulsar's ``chunking_enabled``) through the Pulsar protocol door with
pulsar-client (its C++ core), on real bookie and broker processes whose broker has a small
max message size (64 KiB), so a message of a few hundred KiB goes as several chunks.

One cluster for the module: 1 bookie and one broker serving both doors."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol.frames import encode_payload_command
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all
from magnetar.testing.pulsar_producer_process import payload
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection, lookup_command

pytestmark = pytest.mark.integration

MAX_MESSAGE = 64 * 1024
QUORUM = dict(ensemble_size=1, write_quorum=1, ack_quorum=1)
T = pb.BaseCommand


@pytest.fixture(scope="module")
def broker(module_bookie_factory, module_broker_factory):  # type: ignore[no-untyped-def]
    broker = module_broker_factory.create(max_message_bytes=MAX_MESSAGE, **QUORUM)
    start_all([module_bookie_factory.create(), broker])  # start-ups overlap
    return broker


def _client(url: str) -> pulsar.Client:
    return pulsar_client(url, operation_timeout_seconds=15, connection_timeout_ms=5000)


def _first_chunk(chunked_id: str) -> tuple[int, int]:
    """(ledger, entry) of the first chunk of a chunked message id, from its text
    ``(ledger,entry,partition,batch);(ledger,entry,partition,batch)``."""
    ledger, entry = chunked_id.split(";")[0].strip("()").split(",")[:2]
    return int(ledger), int(entry)


@pytest.mark.parametrize("codec", ["NONE", "LZ4"])
async def test_pulsar_client_chunked_messages_round_trip_acked_and_sought(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    """Messages of about 3 and 2 times the broker's max message size go as chunks, each
    stored as its own entry (the receipt is the chunked id, first and last chunk); the
    consumer gets each whole, with the same id. Acking it acks every chunk (a new
    consumer of the subscription gets nothing again); a seek to it gives it whole again.
    With compression, the client compresses the whole message and cuts the compressed
    bytes into chunks: no chunk decompresses alone, and each must still be stored."""
    topic = f"persistent://{await new_namespace(broker.address, 'chunks')}/t{codec}"
    payloads = [os.urandom(3 * MAX_MESSAGE + 1000), b"small", os.urandom(2 * MAX_MESSAGE)]

    def run() -> tuple[list[str], list[tuple[bytes, str]], list[str], list[bytes], tuple[bytes, str]]:
        client = _client(broker.pulsar_url)
        try:
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False, send_timeout_millis=10_000,
                                              compression_type=getattr(pulsar.CompressionType, codec))  # fmt: skip
            ids = [producer.send(p) for p in payloads]
            got = []
            for _ in payloads:
                msg = consumer.receive(timeout_millis=20_000)
                consumer.acknowledge(msg)
                got.append((msg.data(), str(msg.message_id())))
            consumer.close()
            again = client.subscribe(topic, "s")
            redelivered = []
            try:
                redelivered.append(again.receive(timeout_millis=1000).data())
            except pulsar.Timeout:
                pass
            # By its first chunk's id: pulsar-client's seek to a chunked id sends its last
            # chunk's and then drops the chunks before it (docs/pulsar-protocol.md).
            ledger, entry = _first_chunk(str(ids[2]))
            again.seek(pulsar.MessageId(-1, ledger, entry, -1))
            sought = again.receive(timeout_millis=20_000)
            return [str(i) for i in ids], got, [str(i) for i in ids], redelivered, (sought.data(), str(sought.message_id()))
        finally:
            client.close()

    ids, got, _, redelivered, sought = await asyncio.to_thread(run)
    assert [g[0] for g in got] == payloads
    assert [g[1] for g in got] == ids
    assert ";" in ids[0] and ";" in ids[2] and ";" not in ids[1]  # chunked ids: first chunk;last chunk
    assert redelivered == []
    assert sought == (payloads[2], ids[2])


async def test_chunks_of_a_producer_that_dies_mid_message_are_never_delivered(broker) -> None:  # type: ignore[no-untyped-def]
    """A producer connection sends 2 of the 3 chunks of a message and is cut off (what the
    broker sees of a SIGKILLed client): a pulsar-client consumer never gets that message
    in part, and the messages after it, chunked or not, arrive whole."""
    topic = f"persistent://{await new_namespace(broker.address, 'chunks')}/dead"
    total = 3 * MAX_MESSAGE
    part = os.urandom(MAX_MESSAGE)
    client = _client(broker.pulsar_url)
    try:
        consumer = await asyncio.to_thread(client.subscribe, topic, "s")
        conn = await RawPulsarConnection.open("127.0.0.1", broker.protocol_port)
        await conn.handshake()
        await conn.send(T(type=T.PRODUCER, producer=pb.CommandProducer(topic=topic, producer_id=1, request_id=1, producer_name="dead")))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        for chunk_id in range(2):
            meta = pb.MessageMetadata(
                producer_name="dead", sequence_id=0, publish_time=1, uuid="dead-0", chunk_id=chunk_id,
                num_chunks_from_msg=3, total_chunk_msg_size=total,
            )  # fmt: skip
            send = T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0))
            await conn.send_bytes(encode_payload_command(send, meta, part))
            receipt = (await conn.receive()).command
            assert receipt.type == T.SEND_RECEIPT and receipt.send_receipt.message_id.entryId == chunk_id
        conn.writer.transport.abort()  # no CLOSE_PRODUCER: cut off mid-message
        after = [os.urandom(2 * MAX_MESSAGE), b"small"]

        def produce_and_receive() -> list[bytes]:
            producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False, send_timeout_millis=10_000)
            for p in after:
                producer.send(p)
            got = [consumer.receive(timeout_millis=20_000).data() for _ in after]
            try:
                got.append(consumer.receive(timeout_millis=1000).data())
            except pulsar.Timeout:
                pass
            return got

        assert await asyncio.to_thread(produce_and_receive) == after
    finally:
        await asyncio.to_thread(client.close)


async def _chunk(conn: RawPulsarConnection, name: str, chunk_id: int, part: bytes, n: int) -> pb.BaseCommand:
    """Send chunk ``chunk_id`` of message 0 of ``name`` (each part the same size); the answer."""
    meta = pb.MessageMetadata(
        producer_name=name, sequence_id=0, publish_time=1, uuid=f"{name}-0", chunk_id=chunk_id,
        num_chunks_from_msg=n, total_chunk_msg_size=n * len(part),
    )  # fmt: skip
    await conn.send_bytes(encode_payload_command(T(type=T.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0)), meta, part))
    return (await conn.receive()).command


async def test_a_message_cut_off_by_the_owner_dying_is_completed_by_the_resend(broker, module_broker_factory) -> None:  # type: ignore[no-untyped-def]
    """2 of 3 chunks are stored at the owner broker, which is SIGKILLed. The broker taking
    the topic over does not count the message as stored (PRODUCER_SUCCESS says no last
    sequence id), so the producer's resend of its last chunk is stored, and a consumer
    gets the message whole, once."""
    owner = module_broker_factory(zk_session_timeout_s=2.0, max_message_bytes=MAX_MESSAGE, **QUORUM)
    topic = f"persistent://{await new_namespace(owner.address, 'chunks')}/owner-dies"
    parts = [os.urandom(MAX_MESSAGE) for _ in range(3)]
    producer = pb.CommandProducer(topic=topic, producer_id=1, request_id=1, producer_name="resender")
    async with await RawPulsarConnection.open("127.0.0.1", owner.protocol_port) as conn:
        await conn.handshake()
        await conn.send(lookup_command(topic, 1))  # the owner: its first lookup
        assert (await conn.receive()).command.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect
        await conn.send(T(type=T.PRODUCER, producer=producer))
        assert (await conn.receive()).command.type == T.PRODUCER_SUCCESS
        for chunk_id in range(2):
            assert (await _chunk(conn, "resender", chunk_id, parts[chunk_id], 3)).type == T.SEND_RECEIPT
        owner.kill()
    deadline = time.monotonic() + 30
    async with await RawPulsarConnection.open("127.0.0.1", broker.protocol_port) as conn:
        await conn.handshake()
        while True:  # the survivor serves the topic once the owner's ZooKeeper session is gone
            producer.request_id += 1
            await conn.send(T(type=T.PRODUCER, producer=producer))
            answer = (await conn.receive()).command
            if answer.type == T.PRODUCER_SUCCESS or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert answer.type == T.PRODUCER_SUCCESS, answer
        assert answer.producer_success.last_sequence_id == -1  # message 0 is not complete
        receipt = await _chunk(conn, "resender", 2, parts[2], 3)
        assert receipt.type == T.SEND_RECEIPT and receipt.send_receipt.message_id.entryId >= 0, receipt

    def receive_all() -> list[bytes]:
        client = _client(broker.pulsar_url)
        try:
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            got = [consumer.receive(timeout_millis=20_000).data()]
            try:
                got.append(consumer.receive(timeout_millis=1000).data())
            except pulsar.Timeout:
                pass
            return got
        finally:
            client.close()

    assert await asyncio.to_thread(receive_all) == [b"".join(parts)]


# A pulsar-client producer process SIGKILLed in the middle of a large chunked message.
SIZES = [3 * MAX_MESSAGE + 100, 200, 2 * MAX_MESSAGE, 300]  # chunked, single, chunked, single
BIG = 200 * MAX_MESSAGE  # at least 200 chunks: the kill comes after the first few are stored


async def _kill_mid_message(broker, topic: str) -> tuple[list[int], int]:  # type: ignore[no-untyped-def]
    """Run the producer process; SIGKILL it once some chunks of its big message (not all)
    are stored. Returns the indexes of the messages it was acknowledged, and how many
    chunks of the big message were stored when it died."""
    acked: list[int] = []
    with subprocess.Popen(
        [sys.executable, "-m", "magnetar.testing.pulsar_producer_process", broker.pulsar_url, topic,
         *map(str, SIZES), "--big", str(BIG)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        try:
            admin = AdminClient(broker.address, 10)
            while (line := await asyncio.to_thread(proc.stdout.readline)) != "big\n":  # type: ignore[union-attr]
                assert line, f"the producer process ended early (exit {proc.poll()})"
                acked.append(json.loads(line)["acked"])
            base = (await admin.topic_stats(topic)).entries
            proc.stdin.write("go\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            deadline = time.monotonic() + 30
            while (await admin.topic_stats(topic)).entries < base + 3:
                assert time.monotonic() < deadline, "no chunk of the big message was stored"
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            stored = (await admin.topic_stats(topic)).entries - base
            # The broker goes on storing the chunks that were in the sockets' buffers: wait
            # until it is done, so what the test produces next comes after all of them.
            settled, last = 0, -1
            while settled < 3:
                assert time.monotonic() < deadline + 30, "the broker kept storing the dead producer's chunks"
                now = (await admin.topic_stats(topic)).entries
                settled, last = (settled + 1 if now == last else 0), now
                await asyncio.sleep(0.2)
        finally:
            await admin.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert acked == list(range(len(SIZES)))
    assert 0 < stored < BIG // MAX_MESSAGE, f"{stored} chunks stored: not mid-message"
    return acked, stored


def _produce_after(client: pulsar.Client, topic: str) -> list[bytes]:
    """A new producer on the topic: one chunked message and one single."""
    after = [payload(100, 2 * MAX_MESSAGE + 7), payload(101, 50)]
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False, send_timeout_millis=10_000)
    for p in after:
        producer.send(p)
    producer.close()
    return after


async def test_a_pulsar_client_producer_killed_mid_message_leaves_no_partial_message(broker) -> None:  # type: ignore[no-untyped-def]
    """A real pulsar-client producer process is SIGKILLed while the chunks of a message of
    200 chunks are being stored: a pulsar-client consumer gets every message the producer
    was acknowledged, whole and in order, never a part of the cut one (which arrives whole
    or not at all), and the topic serves a new producer, whose chunked and single messages
    arrive whole."""
    topic = f"persistent://{await new_namespace(broker.address, 'chunks')}/killed"
    client = _client(broker.pulsar_url)
    try:
        consumer = await asyncio.to_thread(client.subscribe, topic, "s")
        acked, stored = await _kill_mid_message(broker, topic)
        print(f"the producer was killed with {stored} chunks of its {BIG} byte message stored")
        after = await asyncio.to_thread(_produce_after, client, topic)

        def receive() -> list[bytes]:
            got = []
            while True:
                try:
                    msg = consumer.receive(timeout_millis=20_000 if len(got) < len(acked) + len(after) else 1000)
                except pulsar.Timeout:
                    return got
                consumer.acknowledge(msg)
                got.append(msg.data())

        got = await asyncio.to_thread(receive)
    finally:
        await asyncio.to_thread(client.close)
    _assert_whole(got, acked, after)


def _assert_whole(got: list[bytes], acked: list[int], after: list[bytes]) -> None:
    """``got`` is every acknowledged message and then ``after``, each whole, in order; the
    killed producer's big message is either absent or whole between them. (Whole when all
    its chunks were in the sockets' buffers at the kill: the broker reads and stores them
    after the producer is gone, as Pulsar's does; the producer was never acknowledged.)"""
    before = [payload(i, SIZES[i]) for i in acked]
    cut = [*before, *after]
    whole = [*before, payload(len(SIZES), BIG), *after]
    assert [len(g) for g in got] in ([len(g) for g in cut], [len(g) for g in whole])
    assert got in (cut, whole)


async def test_an_sdk_consumer_gets_no_partial_message_of_a_pulsar_client_producer_killed_mid_message(broker) -> None:  # type: ignore[no-untyped-def]
    """The same crash, read by our SDK's consumer: every acknowledged message whole, in
    order, never a part of the cut one (whole or not at all); a new producer's messages whole."""
    topic = f"persistent://{await new_namespace(broker.address, 'chunks')}/killed-sdk"
    async with mg.Client(broker.address) as sdk:
        consumer = await sdk.subscribe(topic, "s")
        acked, _ = await _kill_mid_message(broker, topic)
        client = _client(broker.pulsar_url)
        try:
            after = await asyncio.to_thread(_produce_after, client, topic)
        finally:
            await asyncio.to_thread(client.close)
        got = []
        while True:
            try:
                msg = await consumer.receive(timeout_millis=20_000 if len(got) < len(acked) + len(after) else 1000)
            except mg.Timeout:
                break
            await consumer.acknowledge(msg)
            got.append(msg.data())
    _assert_whole(got, acked, after)
