"""Chunked messages with the Magnetar SDK (``chunking_enabled``) through the gRPC door,
and across doors with pulsar-client, on real bookie and broker processes whose broker has
a small max message size (64 KiB), so a message of a few hundred KiB goes as chunks.

One cluster for the module: 1 bookie and one broker serving both doors."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration

MAX_MESSAGE = 64 * 1024
QUORUM = dict(ensemble_size=1, write_quorum=1, ack_quorum=1)


@pytest.fixture(scope="module")
def broker(module_bookie_factory, module_broker_factory):  # type: ignore[no-untyped-def]
    broker = module_broker_factory.create(max_message_bytes=MAX_MESSAGE, **QUORUM)
    start_all([module_bookie_factory.create(), broker])  # start-ups overlap
    return broker


async def _producer(sdk: mg.Client, topic: str, codec: str = "NONE", send_timeout_millis: int = 10_000) -> mg.Producer:
    return await sdk.create_producer(
        topic, chunking_enabled=True, batching_enabled=False, max_message_size=MAX_MESSAGE,
        compression_type=getattr(mg.CompressionType, codec), send_timeout_millis=send_timeout_millis,
    )  # fmt: skip


@pytest.mark.parametrize("codec", ["NONE", "ZSTD"])
async def test_sdk_chunked_messages_round_trip_acked_and_sought(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    """Messages of about 3 and 2 times the max message size go as chunks (one entry
    each, every chunk with the message's sequence id: the gRPC door must not take the
    second chunk for a resend of the first). The consumer gets each whole, with the id
    the send returned (first chunk;last chunk); acking acks every chunk; a seek to the
    id gives the message whole again (start_message_id_inclusive), or the one after it."""
    topic = f"persistent://{await new_namespace(broker.address, 'sdkchunks')}/t{codec}"
    payloads = [os.urandom(3 * MAX_MESSAGE + 1000), b"small", os.urandom(2 * MAX_MESSAGE)]
    async with mg.Client(broker.address) as sdk:
        consumer = await sdk.subscribe(topic, "s")
        producer = await _producer(sdk, topic, codec)
        ids = [await producer.send(p, properties={"i": str(i)}) for i, p in enumerate(payloads)]
        got = []
        for _ in payloads:
            msg = await asyncio.wait_for(consumer.receive(), 20)
            await consumer.acknowledge(msg)
            got.append(msg)
        await consumer.close()
        assert [m.data() for m in got] == payloads
        assert [m.properties() for m in got] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
        assert [m.message_id() for m in got] == ids
        assert [str(m.message_id()) for m in got] == [str(i) for i in ids]
        assert isinstance(ids[0], ChunkMessageId) and isinstance(ids[2], ChunkMessageId)
        assert not isinstance(ids[1], ChunkMessageId)
        assert ids[0].entry_id() - ids[0].first_chunk_message_id().entry_id() == 3  # 4 chunks
        assert MessageId.parse(str(ids[2])) == ids[2] and MessageId.deserialize(ids[2].serialize()) == ids[2]

        again = await sdk.subscribe(topic, "s", start_message_id_inclusive=True)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(again.receive(), 1.0)  # every chunk was acked
        await again.seek(ids[2])  # inclusive: the chunked message itself, whole
        sought = await asyncio.wait_for(again.receive(), 20)
        assert (sought.data(), sought.message_id()) == (payloads[2], ids[2])
        await again.close()

        after = await sdk.subscribe(topic, "s")  # start_message_id_inclusive off (pulsar-client's default)
        await after.seek(ids[0])  # the message after the chunked one: none of its chunks
        following = await asyncio.wait_for(after.receive(), 20)
        assert (following.data(), following.message_id()) == (payloads[1], ids[1])


async def test_sdk_refuses_chunking_with_batching_as_pulsar_client(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{await new_namespace(broker.address, 'sdkchunks')}/conf"
    async with mg.Client(broker.address) as sdk:
        with pytest.raises(mg.InvalidConfiguration, match="Batching and chunking"):
            await sdk.create_producer(topic, chunking_enabled=True)
        plain = await sdk.create_producer(topic, batching_enabled=False, max_message_size=MAX_MESSAGE)
        with pytest.raises(mg.MessageTooBig):
            await plain.send(os.urandom(MAX_MESSAGE + 1))


@pytest.mark.parametrize("codec", ["NONE", "LZ4"])
async def test_chunked_messages_cross_doors_with_pulsar_client(broker, codec: str) -> None:  # type: ignore[no-untyped-def]
    """A chunked message from the SDK is read whole by pulsar-client (Pulsar door), and one
    from pulsar-client (compressed, then cut) is read whole by the SDK."""
    topic = f"persistent://{await new_namespace(broker.address, 'sdkchunks')}/x{codec}"
    ours, theirs = os.urandom(3 * MAX_MESSAGE), os.urandom(2 * MAX_MESSAGE + 77)
    client = pulsar_client(broker.pulsar_url, operation_timeout_seconds=15, connection_timeout_ms=5000)
    try:
        pc_consumer = await asyncio.to_thread(client.subscribe, topic, "pc")
        async with mg.Client(broker.address) as sdk:
            consumer = await sdk.subscribe(topic, "sdk", initial_position=mg.InitialPosition.Earliest)
            producer = await _producer(sdk, topic, codec)
            sent = await producer.send(ours)

            def pulsar_side() -> tuple[bytes, str, str]:
                got = pc_consumer.receive(timeout_millis=20_000)
                pc_consumer.acknowledge(got)
                p = client.create_producer(topic, chunking_enabled=True, batching_enabled=False,
                                           compression_type=getattr(pulsar.CompressionType, codec))  # fmt: skip
                theirs_id = p.send(theirs)
                return got.data(), str(got.message_id()), str(theirs_id)

            pc_got, pc_id, theirs_id = await asyncio.to_thread(pulsar_side)
            first = await asyncio.wait_for(consumer.receive(), 20)
            second = await asyncio.wait_for(consumer.receive(), 20)
        assert pc_got == ours
        assert ";" in pc_id  # pulsar-client saw a chunked message
        assert first.data() == ours and first.message_id() == sent
        assert second.data() == theirs
        assert isinstance(second.message_id(), ChunkMessageId) and ";" in theirs_id
    finally:
        await asyncio.to_thread(client.close)


async def test_a_producer_sigkilled_mid_message_never_gets_it_delivered_in_part(broker) -> None:  # type: ignore[no-untyped-def]
    """A producer process sends 3 chunked messages (each printed once its send completed)
    and is SIGKILLed after the broker stored 2 of the 4 chunks of a 4th. A consumer gets
    the 3 whole, with the ids their sends returned, never any part of the 4th, and the
    topic serves a new producer's messages, chunked or not."""
    topic = f"persistent://{await new_namespace(broker.address, 'sdkchunks')}/killed"
    size = 3 * MAX_MESSAGE + 5
    async with mg.Client(broker.address) as sdk:
        consumer = await sdk.subscribe(topic, "s")
        cmd = [sys.executable, "-m", "magnetar.testing.chunk_producer", broker.address, topic, str(MAX_MESSAGE),
               str(size), "3", "2"]  # fmt: skip
        proc = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=60)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[-1] == "dying"
        acked = [json.loads(line) for line in lines[:-1]]
        assert len(acked) == 3
        producer = await _producer(sdk, topic)
        after = [os.urandom(2 * MAX_MESSAGE), b"small"]
        for p in after:
            await producer.send(p)
        got = []
        for _ in range(len(acked) + len(after)):
            msg = await asyncio.wait_for(consumer.receive(), 20)
            await consumer.acknowledge(msg)
            got.append(msg)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(consumer.receive(), 1.0)  # nothing of the 4th
    assert [(hashlib.sha256(m.data()).hexdigest(), str(m.message_id())) for m in got[:3]] == [
        (a["sha"], a["id"]) for a in acked
    ]
    assert [m.data() for m in got[3:]] == after
    assert all(len(m.data()) == size for m in got[:3])


