"""Chunked messages (Pulsar's ``chunking_enabled``) through the Pulsar protocol door with
pulsar-client (its C++ core), on real bookie and broker processes whose broker has a small
max message size (64 KiB), so a message of a few hundred KiB goes as several chunks.

One cluster for the module: 1 bookie and one broker serving both doors."""

from __future__ import annotations

import asyncio
import os

import pulsar
import pytest

from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration

MAX_MESSAGE = 64 * 1024
QUORUM = dict(ensemble_size=1, write_quorum=1, ack_quorum=1)


@pytest.fixture(scope="module")
def broker(module_bookie_factory, module_broker_factory):  # type: ignore[no-untyped-def]
    module_bookie_factory()
    return module_broker_factory(max_message_bytes=MAX_MESSAGE, **QUORUM)


def _client(url: str) -> pulsar.Client:
    return pulsar_client(url, operation_timeout_seconds=15, connection_timeout_ms=5000)


def _first_chunk(chunked_id: str) -> tuple[int, int]:
    """(ledger, entry) of the first chunk of a chunked message id, from its text
    ``(ledger,entry,partition,batch);(ledger,entry,partition,batch)``."""
    ledger, entry = chunked_id.split(";")[0].strip("()").split(",")[:2]
    return int(ledger), int(entry)


async def test_pulsar_client_chunked_messages_round_trip_acked_and_sought(broker) -> None:  # type: ignore[no-untyped-def]
    """Messages of about 3 and 2 times the broker's max message size go as chunks, each
    stored as its own entry (the receipt is the chunked id, first and last chunk); the
    consumer gets each whole, with the same id. Acking it acks every chunk (a new
    consumer of the subscription gets nothing again); a seek to it gives it whole again."""
    topic = f"persistent://{await new_namespace(broker.address, 'chunks')}/t"
    payloads = [os.urandom(3 * MAX_MESSAGE + 1000), b"small", os.urandom(2 * MAX_MESSAGE)]

    def run() -> tuple[list[str], list[tuple[bytes, str]], list[str], list[bytes], tuple[bytes, str]]:
        client = _client(broker.pulsar_url)
        try:
            consumer = client.subscribe(topic, "s")
            producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False, send_timeout_millis=10_000)
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
