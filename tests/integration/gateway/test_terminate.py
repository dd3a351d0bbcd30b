"""Terminating topics (``POST .../terminate``, ``.../terminate/partitions``, ``magnetar
admin topics terminate|partitioned-terminate``), checked on real clients: producers of
both doors (the SDK over gRPC, pulsar-client over the Pulsar protocol) are refused with
TopicTerminated, a consumer gets every message and then learns it reached the end, a
reader has no message available at the end, and the state holds after the broker is
killed and started again. Bad input: Pulsar's status and reason (REST), one line on
stderr (CLI), and nothing changed."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import pulsar
import pytest
from gateway_support import GatewayCluster, eventually, unique
from websockets.asyncio.client import connect

import magnetar.asyncio as mg
from magnetar.common.errors import TopicTerminated
from magnetar.proto.pulsar import pulsar_api_pb2 as wire
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection
from magnetar.testing.shell import cli_fails as fails
from magnetar.testing.shell import cli_ok as ok
from magnetar.testing.shell import warm_magnetar as magnetar

pytestmark = [pytest.mark.integration]

P = "/admin/v2/persistent"

# A test restarts its broker: the restarted broker serves its topics again once its previous
# ZooKeeper session is gone: 2 s after the kill here (the default session is 5 s).
OWN_BROKER_SETTINGS = {"zk_session_timeout_s": 2.0}


@pytest.fixture(scope="module")
def gateway_cluster(own_gateway_cluster: GatewayCluster) -> GatewayCluster:
    """A cluster of this module's own: a test restarts its broker."""
    return own_gateway_cluster


def _pulsar_producer_refused(cluster: GatewayCluster, topic: str) -> str:
    """pulsar-client's error creating a producer on ``topic`` ("" when it was created)."""
    client = pulsar_client(cluster.broker.pulsar_url, operation_timeout_seconds=10)
    try:
        client.create_producer(topic).close()
        return ""
    except pulsar.TopicTerminated as exc:
        return f"TopicTerminated: {exc}"
    finally:
        client.close()


def _pulsar_read_all(cluster: GatewayCluster, topic: str) -> tuple[list[bytes], bool]:
    """A pulsar-client reader from the start: every payload, then has_message_available."""
    client = pulsar_client(cluster.broker.pulsar_url, operation_timeout_seconds=10)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(10_000).data())
        return got, reader.has_message_available()
    finally:
        client.close()


