"""Producer access modes (Shared, Exclusive, WaitForExclusive, ExclusiveWithFencing) with
the Magnetar SDK (gRPC door) and pulsar-client (Pulsar protocol door) on real bookie and
broker processes: each door's producers are refused, queued and fenced by the other's,
nothing a fenced producer sends after the fence is stored, and a fenced producer stays
fenced when the owner broker is SIGKILLed and another takes the topic over.

One cluster for the module: 2 bookies and one broker serving both doors; the hand-over
test starts a broker of its own (a short ZooKeeper session) and kills it."""

from __future__ import annotations

import asyncio
import signal
import time

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.common.errors import ProducerBusy, ProducerFenced
from magnetar.common.message_id import MessageId
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection, lookup_command

pytestmark = pytest.mark.integration

QUORUM = dict(ensemble_size=2, write_quorum=2, ack_quorum=2)
Mode = mg.ProducerAccessMode
PMode = pulsar.ProducerAccessMode


@pytest.fixture(scope="module")
def bookies(module_bookie_factory) -> None:
    module_bookie_factory.start_many(2)


@pytest.fixture(scope="module")
def broker(bookies, module_broker_factory):  # type: ignore[no-untyped-def]
    return module_broker_factory(**QUORUM)


def _client(url: str) -> pulsar.Client:
    return pulsar_client(url, operation_timeout_seconds=20, connection_timeout_ms=5000)


async def _stored(address: str, topic: str) -> list[bytes]:
    """Every payload the topic holds, read from the start by a new SDK reader."""
    async with mg.Client(address) as sdk:
        reader = await sdk.create_reader(topic, MessageId.earliest)
        out = []
        while await reader.has_message_available():
            out.append((await reader.read_next(timeout_millis=10_000)).data())
        await reader.close()
        return out


