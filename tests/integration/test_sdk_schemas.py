"""Schemas in the SDK against a real broker and bookies (the shared cluster): each schema
type produced and consumed through the gRPC door, a topic written by our SDK and by
pulsar-client (Pulsar protocol door) with the same Record and read back by both, a
producer or consumer whose schema differs refused with IncompatibleSchema, and a reader
with a schema."""

from __future__ import annotations

import asyncio
import enum

import pulsar
import pulsar.schema as ps
import pytest
from google.protobuf import timestamp_pb2

import magnetar
import magnetar.asyncio as mg
import magnetar.schema as ms
from magnetar.client.schemas import version_number
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration


class Unit(enum.Enum):
    CELSIUS = 1
    KELVIN = 2


def reading(lib):
    """The same Record class made with ``lib``'s types (magnetar.schema or pulsar.schema)."""

    class Reading(lib.Record):
        sensor = lib.String(required=True)
        value = lib.Double()
        unit = Unit
        tags = lib.Map(lib.String())

    return Reading


OurReading, TheirReading = reading(ms), reading(ps)


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    return shared_cluster.broker


async def _topic(broker, name: str) -> str:
    return f"persistent://{await new_namespace(broker.address, 'schemas')}/{name}"


CASES = {
    "string": (ms.StringSchema, lambda: ms.StringSchema(), ["héllo", "wörld"]),
    "json": (ms.JsonSchema, lambda: ms.JsonSchema(OurReading),
             [OurReading(sensor="a", value=1.5, unit=Unit.KELVIN, tags={"k": "v"}), OurReading(sensor="b")]),
    "avro": (ms.AvroSchema, lambda: ms.AvroSchema(OurReading),
             [OurReading(sensor="a", value=-2.0, unit="CELSIUS"), OurReading(sensor="b", tags={})]),
    "protobuf-native": (ms.ProtobufNativeSchema, lambda: ms.ProtobufNativeSchema(timestamp_pb2.Timestamp),
                        [timestamp_pb2.Timestamp(seconds=1, nanos=2), timestamp_pb2.Timestamp(seconds=3)]),
    "key-value": (ms.KeyValueSchema, lambda: ms.KeyValueSchema(ms.StringSchema(), ms.AvroSchema(OurReading)),
                  [("k1", OurReading(sensor="kv", value=9.0)), (None, OurReading(sensor="no key"))]),
}  # fmt: skip


async def test_each_schema_type_round_trips_through_the_sdk(cluster) -> None:
    async with mg.Client(cluster.address) as client:
        for name, (_, make, values) in CASES.items():
            topic = await _topic(cluster, name)
            consumer = await client.subscribe(topic, "s", schema=make(), initial_position=mg.InitialPosition.Earliest)
            producer = await client.create_producer(topic, schema=make(), batching_max_publish_delay_ms=5)
            await asyncio.gather(*(producer.send(v) for v in values))
            got = [await consumer.receive(10_000) for _ in values]
            assert [m.value() for m in got] == [tuple(v) if name == "key-value" else v for v in values], name
            assert {version_number(m.schema_version()) for m in got} == {0}, name
            reader = await client.create_reader(topic, mg.MessageId.earliest, schema=make())
            assert (await reader.read_next(10_000)).value() == got[0].value(), name
            # A consumer with bytes (the default) gets the payload as written.
            raw = await client.subscribe(topic, "raw", initial_position=mg.InitialPosition.Earliest)
            assert (await raw.receive(10_000)).value() == make().encode(values[0]), name
            for handle in (consumer, producer, reader, raw):
                await handle.close()


def _pulsar_side(url: str, topic: str, kind: str, ours_sent: int) -> list[dict]:
    """pulsar-client: produce two readings with the same Record, then read everything."""
    client = pulsar_client(url, operation_timeout_seconds=15)
    try:
        schema = getattr(ps, kind)(TheirReading)
        consumer = client.subscribe(topic, "pulsar-client", schema=schema, initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, schema=schema)
        producer.send(TheirReading(sensor="pulsar-1", value=1.0, unit=Unit.KELVIN))
        producer.send(TheirReading(sensor="pulsar-2", tags={"from": "pulsar"}))
        out = []
        for _ in range(ours_sent + 2):
            msg = consumer.receive(15_000)
            out.append(dict(vars(msg.value())))
            consumer.acknowledge(msg)
        return out
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["AvroSchema", "JsonSchema"])
async def test_our_sdk_and_pulsar_client_share_one_topic(cluster, kind: str) -> None:
    topic = await _topic(cluster, f"shared-{kind}")
    ours = [OurReading(sensor="sdk-1", value=0.25, unit=Unit.CELSIUS), OurReading(sensor="sdk-2", tags={"from": "sdk"})]
    async with mg.Client(cluster.address) as client:
        schema = getattr(ms, kind)(OurReading)
        consumer = await client.subscribe(topic, "sdk", schema=schema, initial_position=mg.InitialPosition.Earliest)
        producer = await client.create_producer(topic, schema=getattr(ms, kind)(OurReading))
        for value in ours:
            await producer.send(value)
        theirs_read = await asyncio.to_thread(_pulsar_side, cluster.pulsar_url, topic, kind, len(ours))
        ours_read = [(await consumer.receive(10_000)).value() for _ in range(4)]
        if kind == "AvroSchema":  # the writer's version was fetched (GetSchema) and kept for the topic
            known = client._pool.writer_schemas.get(topic, 0)
            assert isinstance(known, ms.SchemaInfo) and known.schema_type() == ms.SchemaType.AVRO
    expected = [
        {"sensor": "sdk-1", "value": 0.25, "unit": Unit.CELSIUS, "tags": None},
        {"sensor": "sdk-2", "value": None, "unit": None, "tags": {"from": "sdk"}},
        {"sensor": "pulsar-1", "value": 1.0, "unit": Unit.KELVIN, "tags": None},
        {"sensor": "pulsar-2", "value": None, "unit": None, "tags": {"from": "pulsar"}},
    ]
    fields = ("sensor", "value", "unit", "tags")
    assert [{f: getattr(r, f) for f in fields} for r in ours_read] == expected
    assert [{f: r[f] for f in fields} for r in theirs_read] == expected


