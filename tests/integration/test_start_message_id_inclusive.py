"""``start_message_id_inclusive`` on subscribe: after a seek to a message id, our SDK's
consumer gives the same messages as pulsar-client's (C++ ``startMessageIdInclusive``), for
an id of a single message and of a message inside a batch, on the same broker."""

from __future__ import annotations

import asyncio

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration

AFTER = 3  # messages read after each seek


async def _produce(address: str, topic: str) -> list[mg.MessageId]:
    """m0..m2 single, m3..m7 one batch, m8 and m9 single."""
    async with mg.Client(address) as client:
        single = await client.create_producer(topic, batching_enabled=False, producer_name="single")
        ids = [await single.send(f"m{n}".encode()) for n in range(3)]
        batch = await client.create_producer(topic, batching_max_messages=5, batching_max_publish_delay_ms=1000)
        futures = [await batch.enqueue(f"m{n}".encode()) for n in range(3, 8)]
        ids += [await f for f in futures]
        ids += [await single.send(f"m{n}".encode()) for n in range(8, 10)]
    assert {i.entry_id() for i in ids[3:8]} == {ids[3].entry_id()}  # one batch
    return ids


async def _sdk(address: str, topic: str, sub: str, inclusive: bool, targets: list[mg.MessageId]) -> list[list[str]]:
    async with mg.Client(address) as client:
        consumer = await client.subscribe(topic, sub, initial_position=mg.InitialPosition.Earliest,
                                          start_message_id_inclusive=inclusive)  # fmt: skip
        for _ in range(10):
            await consumer.acknowledge(await consumer.receive(timeout_millis=10_000))
        out = []
        for target in targets:
            await consumer.seek(target)
            out.append([(await consumer.receive(timeout_millis=10_000)).data().decode() for _ in range(AFTER)])
        return out


def _pulsar(url: str, topic: str, sub: str, inclusive: bool, targets: list[mg.MessageId]) -> list[list[str]]:
    client = pulsar_client(url, operation_timeout_seconds=10)
    try:
        consumer = client.subscribe(topic, sub, initial_position=pulsar.InitialPosition.Earliest,
                                    start_message_id_inclusive=inclusive)  # fmt: skip
        for _ in range(10):
            consumer.acknowledge(consumer.receive(10_000))
        out = []
        for t in targets:
            consumer.seek(pulsar.MessageId(-1, t.ledger_id(), t.entry_id(), t.batch_index()))
            out.append([consumer.receive(10_000).data().decode() for _ in range(AFTER)])
        return out
    finally:
        client.close()


@pytest.mark.parametrize("inclusive", [False, True])
async def test_a_seek_to_an_id_gives_what_pulsar_client_gives(shared_cluster, inclusive: bool) -> None:
    address = shared_cluster.broker.address
    topic = f"persistent://{await new_namespace(address, 'inclusive')}/seek"
    ids = await _produce(address, topic)
    targets = [ids[1], ids[5]]  # a single message; the third of a batch of five
    url = f"pulsar://127.0.0.1:{shared_cluster.broker.protocol_port}"
    theirs = await asyncio.to_thread(_pulsar, url, topic, "theirs", inclusive, targets)
    ours = await _sdk(address, topic, "ours", inclusive, targets)
    expected = (
        [["m1", "m2", "m3"], ["m5", "m6", "m7"]] if inclusive else [["m2", "m3", "m4"], ["m6", "m7", "m8"]]
    )
    assert theirs == expected
    assert ours == theirs