async def test_an_exclusive_producer_of_either_door_refuses_the_others(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{await new_namespace(broker.address, 'excl')}/t"
    client = _client(broker.pulsar_url)
    try:
        async with mg.Client(broker.address) as sdk:
            held = await sdk.create_producer(topic, access_mode=Mode.Exclusive, batching_enabled=False)
            await held.send(b"sdk-0")
            with pytest.raises(pulsar.ProducerBusy):
                await asyncio.to_thread(client.create_producer, topic)
            with pytest.raises(pulsar.ProducerFenced):
                await asyncio.to_thread(client.create_producer, topic, access_mode=PMode.Exclusive)
            await held.close()
            theirs = await asyncio.to_thread(client.create_producer, topic, access_mode=PMode.Exclusive)
            await asyncio.to_thread(theirs.send, b"pulsar-0")
            with pytest.raises(ProducerFenced, match="existing exclusive producer"):
                await sdk.create_producer(topic, access_mode=Mode.Exclusive)
            with pytest.raises(ProducerBusy, match="existing exclusive producer"):
                await sdk.create_producer(topic)
            await asyncio.to_thread(theirs.close)
            shared = await sdk.create_producer(topic, batching_enabled=False)
            with pytest.raises(pulsar.ProducerFenced):  # Shared producers are there now
                await asyncio.to_thread(client.create_producer, topic, access_mode=PMode.Exclusive)
            await shared.send(b"sdk-1")
            await shared.close()
    finally:
        client.close()
    assert await _stored(broker.address, topic) == [b"sdk-0", b"pulsar-0", b"sdk-1"]


async def test_wait_for_exclusive_gets_the_topic_when_the_holder_closes(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{await new_namespace(broker.address, 'wait')}/t"
    client = _client(broker.pulsar_url)
    try:
        async with mg.Client(broker.address) as sdk:
            holder = await sdk.create_producer(topic, access_mode=Mode.Exclusive, batching_enabled=False)
            waiting = asyncio.ensure_future(
                asyncio.to_thread(client.create_producer, topic, access_mode=PMode.WaitForExclusive))
            # On the wire: a first PRODUCER_SUCCESS, not ready; the second comes only when
            # it holds the topic. Its connection closing takes it out of the line again.
            answer = await _raw_producer(broker.protocol_port, topic, pb.WaitForExclusive, None)
            assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS and not answer.producer_success.producer_ready, answer
            assert not waiting.done()
            await holder.send(b"holder")
            await holder.close()
            theirs = await asyncio.wait_for(waiting, 20)
            await asyncio.to_thread(theirs.send, b"waiter")
            # The SDK's WaitForExclusive waits for the pulsar-client producer in turn.
            sdk_waiting = asyncio.ensure_future(
                sdk.create_producer(topic, access_mode=Mode.WaitForExclusive, batching_enabled=False))
            await asyncio.sleep(1.0)
            assert not sdk_waiting.done()
            await asyncio.to_thread(theirs.close)
            mine = await asyncio.wait_for(sdk_waiting, 20)
            await mine.send(b"sdk-waiter")
            await mine.close()
    finally:
        client.close()
    assert await _stored(broker.address, topic) == [b"holder", b"waiter", b"sdk-waiter"]


async def test_exclusive_with_fencing_fences_the_holder_out_of_either_door(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://{await new_namespace(broker.address, 'fence')}/t"
    client = _client(broker.pulsar_url)
    try:
        async with mg.Client(broker.address) as sdk:
            theirs = await asyncio.to_thread(client.create_producer, topic, access_mode=PMode.Exclusive, batching_enabled=False)
            for i in range(3):
                await asyncio.to_thread(theirs.send, b"a-%d" % i)
            fencer = await sdk.create_producer(topic, access_mode=Mode.ExclusiveWithFencing, batching_enabled=False)
            await fencer.send(b"b-0")
            with pytest.raises(pulsar.ProducerFenced):
                await asyncio.to_thread(theirs.send, b"a-after-fence")
            # A pulsar-client fencer takes the topic from the SDK producer in turn.
            fencer2 = await asyncio.to_thread(client.create_producer, topic, access_mode=PMode.ExclusiveWithFencing)
            await asyncio.to_thread(fencer2.send, b"c-0")
            with pytest.raises(ProducerFenced):
                await fencer.send(b"b-after-fence")
            await asyncio.to_thread(fencer2.close)
    finally:
        client.close()
    assert await _stored(broker.address, topic) == [b"a-0", b"a-1", b"a-2", b"b-0", b"c-0"]


async def _raw_producer(port: int, topic: str, mode: int, epoch: int | None) -> pb.BaseCommand:
    """One PRODUCER on a fresh connection to the owner at ``port``: its answer."""
    async with await RawPulsarConnection.open("127.0.0.1", port) as conn:
        await conn.handshake()
        command = pb.BaseCommand(type=pb.BaseCommand.PRODUCER)
        command.producer.topic, command.producer.producer_id, command.producer.request_id = topic, 1, 1
        command.producer.producer_access_mode = mode
        if epoch is not None:
            command.producer.topic_epoch = epoch
        await conn.send(command)
        return (await conn.receive()).command


class Door:
    """One producer through the SDK (gRPC) or pulsar-client (Pulsar protocol)."""

    def __init__(self, sdk: mg.Client, client: pulsar.Client, kind: str) -> None:
        self.sdk, self.client, self.kind = sdk, client, kind
        self.producer = None

    async def create(self, topic: str, mode: str) -> None:
        if self.kind == "sdk":
            self.producer = await self.sdk.create_producer(topic, access_mode=Mode[mode], batching_enabled=False)
        else:
            self.producer = await asyncio.to_thread(
                self.client.create_producer, topic, access_mode=getattr(PMode, mode),
                batching_enabled=False, send_timeout_millis=60_000,
            )  # fmt: skip

    async def send(self, data: bytes) -> None:
        if self.kind == "sdk":
            await self.producer.send(data)  # type: ignore[union-attr]
        else:
            await asyncio.to_thread(self.producer.send, data)  # type: ignore[union-attr]

    async def close(self) -> None:
        if self.kind == "sdk":
            await self.producer.close()  # type: ignore[union-attr]
        else:
            await asyncio.to_thread(self.producer.close)  # type: ignore[union-attr]

    def name(self) -> str:
        return self.producer.producer_name()  # type: ignore[union-attr]

    def fenced(self) -> type[BaseException]:
        return ProducerFenced if self.kind == "sdk" else pulsar.ProducerFenced


@pytest.mark.slow
@pytest.mark.parametrize(("old_kind", "fencer_kind"), [("sdk", "pulsar-client"), ("pulsar-client", "sdk")],
                         ids=["pulsar-client-fences-sdk", "sdk-fences-pulsar-client"])  # fmt: skip
async def test_a_fenced_producer_stays_fenced_when_the_owner_is_killed(broker, module_broker_factory, old_kind, fencer_kind) -> None:  # type: ignore[no-untyped-def]
    owner = module_broker_factory(zk_session_timeout_s=2.0, **QUORUM)
    topic = f"persistent://{await new_namespace(owner.address, 'handover')}/t"
    async with await RawPulsarConnection.open("127.0.0.1", owner.protocol_port) as conn:  # the owner: its first lookup
        await conn.handshake()
        await conn.send(lookup_command(topic, 1))
        assert (await conn.receive()).command.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect
    # The clients know the surviving broker only: it sends them to the owner, then serves them.
    client = _client(broker.pulsar_url)
    acked: list[bytes] = []
    try:
        async with mg.Client(broker.address) as sdk:
            old, fencer = Door(sdk, client, old_kind), Door(sdk, client, fencer_kind)
            await old.create(topic, "Exclusive")
            await old.send(b"old-0")
            acked.append(b"old-0")
            await fencer.create(topic, "ExclusiveWithFencing")
            await fencer.send(b"new-0")
            acked.append(b"new-0")
            with pytest.raises(old.fenced()):
                await old.send(b"old-after-fence")
            owner.kill()
            started = time.monotonic()
            await fencer.send(b"new-1")  # sent to the new owner once the fencer reconnected with its epoch
            acked.append(b"new-1")
            print(f"{fencer_kind}: the fencing producer's send completed {time.monotonic() - started:.1f} s after the owner was killed")
            # The fencer holds the topic at the new owner too.
            answer = await _raw_producer(broker.protocol_port, topic, pb.Exclusive, 0)
            assert answer.type == pb.BaseCommand.ERROR and answer.error.error == pb.ProducerFenced, answer
            assert answer.error.message == f"Topic has an existing exclusive producer: {fencer.name()}"
            answer = await _raw_producer(broker.protocol_port, topic, pb.Shared, None)
            assert answer.type == pb.BaseCommand.ERROR and answer.error.error == pb.ProducerBusy, answer
            await fencer.close()
            # Gone, it leaves the fenced producer fenced: its epoch (0, the topic's first
            # exclusive producer's) is older than the topic's (1, the fencer's: it came
            # back with its own, not a new one), which the new owner read from the
            # managed ledger's properties.
            answer = await _raw_producer(broker.protocol_port, topic, pb.Exclusive, 0)
            assert answer.type == pb.BaseCommand.ERROR and answer.error.error == pb.ProducerFenced, answer
            assert answer.error.message == "Topic epoch has already moved. Current epoch: 1, Producer epoch: 0"
            # A new exclusive producer (no epoch of its own) gets the next one.
            answer = await _raw_producer(broker.protocol_port, topic, pb.Exclusive, None)
            assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS and answer.producer_success.topic_epoch == 2, answer
    finally:
        client.close()
    assert await _stored(broker.address, topic) == acked


async def _owned_by(owner, topic: str) -> None:  # type: ignore[no-untyped-def]
    """Make ``owner`` the topic's owner: its first lookup (the clients then know another
    broker only, which sends them to the owner while it lives, then serves them)."""
    async with await RawPulsarConnection.open("127.0.0.1", owner.protocol_port) as conn:
        await conn.handshake()
        await conn.send(lookup_command(topic, 1))
        assert (await conn.receive()).command.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sdk", "pulsar-client"])
async def test_an_exclusive_producer_keeps_the_topic_and_its_epoch_when_the_owner_is_killed(broker, module_broker_factory, kind) -> None:  # type: ignore[no-untyped-def]
    owner = module_broker_factory(zk_session_timeout_s=2.0, **QUORUM)
    topic = f"persistent://{await new_namespace(owner.address, 'keep')}/t"
    await _owned_by(owner, topic)
    client = _client(broker.pulsar_url)
    other_kind = "pulsar-client" if kind == "sdk" else "sdk"
    acked: list[bytes] = []
    try:
        async with mg.Client(broker.address) as sdk:
            holder = Door(sdk, client, kind)
            await holder.create(topic, "Exclusive")
            await holder.send(b"x-0")
            acked.append(b"x-0")
            owner.kill()
            await holder.send(b"x-1")  # reconnected to the new owner with its epoch
            acked.append(b"x-1")
            # It still holds the topic there: another exclusive producer (either door) is
            # refused, and so is a Shared one.
            second = Door(sdk, client, other_kind)
            with pytest.raises(second.fenced()) as refused:
                await second.create(topic, "Exclusive")
            if other_kind == "sdk":  # pulsar-client's exception names only the result
                assert "existing exclusive producer" in str(refused.value)
            answer = await _raw_producer(broker.protocol_port, topic, pb.Shared, None)
            assert answer.type == pb.BaseCommand.ERROR and answer.error.error == pb.ProducerBusy, answer
            await holder.send(b"x-2")
            acked.append(b"x-2")
            await holder.close()
            # It came back at its own epoch (0), not a new one: an exclusive producer
            # bringing epoch 0 gets the topic at 0, which a later epoch would refuse.
            answer = await _raw_producer(broker.protocol_port, topic, pb.Exclusive, 0)
            assert answer.type == pb.BaseCommand.PRODUCER_SUCCESS and answer.producer_success.topic_epoch == 0, answer
    finally:
        client.close()
    assert await _stored(broker.address, topic) == acked


@pytest.mark.slow
@pytest.mark.parametrize(("old_kind", "fencer_kind"), [("sdk", "pulsar-client"), ("pulsar-client", "sdk")],
                         ids=["pulsar-client-fences-sdk", "sdk-fences-pulsar-client"])  # fmt: skip
async def test_a_producer_whose_owner_was_paused_past_its_session_is_fenced_on_resume(broker, module_broker_factory, old_kind, fencer_kind) -> None:  # type: ignore[no-untyped-def]
    """The old exclusive producer's owner is SIGSTOPped past its ZooKeeper session; the
    surviving broker takes the topic over and an ExclusiveWithFencing producer takes it.
    The old producer's sends while its owner was stopped, and after it resumes, are not
    stored: it is fenced (ProducerFenced). Every send acknowledged to either is stored."""
    owner = module_broker_factory(zk_session_timeout_s=2.0, **QUORUM)
    topic = f"persistent://{await new_namespace(owner.address, 'paused')}/t"
    await _owned_by(owner, topic)
    client = _client(broker.pulsar_url)
    acked: list[bytes] = []
    outcomes: dict[bytes, object] = {}
    try:
        async with mg.Client(broker.address, operation_timeout_seconds=10) as sdk:
            old, fencer = Door(sdk, client, old_kind), Door(sdk, client, fencer_kind)
            await old.create(topic, "Exclusive")
            await old.send(b"old-0")
            acked.append(b"old-0")
            owner.process.kill(signal.SIGSTOP, wait=False)
            try:
                # Sent to the stopped owner: held in its socket, never answered while it sleeps.
                paused = [asyncio.ensure_future(old.send(b"old-paused-%d" % i)) for i in range(3)]
                await asyncio.sleep(3.0)  # past the owner's 2 s ZooKeeper session
                started = time.monotonic()
                await fencer.create(topic, "ExclusiveWithFencing")  # the surviving broker takes the topic over
                await fencer.send(b"new-0")
                acked.append(b"new-0")
                print(f"fencer ({fencer_kind}) held the topic {time.monotonic() - started:.1f} s after asking")
            finally:
                owner.process.kill(signal.SIGCONT, wait=False)
            for i, fut in enumerate(paused):
                try:
                    await asyncio.wait_for(fut, 60)
                    outcomes[b"old-paused-%d" % i] = "acked"
                    acked.append(b"old-paused-%d" % i)
                except Exception as exc:  # noqa: BLE001 - recorded and asserted below
                    outcomes[b"old-paused-%d" % i] = exc
            with pytest.raises(old.fenced()):
                await asyncio.wait_for(old.send(b"old-after-resume"), 60)
            await fencer.send(b"new-1")
            acked.append(b"new-1")
            await fencer.close()
    finally:
        client.close()
    print(f"the old producer's sends while its owner was stopped: {outcomes}")
    stored = await _stored(broker.address, topic)
    assert b"old-after-resume" not in stored
    assert sorted(stored) == sorted(acked), (stored, outcomes)
    # Its sends while its owner was stopped reached no broker that could store them
    # before the fence: none is acknowledged, none stored.
    assert all(o != "acked" for o in outcomes.values()), outcomes
