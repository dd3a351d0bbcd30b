"""pulsar-client's names in the SDK: its exception names (``magnetar.exceptions``),
``Client.shutdown``, ``initial_sequence_id``, ``Consumer.get_last_message_id`` and the
message and reader listeners, against the broker twin of test_client_sdk."""

from __future__ import annotations

import asyncio
import inspect

import pulsar.exceptions
import pytest
from test_client_sdk import _TwinThread

import magnetar
import magnetar.asyncio as ma
import magnetar.exceptions as mx
from magnetar.common.errors import MagnetarError


# -- exceptions ---------------------------------------------------------------------------
def _pulsar_exception_names() -> list[str]:
    return [n for n, c in vars(pulsar.exceptions).items() if inspect.isclass(c) and issubclass(c, Exception)]


def test_every_pulsar_client_exception_name_is_a_magnetar_error_under_pulsar_exception() -> None:
    names = _pulsar_exception_names()
    assert "PulsarException" in names and len(names) > 40  # the installed package's list
    for name in names:
        cls = getattr(mx, name, None)
        assert inspect.isclass(cls) and issubclass(cls, mx.PulsarException), name
        assert name in mx.__all__, name
        assert getattr(magnetar, name) is cls and getattr(ma, name) is cls, name
    assert mx.PulsarException is MagnetarError


@pytest.mark.parametrize(("pulsar_name", "magnetar_class"), [
    ("Timeout", "Timeout"), ("TopicNotFound", "TopicNotFound"), ("ProducerBusy", "ProducerBusy"),
    ("ConsumerBusy", "ConsumerBusy"), ("IncompatibleSchema", "IncompatibleSchema"),
    ("ProducerQueueIsFull", "ProducerQueueIsFull"), ("NotConnected", "NotConnected"),
    ("ConnectError", "NotConnected"), ("AuthenticationError", "AuthenticationError"),
    ("AuthorizationError", "AuthorizationError"), ("MessageTooBig", "MessageTooBig"),
    ("InvalidTopicName", "InvalidTopicName"), ("SubscriptionNotFound", "SubscriptionNotFound"),
    ("ServiceUnitNotReady", "NotOwner"), ("ChecksumError", "ChecksumMismatch"),
    ("BrokerMetadataError", "MetadataError"), ("ProducerBlockedQuotaExceededError", "ProducerBlockedQuotaExceeded"),
    ("ProducerBlockedQuotaExceededException", "ProducerBlockedQuotaExceeded"),
])  # fmt: skip
def test_pulsar_names_are_the_classes_magnetar_raises_for_the_same_condition(pulsar_name, magnetar_class) -> None:
    from magnetar.common import errors

    assert getattr(mx, pulsar_name) is getattr(errors, magnetar_class)


def test_the_sdk_raises_pulsar_client_names_for_bad_options_and_urls() -> None:
    with pytest.raises(mx.InvalidUrl):
        ma.Client("http://localhost:6660")
    with pytest.raises(mx.InvalidConfiguration):
        ma.Client("magnetar://localhost:6660", connection_timeout_ms=1)
    with pytest.raises(mx.InvalidConfiguration):
        magnetar.ConsumerBatchReceivePolicy(0, 0, 0)
    # Still the errors they were: code catching InvalidArgument or MagnetarError works as before.
    with pytest.raises(magnetar.InvalidArgument):
        ma.Client("magnetar+ssl://localhost:6660", tls_allow_insecure_connection=True)


async def test_a_closed_producer_and_consumer_raise_already_closed(client) -> None:
    producer = await client.create_producer("closed")
    consumer = await client.subscribe("closed", "s")
    await producer.close()
    await consumer.close()
    with pytest.raises(mx.AlreadyClosed):
        await producer.send(b"x")
    with pytest.raises(mx.AlreadyClosed):
        await consumer.receive(timeout_millis=50)
    with pytest.raises(magnetar.ServiceClosed):  # what it was: an AlreadyClosed is a ServiceClosed
        await producer.send(b"x")


async def test_cumulative_ack_on_shared_raises_pulsar_client_name(client) -> None:
    producer = await client.create_producer("cumulative", batching_enabled=False)
    consumer = await client.subscribe(
        "cumulative", "s", consumer_type=ma.ConsumerType.Shared, initial_position=ma.InitialPosition.Earliest
    )
    await producer.send(b"x")
    msg = await consumer.receive(timeout_millis=2000)
    with pytest.raises(mx.CumulativeAcknowledgementNotAllowedError):
        await consumer.acknowledge_cumulative(msg)