async def test_owner_broker_sigkilled_mid_chunked_message(bookie_factory, broker_factory) -> None:  # type: ignore[no-untyped-def]
    """The broker owning the topic is SIGKILLed after it stored the first 2 chunks of a
    4-chunk message (the rest held back until then); the producer reconnects to the other
    broker and sends the rest and the messages after it. Every message whose send
    completed is on the topic whole, exactly once; none in part."""
    brokers = [broker_factory.create(max_message_bytes=MAX_MESSAGE, **QUORUM) for _ in range(2)]
    start_all([bookie_factory.create(), *brokers])
    topic = "persistent://public/default/chunks-failover"
    payloads = [os.urandom(3 * MAX_MESSAGE + 9) for _ in range(4)]
    async with mg.Client(",".join(b.address for b in brokers)) as sdk:
        producer = await _producer(sdk, topic, send_timeout_millis=60_000)
        part = producer.partitions[0]
        enqueue, held = part._enqueue, []

        def hold_back(op):  # type: ignore[no-untyped-def]
            if (op.send.lowest_sequence_id, op.send.chunk_id) >= (1, 2):
                held.append(op)  # message 1 from its chunk 2 on, and every later message
            else:
                enqueue(op)

        part._enqueue = hold_back  # type: ignore[method-assign]
        first = await producer.send(payloads[0])
        sends = [producer.send_async(p, None) for p in payloads[1:]]
        while part._pending:  # until chunks 0 and 1 of message 1 are stored
            await asyncio.sleep(0.01)
        owner = part.broker_address
        victim = next(b for b in brokers if b.address == owner)
        await asyncio.to_thread(victim.kill)
        part._enqueue = enqueue
        for op in held:
            enqueue(op)
        ids = [first, *await asyncio.wait_for(asyncio.gather(*sends), 60)]
        assert part.broker_address != owner

        consumer = await sdk.subscribe(topic, "check", initial_position=mg.InitialPosition.Earliest)
        got = []
        for _ in payloads:
            msg = await asyncio.wait_for(consumer.receive(), 30)
            got.append((msg.data(), msg.message_id()))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(consumer.receive(), 1.0)
    assert [g[0] for g in got] == payloads
    assert [g[1] for g in got] == ids


