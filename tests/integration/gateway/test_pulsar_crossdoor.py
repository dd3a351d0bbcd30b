"""Messages crossing doors between pulsar-client (its C++ core, through the broker's
Pulsar protocol door) and the gateway: sent by pulsar-client and read through the
WebSocket consumer API and REST peek, sent through the WebSocket producer API and
received by pulsar-client, with the same message id, key, ordering key, properties, event
time, schema version and payload; batching on and off on each side, and compressed with
each codec (LZ4, ZLIB, ZSTD, SNAPPY) on each side. (The WebSocket frames'
``orderingKey`` and ``schemaVersion`` are Magnetar's additions.)"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx
import pulsar
import pytest
from gateway_support import GatewayCluster, unique
from websockets.asyncio.client import connect

from magnetar.common.message_id import MessageId
from magnetar.gateway.websocket import ids
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = [pytest.mark.integration]

NS = "public/default"
P = "/admin/v2/persistent"
EVENT_MS = 1_714_557_600_250  # 2024-05-01T10:00:00.250Z
COUNT = 5
# Batching on and off without compression; each codec on a batch, and LZ4 on single messages.
CASES = [(False, "NONE"), (True, "NONE"), (True, "LZ4"), (True, "ZLIB"), (True, "ZSTD"), (True, "SNAPPY"), (False, "LZ4")]
CASE_IDS = [f"{'batched' if b else 'single'}-{c}" for b, c in CASES]
PULSAR_CODEC = {"NONE": "NONE", "LZ4": "LZ4", "ZLIB": "ZLib", "ZSTD": "ZSTD", "SNAPPY": "SNAPPY"}


def _ws(cluster: GatewayCluster, kind: str, topic: str, sub: str | None = None, **params: Any) -> str:
    local = topic.rsplit("/", 1)[1]
    path = f"/ws/v2/{kind}/persistent/{NS}/{local}" + (f"/{sub}" if sub else "")
    return cluster.url.replace("http://", "ws://") + path + (f"?{urlencode(params)}" if params else "")


def _id(mid: pulsar.MessageId | MessageId) -> tuple[int, int, int, int]:
    return mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index()


def _iso(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{millis:03d}Z"


def _client(cluster: GatewayCluster) -> pulsar.Client:
    return pulsar_client(cluster.broker.pulsar_url, operation_timeout_seconds=15, connection_timeout_ms=5000)


def _pulsar_send(cluster: GatewayCluster, topic: str, batching: bool, codec: str) -> list[tuple[int, int, int, int]]:
    """COUNT messages with keys, ordering keys, properties and event times, from a producer
    with a schema (the topic's first: the broker gives it a version) compressing with
    ``codec``; their ids."""
    client = _client(cluster)
    try:
        producer = client.create_producer(topic, producer_name=unique("pp"), batching_enabled=batching,
                                          batching_max_publish_delay_ms=50, schema=pulsar.schema.StringSchema(),
                                          compression_type=getattr(pulsar.CompressionType, PULSAR_CODEC[codec]))  # fmt: skip
        receipts: dict[int, Any] = {}
        for i in range(COUNT):
            producer.send_async(
                f"from-pulsar-{i}", lambda res, mid, i=i: receipts.__setitem__(i, (res, mid)),
                properties={"i": str(i)}, partition_key=f"k{i}", ordering_key=f"o{i}", event_timestamp=EVENT_MS + i,
            )  # fmt: skip
        producer.flush()
        producer.close()
        assert [receipts[i][0] for i in range(COUNT)] == [pulsar.Result.Ok] * COUNT
        return [_id(receipts[i][1]) for i in range(COUNT)]
    finally:
        client.close()


@pytest.mark.parametrize(("batching", "codec"), CASES, ids=CASE_IDS)
async def test_pulsar_client_messages_read_through_websocket_and_rest_peek(
    gateway_cluster: GatewayCluster, batching: bool, codec: str
) -> None:
    topic = f"persistent://{NS}/{unique('x2ws')}"
    local = topic.removeprefix("persistent://")
    async with httpx.AsyncClient(base_url=gateway_cluster.url, timeout=30) as http:
        assert (await http.put(f"{P}/{local}")).status_code == 204
        assert (await http.put(f"{P}/{local}/subscription/ws", json="earliest")).status_code == 204
        ids_sent = await asyncio.to_thread(_pulsar_send, gateway_cluster, topic, batching, codec)
        if batching:
            assert any(i[3] > 0 for i in ids_sent), "the client sent no batch of more than one message"

        # pulsar-client's own view first: what every other door must show the same
        pulsar_seen = await asyncio.to_thread(_pulsar_read, gateway_cluster, topic)
        assert pulsar_seen == [
            (ids_sent[i], b"from-pulsar-%d" % i, f"k{i}", f"o{i}", {"i": str(i)}, EVENT_MS + i, pulsar_seen[0][6])
            for i in range(COUNT)
        ]
        version = pulsar_seen[0][6].encode("latin-1")  # pulsar-client hands the 8 bytes over as a str
        assert len(version) == 8  # the producer declared a schema: its messages carry the version

        for i in range(COUNT):  # REST peek: position i+1 of the subscription's backlog
            r = await http.get(f"{P}/{local}/subscription/ws/position/{i + 1}")
            assert r.status_code == 200 and r.content == b"from-pulsar-%d" % i
            assert _id(MessageId.parse(r.headers["X-Pulsar-Message-ID"])) == ids_sent[i]
            assert json.loads(r.headers["X-Pulsar-PROPERTY"]) == {"i": str(i)}
            assert r.headers["X-Pulsar-partition-key"] == f"k{i}"
            assert r.headers["X-Pulsar-event-time"] == _iso(EVENT_MS + i)
            assert base64.b64decode(r.headers["X-Pulsar-Base64-ordering-key"]) == pulsar_seen[i][3].encode()
            assert base64.b64decode(r.headers["X-Pulsar-Base64-schema-version-b64encoded"]) == version

        async with connect(_ws(gateway_cluster, "consumer", topic, "ws"), open_timeout=30) as ws:
            frames = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(COUNT)]
            for frame in frames:
                await ws.send(json.dumps({"messageId": frame["messageId"]}))
    assert [_id(ids.decode(f["messageId"])) for f in frames] == ids_sent
    assert [base64.b64decode(f["payload"]) for f in frames] == [b"from-pulsar-%d" % i for i in range(COUNT)]
    assert [(f["key"], f["properties"], f["eventTime"]) for f in frames] == [
        (f"k{i}", {"i": str(i)}, _iso(EVENT_MS + i)) for i in range(COUNT)
    ]
    assert [(base64.b64decode(f["orderingKey"]), f["schemaVersion"]) for f in frames] == [
        (pulsar_seen[i][3].encode(), int.from_bytes(version, "big", signed=True)) for i in range(COUNT)
    ]


def _pulsar_read(cluster: GatewayCluster, topic: str) -> list[tuple[Any, ...]]:
    """COUNT messages as pulsar-client's own reader sees them, ordering key and schema
    version included (both as pulsar-client hands them over: str)."""
    client = _client(cluster)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        for _ in range(COUNT):
            m = reader.read_next(timeout_millis=10_000)
            out.append((_id(m.message_id()), m.data(), m.partition_key(), m.ordering_key(), m.properties(),
                        m.event_timestamp(), m.schema_version()))  # fmt: skip
        return out
    finally:
        client.close()


@pytest.mark.parametrize(("batching", "codec"), CASES, ids=CASE_IDS)
async def test_websocket_messages_received_by_pulsar_client(gateway_cluster: GatewayCluster, batching: bool, codec: str) -> None:
    topic = f"persistent://{NS}/{unique('ws2x')}"
    client = _client(gateway_cluster)
    try:
        consumer = await asyncio.to_thread(
            client.subscribe, topic, "px", consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
        )  # fmt: skip
        params: dict[str, Any] = (
            {"producerName": unique("wsp"), "batchingEnabled": "true", "batchingMaxPublishDelay": 50} if batching else {}
        )
        if codec != "NONE":
            params["compressionType"] = codec
        async with connect(_ws(gateway_cluster, "producer", topic, **params), open_timeout=30) as ws:
            for i in range(COUNT):
                await ws.send(json.dumps({
                    "payload": base64.b64encode(b"from-ws-%d" % i).decode(), "context": str(i), "key": f"k{i}",
                    "properties": {"i": str(i)}, "eventTime": _iso(EVENT_MS + i),
                    "orderingKey": base64.b64encode(b"o%d" % i).decode(),
                }))  # fmt: skip
            acks = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(COUNT)]
        assert [(a["result"], a["context"]) for a in acks] == [("ok", str(i)) for i in range(COUNT)]
        acked = [_id(ids.decode(a["messageId"])) for a in acks]
        if batching:
            assert any(i[3] > 0 for i in acked), "the WebSocket producer stored no batch of more than one message"

        def receive() -> list[tuple[Any, ...]]:
            out = []
            for _ in range(COUNT):
                m = consumer.receive(timeout_millis=10_000)
                consumer.acknowledge(m)
                out.append((_id(m.message_id()), m.data(), m.partition_key(), m.ordering_key(), m.properties(),
                            m.event_timestamp()))  # fmt: skip
            return sorted(out)

        got = await asyncio.to_thread(receive)
    finally:
        await asyncio.to_thread(client.close)
    assert got == [(acked[i], b"from-ws-%d" % i, f"k{i}", f"o{i}", {"i": str(i)}, EVENT_MS + i) for i in range(COUNT)]