# -- Client.shutdown ----------------------------------------------------------------------
async def test_shutdown_closes_everything_at_once_without_flushing(twin, client) -> None:
    producer = await client.create_producer("down", batching_enabled=False, send_timeout_millis=30000)
    consumer = await client.subscribe("down", "s", initial_position=ma.InitialPosition.Earliest)
    reader = await client.create_reader("down", magnetar.MessageId.earliest)
    await producer.send(b"stored")
    msg = await consumer.receive(timeout_millis=2000)
    await consumer.acknowledge(msg)  # grouped: not sent yet
    twin.state.hold_receipts = True
    pending = producer.send_async(b"unconfirmed", None)
    waiting = asyncio.create_task(consumer.receive())
    # close() would wait up to the send timeout (30 s) for the held receipt; shutdown does not.
    await asyncio.wait_for(client.shutdown(), 3)
    with pytest.raises(mx.AlreadyClosed):
        await pending
    with pytest.raises(mx.AlreadyClosed):
        await waiting
    assert twin.state.acks == []  # the grouped ack was dropped, not flushed
    for call in (producer.send(b"x"), consumer.receive(50), reader.read_next(50), client.create_producer("down")):
        with pytest.raises(mx.AlreadyClosed):
            await call
    with pytest.raises(mx.AlreadyClosed):
        await client.subscribe("down", "s2")
    await client.close()  # after shutdown: nothing left to do


def test_blocking_client_shutdown_then_calls_fail_with_already_closed() -> None:
    server = _TwinThread()
    try:
        client = magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5)
        producer = client.create_producer("sync-down")
        consumer = client.subscribe("sync-down", "s")
        producer.send(b"x")
        client.shutdown()
        with pytest.raises(mx.AlreadyClosed):
            producer.send(b"y")
        with pytest.raises(mx.AlreadyClosed):
            consumer.receive(50)
        with pytest.raises(mx.AlreadyClosed):
            client.create_producer("sync-down")
        client.close()
    finally:
        server.close()


# -- initial_sequence_id ------------------------------------------------------------------
async def test_initial_sequence_id_numbers_from_the_baseline_and_deduplication_respects_it(twin, client) -> None:
    producer = await client.create_producer("seq", producer_name="p", initial_sequence_id=10, batching_enabled=False)
    assert producer.last_sequence_id() == 10  # before any send, as pulsar-client
    ids = [await producer.send(b"m%d" % i) for i in range(3)]
    assert [b.messages[0].sequence_id for b in twin.state.entry_batches("seq")] == [11, 12, 13]
    assert producer.last_sequence_id() == 13
    await producer.close()

    # The same name from a lower baseline: its first two are at or below what the broker
    # stored (13) and dropped as duplicates (answered with the stored ids); 14 is new.
    again = await client.create_producer("seq", producer_name="p", initial_sequence_id=11, batching_enabled=False)
    assert again.last_sequence_id() == 11  # its own baseline, not the broker's 13
    resent = [await again.send(b"again%d" % i) for i in range(3)]
    assert resent[:2] == ids[1:]
    assert [m.payload for b in twin.state.entry_batches("seq") for m in b.messages] == [b"m0", b"m1", b"m2", b"again2"]

    # Without it the producer goes on from the broker's last for the name.
    plain = await client.create_producer("seq", producer_name="p", batching_enabled=False)
    await plain.send(b"next")
    assert twin.state.entry_batches("seq")[-1].messages[0].sequence_id == 15


async def test_initial_sequence_id_with_batching_and_bad_values(twin, client) -> None:
    producer = await client.create_producer("seq-batch", initial_sequence_id=0, batching_max_publish_delay_ms=50)
    await asyncio.gather(*(producer.send_async(b"x", None) for _ in range(3)))
    (_, send), = twin.state.batches
    assert (send.lowest_sequence_id, send.highest_sequence_id) == (1, 3)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(mx.InvalidConfiguration):
            await client.create_producer("seq-batch", initial_sequence_id=bad)


# -- Consumer.get_last_message_id ---------------------------------------------------------
async def test_get_last_message_id_of_a_topic_and_refused_on_partitioned_and_multi_topic(twin, client) -> None:
    consumer = await client.subscribe("last", "s")
    assert (await consumer.get_last_message_id()).entry_id() == -1
    producer = await client.create_producer("last", batching_enabled=False)
    ids = [await producer.send(b"x") for _ in range(3)]
    last = await consumer.get_last_message_id()
    assert isinstance(last, ma.MessageId) and last == ids[-1]

    twin.state.partitions["persistent://public/default/last-parts"] = 2
    partitioned = await client.subscribe("last-parts", "s")
    multi = await client.subscribe(["last", "last-other"], "s2")
    for c in (partitioned, multi):
        with pytest.raises(mx.OperationNotSupported):
            await c.get_last_message_id()
    await consumer.close()
    with pytest.raises(mx.AlreadyClosed):
        await consumer.get_last_message_id()
