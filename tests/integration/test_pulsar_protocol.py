"""Pulsar's binary protocol door against the real client (pulsar-client's C++ core) and
raw sockets, on real broker processes: partitions, lookups that redirect to the owner,
a quick clear failure for what is not served yet, and bad input that ends only the
connection that sent it.

No bookies: nothing here opens a topic's ledger (lookups take bundles, partition counts
are metadata)."""

from __future__ import annotations

import asyncio
import struct
import time

import pulsar
import pytest

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.netutil import free_port
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.protocol import commands
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.processes import start_all
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection, lookup_command

pytestmark = pytest.mark.integration


class Brokers:
    def __init__(self, brokers, ports: list[int]) -> None:
        self.brokers = brokers
        self.ports = ports
        self.urls = [f"pulsar://127.0.0.1:{p}" for p in ports]


@pytest.fixture(scope="module")
def brokers(module_broker_factory) -> Brokers:
    ports = [free_port(), free_port()]
    while ports[1] == ports[0]:
        ports[1] = free_port()
    started = start_all([module_broker_factory.create(protocol_port=port) for port in ports])  # start-ups overlap
    return Brokers(started, ports)


def _client(url: str) -> pulsar.Client:
    return pulsar_client(url, operation_timeout_seconds=10, connection_timeout_ms=5000)


async def _own(port: int, topic: str) -> None:
    """Make the broker listening on ``port`` the topic's owner (its first lookup)."""
    async with await RawPulsarConnection.open("127.0.0.1", port) as conn:
        await conn.handshake()
        await conn.send(lookup_command(topic, 1))
        answer = (await conn.receive()).command.lookupTopicResponse
        assert (answer.response, answer.brokerServiceUrl) == (pb.CommandLookupTopicResponse.Connect, f"pulsar://127.0.0.1:{port}")


async def test_the_real_client_reads_partition_counts(brokers: Brokers) -> None:
    namespace = await new_namespace(brokers.brokers[0].address, "wire")
    partitioned = f"persistent://{namespace}/four"
    async with AdminClient(brokers.brokers[0].address, 10) as admin:
        await admin.create_topic(partitioned, partitions=4)

    def partitions() -> tuple[list[str], list[str]]:
        client = _client(brokers.urls[0])
        try:
            return client.get_topic_partitions(partitioned), client.get_topic_partitions(f"persistent://{namespace}/plain")
        finally:
            client.close()

    four, plain = await asyncio.to_thread(partitions)
    assert four == [f"{partitioned}-partition-{i}" for i in range(4)]
    assert plain == [f"persistent://{namespace}/plain"]


async def test_a_lookup_at_a_non_owner_redirects_to_the_owners_pulsar_url(brokers: Brokers) -> None:
    namespace = await new_namespace(brokers.brokers[0].address, "wire")
    topic = f"persistent://{namespace}/t"
    await _own(brokers.ports[0], topic)
    async with await RawPulsarConnection.open("127.0.0.1", brokers.ports[1]) as second:
        await second.handshake()
        await second.send(lookup_command(topic, 2))
        answer = (await second.receive()).command.lookupTopicResponse
    assert answer.response == pb.CommandLookupTopicResponse.Redirect
    assert answer.brokerServiceUrl == brokers.urls[0]
    assert answer.request_id == 2 and answer.authoritative


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x08garbage!",
        struct.pack(">I", 0x7FFFFFFF),  # oversized frame size
        struct.pack(">II", 6, 2) + b"\x08\x63",  # an unknown command
    ],
)
async def test_bad_input_ends_only_its_connection(brokers: Brokers, garbage: bytes) -> None:
    port = brokers.ports[0]
    async with await RawPulsarConnection.open("127.0.0.1", port) as bystander:
        await bystander.handshake()
        async with await RawPulsarConnection.open("127.0.0.1", port) as early:  # before CONNECT
            await early.send(commands.ping())
            assert await early.closed_by_peer()
            assert early.frames[0].command.type == pb.BaseCommand.ERROR
        async with await RawPulsarConnection.open("127.0.0.1", port) as bad:
            await bad.handshake()
            await bad.send_bytes(garbage)
            assert await bad.closed_by_peer()
            assert [f.command.type for f in bad.frames] == [pb.BaseCommand.ERROR]
        await bystander.send(commands.ping())
        assert (await bystander.receive()).command.type == pb.BaseCommand.PONG
    assert brokers.brokers[0].alive
    assert "Traceback" not in brokers.brokers[0].log_tail(400)


async def test_registrations_with_and_without_a_pulsar_url_are_read(zk_session) -> None:
    """A broker registered before brokers advertised a Pulsar URL reads as one without."""
    from magnetar.metadata.ownership import ZkOwnershipStore

    store = ZkOwnershipStore(zk_session)
    await store.register_broker("10.0.0.1:6650", {"address": "10.0.0.1:6650"})
    await store.register_broker("10.0.0.2:6650", {"address": "10.0.0.2:6650", "pulsar_service_url": "pulsar://10.0.0.2:6651"})
    assert await store.broker_record("10.0.0.1:6650") == {"address": "10.0.0.1:6650"}
    assert (await store.broker_record("10.0.0.2:6650") or {}).get("pulsar_service_url") == "pulsar://10.0.0.2:6651"
    assert await store.broker_record("10.0.0.3:6650") is None


async def test_the_sdk_given_the_pulsar_port_says_to_use_the_grpc_port(brokers: Brokers) -> None:
    """``pulsar://`` is the SDK's alias of ``magnetar://`` (gRPC, port 6660 by default):
    pointed at the Pulsar protocol port it fails at once, saying which port it needs."""
    started = time.monotonic()
    with pytest.raises(mg.NotGrpcServer) as refused:
        async with mg.Client(brokers.urls[0], operation_timeout_seconds=10) as client:
            await client.create_producer("persistent://public/default/sdk-at-the-pulsar-port")
    took = time.monotonic() - started
    message = str(refused.value)
    assert "does not speak gRPC" in message and "magnetar://host:6660" in message and "pulsar-client" in message
    assert "\n" not in message
    assert not refused.value.retriable and took < 5, f"{took:.1f} s"
    assert "is a gRPC (HTTP/2) client" in brokers.brokers[0].log_tail(400)