async def test_a_terminated_topic_refuses_producers_and_ends_for_consumers(
    http: httpx.AsyncClient, gateway_cluster: GatewayCluster,
) -> None:
    topic = f"persistent://public/default/{unique('term')}"
    local = topic.removeprefix("persistent://")
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        consumer = await client.subscribe(topic, "s", initial_position=mg.InitialPosition.Earliest)
        sent = [await producer.send(b"m%d" % i) for i in range(3)]
        assert not consumer.has_reached_end_of_topic()

        r = await http.post(f"{P}/{local}/terminate")
        assert r.status_code == 200, r.text
        last = r.json()
        assert (last["ledgerId"], last["entryId"], last["partitionIndex"]) == (
            sent[-1].ledger_id(), sent[-1].entry_id(), -1)
        # Its producer is closed, a new one (either door) is refused; nothing more is stored.
        with pytest.raises(TopicTerminated):
            await producer.send(b"late")
        with pytest.raises(TopicTerminated):
            await client.create_producer(topic)
        assert (await asyncio.to_thread(_pulsar_producer_refused, gateway_cluster, topic)).startswith("TopicTerminated")

        got = [await consumer.receive(10_000) for _ in range(3)]
        assert [m.data() for m in got] == [b"m0", b"m1", b"m2"]
        assert await eventually(lambda: _true(consumer.has_reached_end_of_topic()))
        with pytest.raises(mg.Timeout):
            await consumer.receive(300)
        assert await asyncio.to_thread(_pulsar_read_all, gateway_cluster, topic) == ([b"m0", b"m1", b"m2"], False)

        # The Pulsar door tells a consumer the end after the last message; not the C++
        # client (pulsar-client), which would take the command for an invalid one.
        java = await _wire_consumer(gateway_cluster, topic, "Pulsar-Java-v3.3.0")
        assert java == ["MESSAGE"] * 3 + ["REACHED_END_OF_TOPIC"]
        assert await _wire_consumer(gateway_cluster, topic, "Pulsar-CPP-v3.7.0") == ["MESSAGE"] * 3
        assert await _websocket_end(gateway_cluster, local) == ([b"m0", b"m1", b"m2"], True)

        again = await http.post(f"{P}/{local}/terminate")  # again: the same answer
        assert again.status_code == 200 and again.json() == last

    # The state is stored with the topic: it holds after the broker crashes and starts again.
    await asyncio.to_thread(gateway_cluster.broker.restart, hard=True)
    async with mg.Client(gateway_cluster.service_url) as client:
        with pytest.raises(TopicTerminated):
            await client.create_producer(topic)
        reader = await client.subscribe(topic, unique("late"), initial_position=mg.InitialPosition.Earliest)
        assert [(await reader.receive(10_000)).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
        assert await eventually(lambda: _true(reader.has_reached_end_of_topic()))
    assert (await asyncio.to_thread(_pulsar_producer_refused, gateway_cluster, topic)).startswith("TopicTerminated")
    r = await http.post(f"{P}/{local}/terminate")
    assert r.status_code == 200 and r.json() == last


async def _wire_consumer(cluster: GatewayCluster, topic: str, client_version: str) -> list[str]:
    """A consumer over a bare Pulsar protocol connection (a client saying it is
    ``client_version``): the commands the broker sends it after SUBSCRIBE and FLOW, until
    it is quiet for a second."""
    host, port = cluster.broker.pulsar_url.removeprefix("pulsar://").rsplit(":", 1)
    T = wire.BaseCommand
    async with await RawPulsarConnection.open(host, int(port)) as conn:
        await conn.handshake(client_version=client_version)
        await conn.send(T(type=T.SUBSCRIBE, subscribe=wire.CommandSubscribe(
            topic=topic, subscription=unique("wire"), subType=wire.CommandSubscribe.Exclusive, consumer_id=7,
            request_id=1, initialPosition=wire.CommandSubscribe.Earliest)))
        assert (await conn.receive()).command.type == T.SUCCESS
        await conn.send(T(type=T.FLOW, flow=wire.CommandFlow(consumer_id=7, messagePermits=100)))
        seen = []
        while True:
            try:
                frame = await conn.receive(timeout_s=1.0)
            except TimeoutError:
                return seen
            seen.append(frame.type_name)
            if frame.command.type == T.REACHED_END_OF_TOPIC:
                assert frame.command.reachedEndOfTopic.consumer_id == 7


async def _websocket_end(cluster: GatewayCluster, local: str) -> tuple[list[bytes], bool]:
    """A WebSocket reader from the start: the payloads it gets, then its ``isEndOfTopic``
    answer once it is true (or the last false after 10 s)."""
    url = cluster.url.replace("http://", "ws://") + f"/ws/v2/reader/persistent/{local}?messageId=earliest"
    async with connect(url, open_timeout=30) as ws:
        got = []
        for _ in range(3):
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
            got.append(base64.b64decode(frame["payload"]))
            await ws.send(json.dumps({"messageId": frame["messageId"]}))
        deadline = time.monotonic() + 10
        while True:
            await ws.send(json.dumps({"type": "isEndOfTopic"}))
            ended = json.loads(await asyncio.wait_for(ws.recv(), 10))["endOfTopic"]
            if ended or time.monotonic() > deadline:
                return got, ended
            await asyncio.sleep(0.05)


async def _true(value: bool) -> bool:
    return value


async def test_terminate_partitions_and_bad_input(http: httpx.AsyncClient, gateway_cluster: GatewayCluster) -> None:
    partitioned = f"public/default/{unique('pterm')}"
    plain = f"public/default/{unique('plain')}"
    assert (await http.put(f"{P}/{partitioned}/partitions", json=2)).status_code == 204
    assert (await http.put(f"{P}/{plain}")).status_code == 204

    # Refused, changing nothing: a partitioned topic's own name, a missing topic, a bad name.
    r = await http.post(f"{P}/{partitioned}/terminate")
    assert r.status_code == 405 and r.json()["reason"] == "Termination of a partitioned topic is not allowed"
    r = await http.post(f"{P}/{plain}/terminate/partitions")
    assert r.status_code == 405 and r.json()["reason"] == "Termination of a non-partitioned topic is not allowed"
    missing = f"public/default/{unique('never')}"
    for path in (f"{P}/{missing}/terminate", f"{P}/{missing}/terminate/partitions"):
        r = await http.post(path)
        assert r.status_code == 404 and r.json()["reason"] == f"Topic persistent://{missing} not found", path
    r = await http.post(f"{P}/public/default/bad%01name/terminate")
    assert r.status_code == 412 and r.json()["reason"].startswith("Topic name is not valid")
    r = await http.post(f"{P}/public/nosuch/{unique('t')}/terminate")
    assert r.status_code == 404

    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(f"persistent://{partitioned}", batching_enabled=False)
        for i in range(4):
            await producer.send(b"p%d" % i, partition_key=f"k{i}")  # the refusals changed nothing
        await producer.close()
        plain_producer = await client.create_producer(f"persistent://{plain}")
        await plain_producer.send(b"still")
        await plain_producer.close()

    r = await http.post(f"{P}/{partitioned}/terminate/partitions")
    assert r.status_code == 200, r.text
    ids = r.json()
    assert sorted(ids) == ["0", "1"] and [ids[k]["partitionIndex"] for k in ("0", "1")] == [0, 1]
    async with mg.Client(gateway_cluster.service_url) as client:
        for i in range(2):
            with pytest.raises(TopicTerminated):
                await client.create_producer(f"persistent://{partitioned}-partition-{i}")
        await client.create_producer(f"persistent://{plain}")  # not terminated: takes producers

    # magnetar admin, over gRPC (--url) and over the gateway (--admin-url): the same answers.
    def admin(*args: str, rest: bool = False):
        where = ("--admin-url", gateway_cluster.url) if rest else ("--url", gateway_cluster.broker.address)
        return magnetar("admin", *where, "topics", *args)

    by_grpc = ok(await asyncio.to_thread(admin, "terminate", f"persistent://{plain}"))
    by_rest = ok(await asyncio.to_thread(admin, "terminate", f"persistent://{plain}", rest=True))
    assert by_grpc == by_rest and by_grpc.startswith(f"Topic persistent://{plain} successfully terminated at ")
    ledger, entry, partition = by_grpc.split()[-1].split(":")
    assert (int(entry), int(partition)) == (0, -1)  # the one message "still"
    async with mg.Client(gateway_cluster.service_url) as client:
        with pytest.raises(TopicTerminated):
            await client.create_producer(f"persistent://{plain}")
    lines = ok(await asyncio.to_thread(admin, "partitioned-terminate", f"persistent://{partitioned}", rest=True))
    assert lines == ok(await asyncio.to_thread(admin, "partitioned-terminate", f"persistent://{partitioned}"))
    assert lines.splitlines() == [
        f"Partition {k} of persistent://{partitioned} successfully terminated at "
        f"{ids[k]['ledgerId']}:{ids[k]['entryId']}:{k}" for k in ("0", "1")
    ]
    # CLI refusals: one line each, over either door.
    for rest in (False, True):
        line = fails(await asyncio.to_thread(admin, "terminate", f"persistent://{missing}", rest=rest))
        assert f"persistent://{missing}" in line and ("not found" in line or "does not exist" in line), line
        assert "partitioned" in fails(await asyncio.to_thread(admin, "terminate", f"persistent://{partitioned}", rest=rest))
        line = fails(await asyncio.to_thread(admin, "partitioned-terminate", f"persistent://{plain}", rest=rest))
        assert "partitioned" in line, line
    assert (await http.get(f"{P}/{missing}/stats")).status_code == 404  # the refusals created nothing
