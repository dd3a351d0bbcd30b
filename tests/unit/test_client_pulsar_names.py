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


def test_blocking_send_async_carries_the_ordering_key_as_send_does() -> None:
    server = _TwinThread()
    try:
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            consumer = client.subscribe("sync-keys", "s")
            producer = client.create_producer("sync-keys", batching_enabled=False)
            producer.send(b"a", partition_key="k", ordering_key=b"o1")
            producer.send_async(b"b", None, partition_key="k", ordering_key="o2")
            producer.flush()
            got = [consumer.receive(5000) for _ in range(2)]
            assert [(m.data(), m.partition_key(), m.ordering_key()) for m in got] == [
                (b"a", "k", b"o1"), (b"b", "k", b"o2"),
            ]
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


# -- message_listener and reader_listener -------------------------------------------------
async def test_message_listener_on_the_asyncio_client(twin, client, caplog) -> None:
    got: list[tuple[object, bytes]] = []
    arrived = asyncio.Event()

    async def listener(consumer, msg) -> None:  # a coroutine function is awaited
        got.append((consumer, msg.data()))
        await consumer.acknowledge(msg)
        if msg.data() == b"m1":
            raise RuntimeError("the application's bug")
        if len(got) == 4:
            arrived.set()

    consumer = await client.subscribe(
        "listened", "s", initial_position=ma.InitialPosition.Earliest, message_listener=listener
    )
    producer = await client.create_producer("listened", batching_enabled=False)
    for i in range(4):
        await producer.send(b"m%d" % i)
    await asyncio.wait_for(arrived.wait(), 5)
    assert [d for _, d in got] == [b"m0", b"m1", b"m2", b"m3"]  # in order, past the one that raised
    assert all(c is consumer for c, _ in got)
    assert "the application's bug" in caplog.text
    with pytest.raises(mx.InvalidConfiguration):
        await consumer.receive(50)
    with pytest.raises(mx.InvalidConfiguration):
        await consumer.batch_receive()
    await consumer.close()
    assert consumer._listener is None  # its task ended with it
    await producer.send(b"after close")
    await asyncio.sleep(0)
    assert len(got) == 4

    plain: list[bytes] = []
    reader = await client.create_reader(
        "listened", ma.MessageId.earliest, reader_listener=lambda r, m: plain.append(m.data())  # a plain function
    )
    await _until(lambda: len(plain) == 5)
    assert plain == [b"m0", b"m1", b"m2", b"m3", b"after close"]
    with pytest.raises(mx.InvalidConfiguration):
        await reader.read_next(50)
    for bad in ("not callable", 3):
        with pytest.raises(mx.InvalidConfiguration):
            await client.subscribe("listened", "s2", message_listener=bad)
        with pytest.raises(mx.InvalidConfiguration):
            await client.create_reader("listened", ma.MessageId.earliest, reader_listener=bad)


async def _until(predicate, timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def test_message_and_reader_listeners_on_the_blocking_client(caplog) -> None:
    import threading

    server = _TwinThread()
    try:
        with magnetar.Client(f"magnetar://{server.twin.address}", operation_timeout_seconds=5) as client:
            got: list[tuple[str, bytes]] = []
            done = threading.Event()

            def listener(consumer, msg) -> None:
                got.append((threading.current_thread().name, msg.data()))
                consumer.acknowledge(msg)  # the blocking consumer it was given
                if msg.data() == b"m0":
                    raise ValueError("the application's bug")
                if len(got) == 3:
                    done.set()

            consumer = client.subscribe(
                "sync-listened", "s", initial_position=magnetar.InitialPosition.Earliest, message_listener=listener
            )
            producer = client.create_producer("sync-listened", batching_enabled=False)
            for i in range(3):
                producer.send(b"m%d" % i)
            assert done.wait(5)
            assert [d for _, d in got] == [b"m0", b"m1", b"m2"]
            assert {t for t, _ in got} == {"magnetar-listener"}  # neither the caller's nor the client's thread
            assert "the application's bug" in caplog.text
            with pytest.raises(mx.InvalidConfiguration):
                consumer.receive(50)
            with pytest.raises(mx.InvalidConfiguration):
                consumer.batch_receive()
            consumer.close()
            assert not consumer._listener._thread.is_alive()  # close ended the listener thread

            read: list[bytes] = []
            all_read = threading.Event()

            def on_read(reader, msg) -> None:
                read.append(msg.data())
                if len(read) == 3:
                    all_read.set()

            reader = client.create_reader("sync-listened", magnetar.MessageId.earliest, reader_listener=on_read)
            assert all_read.wait(5)
            assert read == [b"m0", b"m1", b"m2"]
            with pytest.raises(mx.InvalidConfiguration):
                reader.read_next(50)
            reader.close()
            assert not reader._listener._thread.is_alive()
    finally:
        server.close()


# -- key_shared_policy --------------------------------------------------------------------
async def test_key_shared_policy_goes_out_in_the_subscribe(twin, client) -> None:
    policy = ma.ConsumerKeySharedPolicy(ma.KeySharedMode.Sticky, sticky_ranges=[(0, 99), (200, 299)])
    await client.subscribe("ks", "s", consumer_type=ma.ConsumerType.KeyShared, key_shared_policy=policy)
    meta = twin.state.subscribes[-1].key_shared_meta
    assert meta.mode == 1 and [(r.start, r.end) for r in meta.hash_ranges] == [(0, 99), (200, 299)]
    await client.subscribe("ks", "auto", consumer_type=ma.ConsumerType.KeyShared)
    assert not twin.state.subscribes[-1].HasField("key_shared_meta")  # AutoSplit: nothing to say
    assert policy.key_shared_mode is magnetar.KeySharedMode.Sticky and policy.sticky_ranges == [(0, 99), (200, 299)]


@pytest.mark.parametrize(("mode", "ranges"), [
    ("Sticky", None), ("AutoSplit", [(0, 10)]), ("Sticky", [(0, 65536)]), ("Sticky", [(5, 4)]),
    ("Sticky", [(0, 10), (10, 20)]), ("Sticky", [(0,)]),
])  # fmt: skip
def test_bad_key_shared_policies_are_refused(mode, ranges) -> None:
    with pytest.raises(mx.InvalidConfiguration):
        magnetar.ConsumerKeySharedPolicy(magnetar.KeySharedMode[mode], sticky_ranges=ranges)