async def test_a_schema_other_than_the_topics_is_refused_and_changes_nothing(cluster) -> None:
    topic = await _topic(cluster, "incompatible")
    async with mg.Client(cluster.address) as client:
        producer = await client.create_producer(topic, schema=ms.AvroSchema(OurReading))
        with pytest.raises(mg.IncompatibleSchema):
            await client.create_producer(topic, schema=ms.StringSchema())
        with pytest.raises(mg.IncompatibleSchema):
            await client.subscribe(topic, "other", schema=ms.JsonSchema(OurReading))
        # The topic keeps its schema and serves its producer; a bytes consumer declares nothing.
        consumer = await client.subscribe(topic, "s", schema=ms.AvroSchema(OurReading), initial_position=mg.InitialPosition.Earliest)
        await producer.send(OurReading(sensor="still"))
        assert (await consumer.receive(10_000)).value().sensor == "still"
        with pytest.raises(TypeError):
            await producer.send(b"not a reading")  # refused before anything is sent
        # A bytes producer declares nothing (not checked): what it writes does not decode,
        # value() says so, and the consumer goes on.
        raw = await client.create_producer(topic)
        await raw.send(b"\xff\xff not avro")
        await producer.send(OurReading(sensor="after"))
        bad, after = await consumer.receive(10_000), await consumer.receive(10_000)
        with pytest.raises(mg.InvalidMessage):
            bad.value()
        assert bad.data() == b"\xff\xff not avro" and after.value().sensor == "after"
        assert (await client._pool.get_schema(topic)).schema.type == int(ms.SchemaType.AVRO)
        assert await client._pool.get_schema(topic, 7) is None
        assert await client._pool.get_schema(await _topic(cluster, "no-schema")) is None


def test_the_blocking_client_takes_schemas_too(cluster) -> None:
    topic = asyncio.run(_topic(cluster, "blocking"))
    schema = ms.JsonSchema(OurReading)
    with magnetar.Client(cluster.address) as client:
        consumer = client.subscribe(topic, "s", magnetar.ConsumerType.Shared, schema)  # pulsar-client's position
        producer = client.create_producer(topic, None, schema)
        producer.send(OurReading(sensor="blocking", unit=Unit.CELSIUS))
        msg = consumer.receive(10_000)
        assert msg.value() == OurReading(sensor="blocking", unit=Unit.CELSIUS)
        reader = client.create_reader(topic, magnetar.MessageId.earliest, schema)
        assert reader.read_next(10_000).value().sensor == "blocking"


def _pulsar_send(url: str, topic: str, schema, value) -> None:
    client = pulsar_client(url, operation_timeout_seconds=15)
    try:
        client.create_producer(topic, schema=schema).send(value)
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["string", "protobuf-native"])
async def test_pulsar_client_declares_the_same_string_and_protobuf_schemas(cluster, kind: str) -> None:
    """pulsar-client declares first; our SDK's producer and consumer declare the same
    schema (not refused) and read pulsar-client's message."""
    topic = await _topic(cluster, f"pulsar-first-{kind}")
    theirs, value = {
        "string": (ps.StringSchema(), "from pulsar-client"),
        "protobuf-native": (ps.ProtobufNativeSchema(timestamp_pb2.Timestamp), timestamp_pb2.Timestamp(seconds=5)),
    }[kind]
    await asyncio.to_thread(_pulsar_send, cluster.pulsar_url, topic, theirs, value)
    make = CASES[kind][1]
    async with mg.Client(cluster.address) as client:
        await (await client.create_producer(topic, schema=make())).close()
        consumer = await client.subscribe(topic, "s", schema=make(), initial_position=mg.InitialPosition.Earliest)
        assert (await consumer.receive(10_000)).value() == value