async def test_reconsume_later_of_a_chunked_message_is_refused_and_changes_nothing(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{await new_namespace(broker.address, 'sdkchunks')}/retry"
    payload = os.urandom(2 * MAX_MESSAGE)
    async with mg.Client(broker.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", consumer_type=mg.ConsumerType.Shared, enable_retry=True,
                                       negative_ack_redelivery_delay_ms=100)  # fmt: skip
        producer = await _producer(sdk, topic)
        sent = await producer.send(payload)
        msg = await asyncio.wait_for(consumer.receive(), 20)
        with pytest.raises(mg.OperationNotSupported, match="chunked message"):
            await consumer.reconsume_later(msg, 1000)
        await consumer.negative_acknowledge(msg)  # every chunk comes again: the message whole
        again = await asyncio.wait_for(consumer.receive(), 20)
        assert (again.data(), again.message_id(), again.redelivery_count()) == (payload, sent, 1)


async def test_a_chunked_message_with_a_schema_carries_its_version_and_decodes_whole(broker) -> None:  # type: ignore[no-untyped-def]
    """Every chunk of a schema producer's message carries the version the broker gave it,
    and the reassembled message decodes with the consumer's schema."""
    from magnetar.schema import StringSchema

    topic = f"persistent://{await new_namespace(broker.address, 'sdkchunks')}/schema"
    text = "".join(chr(0x41 + i % 26) for i in range(3 * MAX_MESSAGE)) + "é"
    async with mg.Client(broker.address) as sdk:
        consumer = await sdk.subscribe(topic, "s", schema=StringSchema())
        producer = await sdk.create_producer(
            topic, schema=StringSchema(), chunking_enabled=True, batching_enabled=False, max_message_size=MAX_MESSAGE,
        )  # fmt: skip
        sent = await producer.send(text)
        msg = await asyncio.wait_for(consumer.receive(), 20)
        assert isinstance(sent, ChunkMessageId) and msg.message_id() == sent
        assert msg.value() == text
        assert msg.schema_version() == (0).to_bytes(8, "big")
        async with AdminClient(broker.address) as admin:
            chunks = await admin.peek_messages(topic, "s", 1, 10)  # the stored entries, one per chunk
        assert [c.chunk_id for c in chunks] == [0, 1, 2, 3]
        assert {c.schema_version for c in chunks} == {(0).to_bytes(8, "big")}


async def test_a_chunked_message_nacked_past_max_redeliver_count_reaches_the_dlq_whole(broker) -> None:  # type: ignore[no-untyped-def]
    """The broker moves a dead chunked message's chunks to the DLQ topic, where a consumer
    reassembles it: the whole payload, once, with the dead-letter properties."""
    ns = await new_namespace(broker.address, "sdkchunks")
    topic = f"persistent://{ns}/dead"
    payload = os.urandom(3 * MAX_MESSAGE + 123)
    policy = mg.ConsumerDeadLetterPolicy(max_redeliver_count=2)
    async with mg.Client(broker.address) as sdk:
        consumer = await sdk.subscribe(
            topic, "s", consumer_type=mg.ConsumerType.Shared, dead_letter_policy=policy,
            negative_ack_redelivery_delay_ms=100,
        )  # fmt: skip
        dlq = await sdk.subscribe(f"{topic}-s-DLQ", "s-DLQ-sub", consumer_type=mg.ConsumerType.Shared)
        producer = await _producer(sdk, topic)
        sent = await producer.send(payload)
        await producer.send(b"fine")
        counts = []
        while len(counts) < 2:
            msg = await asyncio.wait_for(consumer.receive(), 20)
            if msg.data() == b"fine":
                await consumer.acknowledge(msg)
                continue
            assert msg.data() == payload and msg.message_id() == sent
            counts.append(msg.redelivery_count())
            await consumer.negative_acknowledge(msg)
        dead = await asyncio.wait_for(dlq.receive(), 20)
        assert len(dead.data()) == len(payload) and dead.data() == payload
        assert dead.properties()["REAL_TOPIC"] == topic
        await dlq.acknowledge(dead)
        with pytest.raises(mg.Timeout):
            await consumer.receive(timeout_millis=1_500)
        with pytest.raises(mg.Timeout):
            await dlq.receive(timeout_millis=500)
