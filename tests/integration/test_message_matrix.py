"""Every message through every door: the read-back matrix of issue 33.

Two writers -- our SDK (the gRPC door) and pulsar-client (its C++ core, the Pulsar
protocol door) -- each write one topic per cell: each schema type (String, JSON, Avro,
ProtobufNative; KeyValue from the SDK only, pulsar-client 3.x has no KeyValueSchema),
each codec (NONE, LZ4, ZLIB, ZSTD, SNAPPY) on a batch of JSON log lines, and a chunked
message, plain and ZSTD-compressed (the broker's max message size is 64 KiB here, so a
few hundred KiB go as chunks). Six readers read every topic back: our SDK's reader and
pulsar-client's reader (each with the writer's schema, so values are decoded), the
gateway's WebSocket consumer and WebSocket reader, REST peek (a chunked message is its
stored chunks there: joined by the test from Pulsar's chunk headers, and opened as
``X-Pulsar-compression`` says) and the Spark data source (one read of every topic). Each
(writer, cell, reader) is a test of its own asserting that the reader sees the message
id the writer's send returned (a chunked message's first and last chunk), the payload
bytes the writer's schema encoded, the decoded value (the clients), properties, key,
ordering key, event time and schema version (1 on the Avro topics, 0 on the others).

One cluster (a bookie, a broker serving both doors, the gateway) and one SparkSession for
the module; everything is written once, and each reader reads everything once."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import sys
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import cramjam
import httpx
import pulsar
import pulsar.schema as ps
import pytest
from google.protobuf import timestamp_pb2
from websockets.asyncio.client import connect

import magnetar.asyncio as mg
import magnetar.schema as ms
from magnetar.gateway.websocket import ids as ws_ids
from magnetar.testing.pulsarclient import pulsar_client

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark-jobs"))

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MAX_MESSAGE = 64 * 1024
EVENT_MS = 1_714_557_600_250  # 2024-05-01T10:00:00.250Z

def version(cell: Cell) -> bytes:
    """The schema version (Pulsar's 8 bytes) the writer's messages carry: the topic's first
    schema (0), or for Avro its second (1): an earlier Reading, without ``value``, is
    declared first, so a version other than 0 crosses every door too. b"": bytes."""
    if not cell.schema:
        return b""
    return (1 if cell.schema == "avro" else 0).to_bytes(8, "big")


def reading(lib: Any) -> type:
    """One Record, made with ``lib``'s types (magnetar.schema or pulsar.schema)."""

    class Reading(lib.Record):
        sensor = lib.String()
        value = lib.Double(default=0.0, required_default=True)  # its default: see OurEarlier

    return Reading


OurReading, TheirReading = reading(ms), reading(ps)
# The Avro topics' version 0: Reading without ``value`` (adding a field with a default is
# FULL-compatible, the namespace's default strategy).
OurEarlier = type("Reading", (ms.Record,), {"sensor": ms.String()})
TheirEarlier = type("Reading", (ps.Record,), {"sensor": ps.String()})


@dataclass(frozen=True)
class Cell:
    name: str
    schema: str | None = None  # None: bytes
    codec: str = "NONE"
    chunked: bool = False


CELLS = [
    *(Cell(kind, schema=kind) for kind in ("string", "json", "avro", "protobuf-native", "key-value")),
    *(Cell(f"codec-{codec}", codec=codec) for codec in ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")),
    Cell("chunked", chunked=True),
    Cell("chunked-ZSTD", codec="ZSTD", chunked=True),
]
PULSAR_CODEC = {"NONE": "NONE", "LZ4": "LZ4", "ZLIB": "ZLib", "ZSTD": "ZSTD", "SNAPPY": "SNAPPY"}
# pulsar-client 3.x has no KeyValueSchema: the SDK alone writes that cell.
WRITTEN = [(w, c) for w in ("sdk", "pulsar") for c in CELLS if not (w == "pulsar" and c.schema == "key-value")]
READERS = ("sdk", "pulsar-client", "websocket", "websocket-reader", "rest-peek", "spark")


def our_schema(kind: str | None) -> Any:
    return {
        None: lambda: ms.BytesSchema(),
        "string": lambda: ms.StringSchema(),
        "json": lambda: ms.JsonSchema(OurReading),
        "avro": lambda: ms.AvroSchema(OurReading),
        "protobuf-native": lambda: ms.ProtobufNativeSchema(timestamp_pb2.Timestamp),
        "key-value": lambda: ms.KeyValueSchema(ms.StringSchema(), ms.AvroSchema(OurReading)),
    }[kind]()


def their_schema(kind: str | None) -> Any:
    """pulsar-client's schema for ``kind`` (bytes for KeyValue, which it cannot decode)."""
    return {
        "string": lambda: ps.StringSchema(),
        "json": lambda: ps.JsonSchema(TheirReading),
        "avro": lambda: ps.AvroSchema(TheirReading),
        "protobuf-native": lambda: ps.ProtobufNativeSchema(timestamp_pb2.Timestamp),
    }.get(kind or "", lambda: ps.BytesSchema())()


def values(cell: Cell, writer: str) -> list[Any]:
    """What ``writer`` sends on ``cell``'s topic (its own Record class for JSON/Avro)."""
    record = OurReading if writer == "sdk" else TheirReading
    if cell.chunked:  # about 3.5 max message sizes (random: still as large compressed), then one that fits
        return [random.Random(f"{writer}-{cell.name}").randbytes(3 * MAX_MESSAGE + MAX_MESSAGE // 2), b"after the chunked one"]
    return {
        None: lambda: [json.dumps({"ts": EVENT_MS + i, "level": "info", "msg": "request served", "path": f"/api/v1/items/{i}",
                                   "writer": writer, "cell": cell.name}).encode() * 4 for i in range(3)],
        "string": lambda: [f"héllo-{writer}-{i}" for i in range(3)],
        "json": lambda: [record(sensor=f"{writer}-{i}", value=i + 0.5) for i in range(3)],
        "avro": lambda: [record(sensor=f"{writer}-{i}", value=-i - 0.25) for i in range(3)],
        "protobuf-native": lambda: [timestamp_pb2.Timestamp(seconds=1_700_000_000 + i, nanos=i) for i in range(3)],
        "key-value": lambda: [(f"kv-{i}", OurReading(sensor=f"{writer}-{i}", value=float(i))) for i in range(3)],
    }[cell.schema]()  # fmt: skip


def plain(value: Any) -> Any:
    """A decoded value comparable across clients (a Record of either library as a dict)."""
    if isinstance(value, ms.Record | ps.Record):
        return {"sensor": value.sensor, "value": value.value}
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    return value


@dataclass(frozen=True)
class Seen:
    """One message as a door shows it (``value``: decoded, only where the door decodes)."""

    data: bytes
    properties: dict[str, str]
    key: str | None
    ordering_key: bytes
    event_ms: int
    schema_version: bytes
    value: Any = None
    batch_index: int = field(default=-1, compare=False)  # as the SDK's reader saw it
    ids: Ids = ()


Ids = tuple[tuple[int, int, int], ...]
"""A message id as (ledger, entry, batch index) positions: one, or a chunked message's
first and last chunk."""


def ids_of(text: str) -> Ids:
    """The positions an id's text names: Magnetar's ``ledger:entry[:partition:batch]`` (a
    chunked one ``<first>;<last>``) or pulsar-client's ``(ledger,entry,partition,batch)``
    (``(...);(...)``); a missing batch index is -1."""
    out = []
    for part in text.split(";"):
        nums = [int(n) for n in re.findall(r"-?\d+", part)]
        out.append((nums[0], nums[1], nums[3] if len(nums) > 3 else -1))
    return tuple(out)


def meta(i: int, writer: str, cell: Cell) -> dict[str, Any]:
    return {"properties": {"i": str(i), "writer": writer, "cell": cell.name}, "partition_key": f"key-{i}",
            "ordering_key": f"order-{i}", "event_timestamp": EVENT_MS + i}  # fmt: skip


def expected(writer: str, cell: Cell) -> list[Seen]:
    """What every door must show of what ``writer`` sent on ``cell``'s topic: the payload
    its own schema encoded, and the schema version its producer was given (:func:`version`)."""
    schema = our_schema(cell.schema) if writer == "sdk" else their_schema(cell.schema)
    out = []
    for i, v in enumerate(values(cell, writer)):
        m = meta(i, writer, cell)
        out.append(Seen(schema.encode(v), m["properties"], m["partition_key"], m["ordering_key"].encode(),
                        m["event_timestamp"], version(cell), plain(v)))  # fmt: skip
    return out


def topic_of(writer: str, cell: Cell, run: str) -> str:
    return f"persistent://public/default/matrix-{run}-{writer}-{cell.name}"


# -- the writers ------------------------------------------------------------------------
async def sdk_write(service_url: str, topic: str, cell: Cell) -> list[Ids]:
    kw: dict[str, Any] = {"compression_type": getattr(mg.CompressionType, cell.codec), "schema": our_schema(cell.schema)}
    if cell.chunked:
        kw.update(chunking_enabled=True, batching_enabled=False, max_message_size=MAX_MESSAGE)
    else:
        kw.update(batching_enabled=True, batching_max_publish_delay_ms=50)
    async with mg.Client(service_url) as client:
        if cell.schema == "avro":
            await (await client.create_producer(topic, schema=ms.AvroSchema(OurEarlier))).close()
        producer = await client.create_producer(topic, **kw)
        # sent together, so the batching producer puts them in one (compressed) batch
        sent = await asyncio.gather(*(producer.send(v, **meta(i, "sdk", cell)) for i, v in enumerate(values(cell, "sdk"))))
        await producer.close()
    return [ids_of(str(mid)) for mid in sent]


def pulsar_write(pulsar_url: str, topic: str, cell: Cell) -> list[Ids]:
    kw: dict[str, Any] = {"compression_type": getattr(pulsar.CompressionType, PULSAR_CODEC[cell.codec]),
                          "schema": their_schema(cell.schema)}  # fmt: skip
    if cell.chunked:
        kw.update(chunking_enabled=True, batching_enabled=False)
    else:
        kw.update(batching_enabled=True, batching_max_publish_delay_ms=50)
    client = pulsar_client(pulsar_url, operation_timeout_seconds=30)
    try:
        if cell.schema == "avro":
            client.create_producer(topic, schema=ps.AvroSchema(TheirEarlier)).close()
        producer = client.create_producer(topic, **kw)
        receipts: dict[int, tuple[pulsar.Result, Any]] = {}
        for i, v in enumerate(values(cell, "pulsar")):
            producer.send_async(v, lambda res, mid, i=i: receipts.__setitem__(i, (res, mid)), **meta(i, "pulsar", cell))
        producer.flush()
        producer.close()
        count = len(values(cell, "pulsar"))
        assert [receipts[i][0] for i in range(count)] == [pulsar.Result.Ok] * count, (topic, receipts)
        return [ids_of(str(receipts[i][1])) for i in range(count)]
    finally:
        client.close()


# -- the readers: each reads every topic once -------------------------------------------
async def sdk_read(service_url: str, topics: dict[str, tuple[str, Cell]]) -> dict[str, list[Seen]]:
    out: dict[str, list[Seen]] = {}
    async with mg.Client(service_url) as client:
        for topic, (writer, cell) in topics.items():
            reader = await client.create_reader(topic, mg.MessageId.earliest, schema=our_schema(cell.schema))
            got = [await reader.read_next(20_000) for _ in values(cell, writer)]
            await reader.close()
            out[topic] = [Seen(m.data(), m.properties(), m.partition_key() if m.has_partition_key() else None,
                               m.ordering_key(), m.event_timestamp(), m.schema_version(), plain(m.value()),
                               m.message_id().batch_index(), ids_of(str(m.message_id()))) for m in got]  # fmt: skip
    return out


def pulsar_read(pulsar_url: str, topics: dict[str, tuple[str, Cell]]) -> dict[str, list[Seen]]:
    out: dict[str, list[Seen]] = {}
    client = pulsar_client(pulsar_url, operation_timeout_seconds=30)
    try:
        for topic, (writer, cell) in topics.items():
            decodes = cell.schema != "key-value"
            reader = client.create_reader(topic, pulsar.MessageId.earliest, schema=their_schema(cell.schema))
            got = [reader.read_next(timeout_millis=20_000) for _ in values(cell, writer)]
            reader.close()
            # pulsar-client hands the ordering key and the schema version over as str
            out[topic] = [Seen(m.data(), m.properties(), m.partition_key() or None, m.ordering_key().encode("latin-1"),
                               m.event_timestamp(), m.schema_version().encode("latin-1"),
                               plain(m.value()) if decodes else None, ids=ids_of(str(m.message_id()))) for m in got]  # fmt: skip
    finally:
        client.close()
    return out


# Pulsar's codecs by their X-Pulsar-compression name, framed as Pulsar's clients frame them.
DECOMPRESS: dict[str, Callable[[bytes, int], bytes]] = {
    "LZ4": lambda data, size: bytes(cramjam.lz4.decompress_block(data, output_len=size)),
    "ZLIB": lambda data, size: zlib.decompress(data),
    "ZSTD": lambda data, size: bytes(cramjam.zstd.decompress(data)),
    "SNAPPY": lambda data, size: bytes(cramjam.snappy.decompress_raw(data)),
}


def _ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


async def websocket_read(gateway_url: str, topics: dict[str, tuple[str, Cell]], reader: bool = False) -> dict[str, list[Seen]]:
    """Through the WebSocket consumer (subscription ``ws``, each message acked) or, with
    ``reader``, the WebSocket reader from the earliest message."""
    out: dict[str, list[Seen]] = {}
    for topic, (writer, cell) in topics.items():
        local = topic.removeprefix("persistent://")
        path = (f"/ws/v2/reader/persistent/{local}?{urlencode({'messageId': 'earliest'})}" if reader else
                f"/ws/v2/consumer/persistent/{local}/ws?{urlencode({'subscriptionType': 'Shared'})}")  # fmt: skip
        async with connect(gateway_url.replace("http://", "ws://") + path, open_timeout=30, max_size=None) as ws:
            frames = []
            for _ in values(cell, writer):
                frames.append(json.loads(await asyncio.wait_for(ws.recv(), 20)))
                await ws.send(json.dumps({"messageId": frames[-1]["messageId"]}))
        out[topic] = [Seen(base64.b64decode(f["payload"]), f["properties"], f.get("key"),
                           base64.b64decode(f.get("orderingKey", "")), _ms(f["eventTime"]) if "eventTime" in f else 0,
                           int(f["schemaVersion"]).to_bytes(8, "big", signed=True) if "schemaVersion" in f else b"",
                           ids=ids_of(str(ws_ids.decode(f["messageId"])))) for f in frames]  # fmt: skip
    return out


async def rest_peek_read(gateway_url: str, topics: dict[str, tuple[str, Cell]]) -> dict[str, list[Seen]]:
    """Each message by its backlog position on subscription ``peek``; a chunked message is
    peeked chunk by chunk, its parts joined in chunk id order, checked by the headers and
    decompressed as ``X-Pulsar-compression`` says (a compressed chunk is stored, and
    peeked, as its part of the compressed whole)."""
    out: dict[str, list[Seen]] = {}
    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as http:
        for topic, (writer, cell) in topics.items():
            local = topic.removeprefix("persistent://")
            seen: list[Seen] = []
            parts: list[bytes] = []
            first = ""  # the first chunk's id
            position = 0
            while len(seen) < len(values(cell, writer)):
                position += 1
                r = await http.get(f"/admin/v2/persistent/{local}/subscription/peek/position/{position}")
                assert r.status_code == 200, (topic, position, r.status_code, r.text)
                h = r.headers
                mid = h["X-Pulsar-Message-ID"]
                if "X-Pulsar-chunk-id" in h:
                    assert int(h["X-Pulsar-chunk-id"]) == len(parts), (topic, position)
                    first = first if parts else mid
                    parts.append(r.content)
                    if len(parts) < int(h["X-Pulsar-num-chunks-from-msg"]):
                        continue
                    data, parts, mid = b"".join(parts), [], f"{first};{mid}"
                    assert len(data) == int(h["X-Pulsar-total-chunk-msg-size"])
                    if "X-Pulsar-compression" in h:
                        size = int(h["X-Pulsar-uncompressed-size"])
                        data = DECOMPRESS[h["X-Pulsar-compression"]](data, size)
                        assert len(data) == size
                else:
                    data = r.content
                seen.append(Seen(data, json.loads(h.get("X-Pulsar-PROPERTY", "{}")), h.get("X-Pulsar-partition-key"),
                                 base64.b64decode(h.get("X-Pulsar-Base64-ordering-key", "")),
                                 _ms(h["X-Pulsar-event-time"]) if "X-Pulsar-event-time" in h else 0,
                                 base64.b64decode(h.get("X-Pulsar-Base64-schema-version-b64encoded", "")),
                                 ids=ids_of(mid)))  # fmt: skip
            out[topic] = seen
    return out


def spark_read(spark: Any, service_url: str, admin_url: str, topics: dict[str, tuple[str, Cell]]) -> dict[str, list[Seen]]:
    rows = (spark.read.format("magnetar").option("service.url", service_url).option("admin.url", admin_url)
            .option("topics", ",".join(topics)).load().collect())  # fmt: skip
    out: dict[str, list[Seen]] = {topic: [] for topic in topics}
    for r in sorted(rows, key=lambda r: (r["topic"], int(r["properties"]["i"]))):
        event_ms = round(r["event_time"].timestamp() * 1000) if r["event_time"] is not None else 0
        out[r["topic"]].append(Seen(bytes(r["value"]), dict(r["properties"]), r["key"], bytes(r["ordering_key"] or b""),
                                    event_ms, bytes(r["schema_version"] or b""), ids=ids_of(r["message_id"])))  # fmt: skip
    return out


# -- the module's cluster, writes and reads -----------------------------------------------
@dataclass
class Matrix:
    cluster: Any  # magnetar_spark.testing.Cluster
    run: str
    topics: dict[str, tuple[str, Cell]]
    sent: dict[str, list[Ids]]
    """Each topic's message ids, as its writer's sends returned them."""
    reads: dict[str, Callable[[], dict[str, list[Seen]]]]
    cache: dict[str, dict[str, list[Seen]]]

    def read(self, reader: str) -> dict[str, list[Seen]]:
        if reader not in self.cache:
            self.cache[reader] = self.reads[reader]()
        return self.cache[reader]


@pytest.fixture(scope="module")
def spark_session() -> Iterator[Any]:
    """The run's SparkSession if one is active (tests/spark's), otherwise one of our own."""
    from magnetar_spark.session import local_session
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    session = active or local_session("magnetar-matrix", master="local[2]")
    try:
        yield session
    finally:
        if active is None:
            session.stop()


@pytest.fixture(scope="module")
def matrix(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    from magnetar_spark.testing import cluster

    run = uuid.uuid4().hex[:6]
    topics = {topic_of(w, c, run): (w, c) for w, c in WRITTEN}
    sent: dict[str, list[Ids]] = {}
    with cluster(zk_server, Path(tmp_path_factory.mktemp("matrix")), max_message_bytes=MAX_MESSAGE,
                 default_retention_time_minutes=-1, default_retention_size_mb=-1) as c:  # fmt: skip

        async def write_all() -> None:
            for topic, (writer, cell) in topics.items():
                if writer == "sdk":
                    sent[topic] = await sdk_write(c.service_url, topic, cell)
                else:
                    sent[topic] = await asyncio.to_thread(pulsar_write, c.pulsar_url, topic, cell)
            async with httpx.AsyncClient(base_url=c.admin_url, timeout=30) as http:
                for topic in topics:
                    for sub in ("ws", "peek"):
                        r = await http.put(f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/subscription/{sub}", json="earliest")
                        assert r.status_code == 204, (topic, sub, r.text)

        asyncio.run(write_all())
        reads: dict[str, Callable[[], dict[str, list[Seen]]]] = {
            "sdk": lambda: asyncio.run(sdk_read(c.service_url, topics)),
            "pulsar-client": lambda: pulsar_read(c.pulsar_url, topics),
            "websocket": lambda: asyncio.run(websocket_read(c.admin_url, topics)),
            "websocket-reader": lambda: asyncio.run(websocket_read(c.admin_url, topics, reader=True)),
            "rest-peek": lambda: asyncio.run(rest_peek_read(c.admin_url, topics)),
        }
        yield Matrix(c, run, topics, sent, reads, {})


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(("writer", "cell"), WRITTEN, ids=[f"{w}-{c.name}" for w, c in WRITTEN])
def test_every_door_reads_what_each_client_wrote(request: pytest.FixtureRequest, matrix: Matrix, writer: str,
                                                 cell: Cell, reader: str) -> None:  # fmt: skip
    if reader == "spark" and "spark" not in matrix.reads:
        spark = request.getfixturevalue("spark_session")
        c = matrix.cluster
        matrix.reads["spark"] = lambda: spark_read(spark, c.service_url, c.admin_url, matrix.topics)
    topic = topic_of(writer, cell, matrix.run)
    want = [replace(s, ids=ids) for s, ids in zip(expected(writer, cell), matrix.sent[topic], strict=True)]
    got = matrix.read(reader)[topic]
    decodes = reader == "sdk" or (reader == "pulsar-client" and cell.schema != "key-value")
    if not decodes:
        want = [replace(s, value=None) for s in want]
    elif not cell.schema:  # bytes: the value is the payload
        want = [replace(s, value=s.data) for s in want]
    assert got == want
    if reader == "sdk" and not cell.chunked:  # the writer's messages went as one (compressed) batch
        assert [s.batch_index for s in got] == list(range(len(want)))


@pytest.mark.parametrize("writer", ["sdk", "pulsar"])
@pytest.mark.parametrize("codec", ["LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_each_codec_is_stored_compressed(matrix: Matrix, writer: str, codec: str) -> None:
    """The same JSON log lines take less storage compressed with ``codec`` than with NONE
    (the broker stores the batch as the writer compressed it)."""

    async def storage(cell: Cell) -> int:
        local = topic_of(writer, cell, matrix.run).removeprefix("persistent://")
        async with httpx.AsyncClient(base_url=matrix.cluster.admin_url, timeout=30) as http:
            r = await http.get(f"/admin/v2/persistent/{local}/stats")
        assert r.status_code == 200, r.text
        return int(r.json()["storageSize"])

    plain_size = asyncio.run(storage(Cell("codec-NONE")))
    compressed = asyncio.run(storage(Cell(f"codec-{codec}", codec=codec)))
    assert 0 < compressed < plain_size


def test_a_pulsar_client_producer_with_an_incompatible_schema_is_refused(matrix: Matrix) -> None:
    """On the Avro topic pulsar-client wrote, a String producer is refused with
    pulsar-client's IncompatibleSchema; a producer with the topic's schema is not."""
    topic = next(t for t, (w, c) in matrix.topics.items() if (w, c.schema) == ("pulsar", "avro"))
    client = pulsar_client(matrix.cluster.pulsar_url, operation_timeout_seconds=30)
    try:
        with pytest.raises(pulsar.exceptions.IncompatibleSchema):
            client.create_producer(topic, schema=ps.StringSchema())
        client.create_producer(topic, schema=ps.AvroSchema(TheirReading)).close()
    finally:
        client.close()
