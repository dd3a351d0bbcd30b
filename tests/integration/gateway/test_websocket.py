"""Pulsar's WebSocket API on a real gateway and broker, spoken with the ``websockets``
client library as a Pulsar WebSocket client would: produce with acks whose ids are the
SDK's ids, consume with acks, negative acks and redelivery, Shared over two sockets,
dead letters, readers, pull mode, end of topic, refused upgrades, bad frames, the
receiver queue bounding what a socket gets, and handles released with the socket. Each
test on topics of its own; they run at the same time (``magnetar.testing.together``)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from gateway_support import GatewayCluster, unique
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK, InvalidStatus

import magnetar.asyncio as mg
from magnetar.client.admin import AdminClient
from magnetar.common.message_id import ChunkMessageId, MessageId
from magnetar.gateway.websocket import ids
from magnetar.testing.together import together

pytestmark = [pytest.mark.integration]

NS = "public/default"


def ws_url(cluster: GatewayCluster, kind: str, topic: str, sub: str | None = None, **params: Any) -> str:
    local = topic.rsplit("/", 1)[1]
    path = f"/ws/v2/{kind}/persistent/{NS}/{local}" + (f"/{sub}" if sub else "")
    query = f"?{urlencode(params)}" if params else ""
    return cluster.url.replace("http://", "ws://") + path + query


@asynccontextmanager
async def socket(url: str) -> AsyncIterator[ClientConnection]:
    async with connect(url, open_timeout=30) as ws:
        yield ws


async def recv(ws: ClientConnection, timeout: float = 10) -> dict[str, Any]:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def nothing_more(ws: ClientConnection, wait: float = 1.0) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(ws.recv(), wait)


def publish(payload: bytes, context: str | None = None, **fields: Any) -> str:
    frame: dict[str, Any] = {"payload": base64.b64encode(payload).decode(), **fields}
    if context is not None:
        frame["context"] = context
    return json.dumps(frame)


def new_topic(prefix: str = "ws") -> str:
    return f"persistent://{NS}/{unique(prefix)}"


async def refused(url: str) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as err:
        async with connect(url, open_timeout=30):
            pass
    response = err.value.response
    return response.status_code, json.loads(response.body or b"{}").get("reason", "")


async def until(check, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.2)


# -- producing -----------------------------------------------------------------------
@together
async def test_produce_acks_carry_the_ids_an_sdk_consumer_sees(gateway_cluster: GatewayCluster):
    topic = new_topic()
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "sdk")
        async with socket(ws_url(gateway_cluster, "producer", topic, producerName=unique("wsp"))) as ws:
            for i in range(5):
                await ws.send(publish(
                    f"m{i}".encode(), context=f"c{i}", key=f"k{i}", properties={"i": str(i)},
                    eventTime="2024-05-01T10:00:00.250Z",
                ))
            acks = [await recv(ws) for _ in range(5)]
        assert [(a["result"], a["context"]) for a in acks] == [("ok", f"c{i}") for i in range(5)]
        for i, a in enumerate(acks):
            msg = await consumer.receive(timeout_millis=10_000)
            assert msg.message_id() == ids.decode(a["messageId"])
            assert msg.data() == f"m{i}".encode() and msg.partition_key() == f"k{i}"
            assert msg.properties() == {"i": str(i)} and msg.event_timestamp() == 1714557600250
        assert acks[0]["messageId"] != acks[1]["messageId"]


@together
async def test_batched_pipelined_frames_get_ordered_acks_with_batch_indexes(gateway_cluster: GatewayCluster):
    topic = new_topic()
    count = 300
    async with mg.Client(gateway_cluster.service_url) as client:
        consumer = await client.subscribe(topic, "sdk", receiver_queue_size=count)
        url = ws_url(gateway_cluster, "producer", topic, batchingEnabled="true", batchingMaxPublishDelay=5,
                     maxPendingMessages=100)
        async with socket(url) as ws:

            async def send_all() -> None:
                for i in range(count):
                    await ws.send(publish(str(i).encode(), context=str(i)))

            sender = asyncio.create_task(send_all())
            acks = [await recv(ws) for _ in range(count)]
            await sender
        assert [a["context"] for a in acks] == [str(i) for i in range(count)]
        sent = [ids.decode(a["messageId"]) for a in acks]
        assert any(m.batch_index() > 0 for m in sent), "batchingEnabled=true should batch pipelined frames"
        got = [(await consumer.receive(timeout_millis=10_000)).message_id() for _ in range(count)]
        assert got == sent


@together
async def test_bad_publish_frames_get_pulsar_error_results(gateway_cluster: GatewayCluster):
    topic = new_topic()
    async with socket(ws_url(gateway_cluster, "producer", topic)) as ws:
        await ws.send("{not json")
        await ws.send(json.dumps({"payload": "@@not-base64@@", "context": "b64"}))
        await ws.send(json.dumps({"context": "none"}))
        await ws.send(publish(b"x", context="time", eventTime="yesterday"))
        await ws.send(publish(b"fine", context="ok"))
        bad_json, bad_b64, missing, bad_time, fine = [await recv(ws) for _ in range(5)]
    assert bad_json["result"] == "send-error:3" and "context" not in bad_json
    assert (bad_b64["result"], bad_b64["context"]) == ("send-error:7", "b64")
    assert bad_b64["errorMsg"].startswith("Invalid Base64 message-payload error=")
    assert (missing["result"], missing["context"]) == ("send-error:7", "none")
    assert (bad_time["result"], bad_time["context"]) == ("send-error:7", "time")
    assert (fine["result"], fine["context"]) == ("ok", "ok")


# -- consuming -----------------------------------------------------------------------
@together
async def test_consume_ack_nack_and_redelivery(gateway_cluster: GatewayCluster):
    topic = new_topic()
    url = ws_url(gateway_cluster, "consumer", topic, "work", subscriptionType="Shared", negativeAckRedeliveryDelay=100)
    async with mg.Client(gateway_cluster.service_url) as client, socket(url) as ws:
        producer = await client.create_producer(topic, batching_enabled=False)
        first = await producer.send(b"one", properties={"a": "1"}, partition_key="key-1", event_timestamp=1000)
        second = await producer.send(b"two")
        frames = [await recv(ws), await recv(ws)]
        assert [ids.decode(f["messageId"]) for f in frames] == [first, second]
        one = frames[0]
        assert base64.b64decode(one["payload"]) == b"one" and one["properties"] == {"a": "1"}
        assert (one["key"], one["eventTime"], one["redeliveryCount"]) == ("key-1", "1970-01-01T00:00:01.000Z", 0)
        assert one["publishTime"].endswith("Z") and "key" not in frames[1] and "eventTime" not in frames[1]
        assert frames[1]["properties"] == {}

        await ws.send(json.dumps({"messageId": one["messageId"]}))
        await ws.send(json.dumps({"type": "negativeAcknowledge", "messageId": frames[1]["messageId"]}))
        again = await recv(ws)
        assert ids.decode(again["messageId"]) == second and again["redeliveryCount"] == 1
        await ws.send(json.dumps({"messageId": again["messageId"]}))
        await nothing_more(ws)

        async with AdminClient(gateway_cluster.service_url) as admin:

            async def drained() -> bool:
                stats = await admin.topic_stats(topic)
                return [s.backlog for s in stats.subscriptions if s.name == "work"] == [0]

            await until(drained)


@together
async def test_a_chunked_message_is_delivered_whole_and_acked_by_its_id(gateway_cluster: GatewayCluster):
    """An SDK producer's chunked message (chunks of 64 KiB) reaches the socket as one
    message whose id names its first and last chunk (Pulsar's first_chunk_message_id);
    acking that id acks every chunk: the backlog drains."""
    topic = new_topic("wschunks")
    url = ws_url(gateway_cluster, "consumer", topic, "work")
    big = os.urandom(200 * 1024)
    async with mg.Client(gateway_cluster.service_url) as client, socket(url) as ws:
        producer = await client.create_producer(
            topic, batching_enabled=False, chunking_enabled=True, max_message_size=64 * 1024
        )
        sent = await producer.send(big, properties={"a": "1"})
        small = await producer.send(b"small")
        frames = [await recv(ws), await recv(ws)]
        assert [base64.b64decode(f["payload"]) for f in frames] == [big, b"small"]
        assert frames[0]["properties"] == {"a": "1"}
        got = ids.decode(frames[0]["messageId"])
        assert isinstance(got, ChunkMessageId) and got == sent and str(got) == str(sent)
        assert ids.decode(frames[1]["messageId"]) == small
        for f in frames:
            await ws.send(json.dumps({"messageId": f["messageId"]}))
        await nothing_more(ws)

        async with AdminClient(gateway_cluster.service_url) as admin:

            async def drained() -> bool:
                stats = await admin.topic_stats(topic)
                return [s.backlog for s in stats.subscriptions if s.name == "work"] == [0]

            await until(drained)


@together
async def test_shared_subscription_over_two_sockets(gateway_cluster: GatewayCluster):
    topic = new_topic()
    url = ws_url(gateway_cluster, "consumer", topic, "shared", subscriptionType="Shared", receiverQueueSize=5)
    async with mg.Client(gateway_cluster.service_url) as client, socket(url) as ws1, socket(url) as ws2:
        producer = await client.create_producer(topic, batching_enabled=False)
        sent = [await producer.send(str(i).encode()) for i in range(40)]
        got: dict[int, list[MessageId]] = {1: [], 2: []}

        async def drain(n: int, ws: ClientConnection) -> None:
            while True:
                try:
                    frame = await recv(ws, timeout=2)
                except TimeoutError:
                    return
                got[n].append(ids.decode(frame["messageId"]))
                await ws.send(json.dumps({"messageId": frame["messageId"]}))

        await asyncio.gather(drain(1, ws1), drain(2, ws2))
        assert got[1] and got[2], "both sockets of the Shared subscription get messages"
        assert sorted(got[1] + got[2]) == sorted(sent)


@together
async def test_negative_acks_past_max_redeliver_count_go_to_the_dead_letter_topic(gateway_cluster: GatewayCluster):
    topic = new_topic("ws-dlq")
    dlq = f"{topic}-custom-DLQ"
    url = ws_url(gateway_cluster, "consumer", topic, "s", subscriptionType="Shared", maxRedeliverCount=2,
                 deadLetterTopic=dlq, negativeAckRedeliveryDelay=100)
    async with mg.Client(gateway_cluster.service_url) as client, socket(url) as ws:
        producer = await client.create_producer(topic)
        sent = await producer.send(b"poison")
        counts = []
        for _ in range(2):
            frame = await recv(ws)
            counts.append(frame["redeliveryCount"])
            await ws.send(json.dumps({"type": "negativeAcknowledge", "messageId": frame["messageId"]}))
        assert counts == [0, 1]
        await nothing_more(ws, 2.0)
        async with socket(ws_url(gateway_cluster, "consumer", dlq, "s-DLQ-sub", subscriptionType="Shared")) as dead:
            frame = await recv(dead)
            assert base64.b64decode(frame["payload"]) == b"poison"
            assert frame["properties"]["REAL_TOPIC"] == topic
            assert frame["properties"]["ORIGIN_MESSAGE_ID"] == str(sent)


@together
async def test_a_socket_that_never_acks_gets_exactly_receiver_queue_size_messages(gateway_cluster: GatewayCluster):
    topic = new_topic()
    url = ws_url(gateway_cluster, "consumer", topic, "slow", receiverQueueSize=10)
    async with mg.Client(gateway_cluster.service_url) as client, socket(url) as ws:
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(50):
            producer.send_async(str(i).encode(), None)
        await producer.flush()
        frames = [await recv(ws) for _ in range(10)]
        await nothing_more(ws, 1.5)
        for frame in frames[:3]:
            await ws.send(json.dumps({"messageId": frame["messageId"]}))
        more = [await recv(ws) for _ in range(3)]
        await nothing_more(ws, 1.0)
        payloads = [base64.b64decode(f["payload"]) for f in frames + more]
        assert payloads == [str(i).encode() for i in range(13)]


@together
async def test_pull_mode_delivers_against_permits(gateway_cluster: GatewayCluster):
    topic = new_topic()
    url = ws_url(gateway_cluster, "consumer", topic, "pull", pullMode="true")
    async with mg.Client(gateway_cluster.service_url) as client, socket(url) as ws:
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(5):
            await producer.send(str(i).encode())
        await nothing_more(ws)
        await ws.send(json.dumps({"type": "permit", "permitMessages": 2}))
        assert [base64.b64decode((await recv(ws))["payload"]) for _ in range(2)] == [b"0", b"1"]
        await nothing_more(ws)
        await ws.send(json.dumps({"type": "permit", "permitMessages": 10}))
        assert [base64.b64decode((await recv(ws))["payload"]) for _ in range(3)] == [b"2", b"3", b"4"]


@together
async def test_is_end_of_topic_and_unsubscribe(gateway_cluster: GatewayCluster):
    topic = new_topic()
    async with socket(ws_url(gateway_cluster, "consumer", topic, "gone")) as ws:
        await ws.send(json.dumps({"type": "isEndOfTopic"}))
        assert await recv(ws) == {"endOfTopic": False}
        await ws.send(json.dumps({"type": "unsubscribe"}))
        with pytest.raises(ConnectionClosedOK):
            await asyncio.wait_for(ws.recv(), 10)
        assert ws.close_code == 1000 and ws.close_reason == "Unsubscribed"
    async with AdminClient(gateway_cluster.service_url) as admin:
        assert "gone" not in await admin.subscriptions(topic)
    async with socket(ws_url(gateway_cluster, "reader", topic)) as reader:
        await reader.send(json.dumps({"type": "isEndOfTopic"}))
        assert await recv(reader) == {"endOfTopic": False}


@together
async def test_a_bad_ack_closes_the_socket_with_code_4003(gateway_cluster: GatewayCluster):
    topic = new_topic()
    async with socket(ws_url(gateway_cluster, "consumer", topic, "bad")) as ws:
        await ws.send(json.dumps({"messageId": "definitely not an id"}))
        with pytest.raises(ConnectionClosedError):
            await asyncio.wait_for(ws.recv(), 10)
        assert ws.close_code == 4003
        assert ws.close_reason is not None and ws.close_reason.startswith("Failed to de-serialize from JSON: invalid message id")
    async with socket(ws_url(gateway_cluster, "consumer", topic, "bad")) as ws:
        await ws.send("{not json")
        with pytest.raises(ConnectionClosedError):
            await asyncio.wait_for(ws.recv(), 10)
        assert ws.close_code == 4003


# -- readers -------------------------------------------------------------------------
@together
async def test_reader_from_earliest_and_from_a_given_id(gateway_cluster: GatewayCluster):
    topic = new_topic()
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, batching_enabled=False)
        sent = [await producer.send(str(i).encode()) for i in range(5)]
    async with socket(ws_url(gateway_cluster, "reader", topic, messageId="earliest", receiverQueueSize=2)) as ws:
        got = []
        for _ in range(5):
            frame = await recv(ws)
            got.append(ids.decode(frame["messageId"]))
            await ws.send(json.dumps({"messageId": frame["messageId"]}))
        assert got == sent
    start = ids.encode(sent[1])
    async with (socket(ws_url(gateway_cluster, "reader", topic, messageId=start)) as ws,
                socket(ws_url(gateway_cluster, "reader", topic)) as latest):
        got = [ids.decode((await recv(ws))["messageId"]) for _ in range(3)]
        assert got == sent[2:]  # exclusive of the given id, as Pulsar's reader
        await asyncio.gather(nothing_more(ws), nothing_more(latest))  # the two waits at once


# -- upgrades and lifetimes ------------------------------------------------------------
@together
async def test_bad_query_values_and_missing_resources_refuse_the_upgrade(gateway_cluster: GatewayCluster):
    topic = new_topic()
    cases = [
        (ws_url(gateway_cluster, "consumer", topic, "s", subscriptionType="Bogus"),
         400, "Invalid query params: Invalid subscriptionType Bogus"),
        (ws_url(gateway_cluster, "producer", topic, messageRoutingMode="Nope"),
         400, "Invalid query params: Invalid messageRoutingMode Nope"),
        (ws_url(gateway_cluster, "consumer", topic, "s", receiverQueueSize="lots"),
         400, "Invalid query params: Invalid receiverQueueSize lots"),
        (ws_url(gateway_cluster, "reader", topic, messageId="%%%"), 400, "Invalid query params: Invalid messageId"),
        # Pulsar options the gateway cannot honour: refused, not accepted and ignored.
        (ws_url(gateway_cluster, "producer", topic, compressionType="BROTLI"),
         400, "Invalid query params: Invalid compressionType BROTLI"),
        (ws_url(gateway_cluster, "producer", topic, encryptionKeys="k1"),
         400, "Invalid query params: Invalid encryptionKeys k1: end-to-end encryption is not supported"),
        (ws_url(gateway_cluster, "consumer", topic, "s", cryptoFailureAction="CONSUME"),
         400, "Invalid query params: Invalid cryptoFailureAction CONSUME: end-to-end encryption is not supported"),
        (gateway_cluster.url.replace("http", "ws") + f"/ws/v2/producer/persistent/{unique('nobody')}/ns/t",
         404, "Failed to create producer: "),
        (gateway_cluster.url.replace("http", "ws") + "/ws/v2/nothing/here", 404, "No WebSocket endpoint at"),
    ]
    for url, status, reason in cases:
        assert (await refused(url))[0] == status, url
        assert (await refused(url))[1].startswith(reason), url
    async with socket(ws_url(gateway_cluster, "consumer", topic, "excl")):
        status, reason = await refused(ws_url(gateway_cluster, "consumer", topic, "excl"))
        assert status == 409 and reason.startswith("Failed to subscribe: ")


@together
async def test_closing_a_socket_releases_its_producer_and_consumer(gateway_cluster: GatewayCluster):
    topic = new_topic()
    async with AdminClient(gateway_cluster.service_url) as admin:

        async def counts() -> tuple[int, int]:
            stats = await admin.topic_stats(topic)
            return stats.producers, sum(s.consumers for s in stats.subscriptions if s.name == "held")

        async with socket(ws_url(gateway_cluster, "producer", topic)) as producer:
            async with socket(ws_url(gateway_cluster, "consumer", topic, "held")):
                assert await counts() == (1, 1)
                await producer.send(publish(b"x", context="1"))
                assert (await recv(producer))["result"] == "ok"

            async def consumer_gone() -> bool:
                return await counts() == (1, 0)

            await until(consumer_gone)

        async def all_gone() -> bool:
            return await counts() == (0, 0)

        await until(all_gone)


@together
async def test_the_docs_example_session_runs(gateway_cluster: GatewayCluster):
    doc = (Path(__file__).parents[3] / "docs" / "gateway.md").read_text()
    code = doc.split("<!-- websocket-example -->", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"ws://localhost:8080"', repr(gateway_cluster.url.replace("http://", "ws://")))
    code = code.replace('"public/default/ws-demo"', repr(f"{NS}/{unique('ws-demo')}"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert sum("'result': 'ok'" in line for line in lines) == 3
    assert [line.split("'")[1] for line in lines[3:]] == ["hello 0", "hello 1", "hello 2"]
