"""The schema registry through Pulsar's protocol door, with pulsar-client (its C++ core)
on the run's shared cluster: versions as a Record evolves, refusals by the namespace's
compatibility strategy, isAllowAutoUpdateSchema and schemaValidationEnforced,
GET_SCHEMA of an older version, and the registry surviving its broker's restart."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String

from magnetar.client.admin import AdminClient
from magnetar.proto.pulsar import pulsar_api_pb2 as pb
from magnetar.testing.namespaces import new_namespace
from magnetar.testing.pulsarclient import pulsar_client
from magnetar.testing.pulsarwire import RawPulsarConnection

pytestmark = pytest.mark.integration


def _order(**fields: Any) -> type[Record]:
    """A Record named acme.Order with ``fields`` (each version of one record)."""
    return type("Order", (Record,), {"_avro_namespace": "acme", "item": String(), **fields})


V0 = _order()
V1 = _order(count=Integer(default=7, required_default=True))  # a field added with a default
NO_DEFAULT = _order(count=Integer(required=True))  # the reader lacks a default for count


def _client(shared_cluster) -> pulsar.Client:  # type: ignore[no-untyped-def]
    port = shared_cluster.broker.protocol_port
    return pulsar_client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=10, connection_timeout_ms=5000)


def _version(message: pulsar.Message) -> int:
    return int.from_bytes(message.schema_version().encode("latin-1"), "big")


def _refusal(client: pulsar.Client, topic: str, **kwargs: Any) -> str:
    try:
        client.create_producer(topic, **kwargs).close()
    except pulsar.PulsarException as exc:
        return type(exc).__name__
    return "created"


async def _get_schema(port: int, topic: str, version: int | None = None) -> pb.CommandGetSchemaResponse:
    async with await RawPulsarConnection.open("127.0.0.1", port) as conn:
        await conn.handshake()
        request = pb.CommandGetSchema(request_id=7, topic=topic)
        if version is not None:
            request.schema_version = version.to_bytes(8, "big")
        await conn.send(pb.BaseCommand(type=pb.BaseCommand.GET_SCHEMA, getSchema=request))
        return (await conn.receive()).command.getSchemaResponse


async def _namespace(shared_cluster, **policy: Any) -> str:  # type: ignore[no-untyped-def]
    ns = await new_namespace(shared_cluster.broker.address, "schemas")
    async with AdminClient(shared_cluster.broker.address, 10) as admin:
        for key, value in policy.items():
            await admin.set_namespace_policy(ns, **{key: value})
    return ns


async def test_a_compatible_evolution_gets_the_next_version_messages_carry_theirs_and_get_schema_serves_each(
    shared_cluster,  # type: ignore[no-untyped-def]
) -> None:
    """Under BACKWARD a Record with a field added (with a default) is version 1; each
    message carries its producer's version, a V1 consumer reads both, GET_SCHEMA of
    version 0 answers version 0's definition; and all of it survives the broker's restart."""
    ns = await _namespace(shared_cluster, schema_compatibility_strategy="BACKWARD")
    topic = f"persistent://{ns}/orders"

    def produce_and_read() -> list[tuple[int, str | None, int | None]]:
        client = _client(shared_cluster)
        try:
            consumer = client.subscribe(topic, "s", schema=AvroSchema(V0))
            client.create_producer(topic, schema=AvroSchema(V0)).send(V0(item="tea"))
            client.create_producer(topic, schema=AvroSchema(V1)).send(V1(item="jam", count=2))
            out = []
            for _ in range(2):
                m = consumer.receive(10_000)
                consumer.acknowledge(m)
                out.append((_version(m), m.value().item, None))
            reader = client.subscribe(topic, "v1", schema=AvroSchema(V1), initial_position=pulsar.InitialPosition.Earliest)
            for _ in range(2):
                m = reader.receive(10_000)
                out.append((_version(m), m.value().item, m.value().count))
            return out
        finally:
            client.close()

    got = await asyncio.to_thread(produce_and_read)
    assert [g[:2] for g in got[:2]] == [(0, "tea"), (1, "jam")]
    assert got[2:] == [(0, "tea", 7), (1, "jam", 2)]  # V1 reads V0's message with count's default
    port = shared_cluster.broker.protocol_port
    for version, wanted in ((0, V0), (1, V1), (None, V1)):
        answer = await _get_schema(port, topic, version)
        assert not answer.HasField("error_code"), answer
        assert json.loads(answer.schema.schema_data) == wanted.schema()
        assert answer.schema_version == (1 if version is None else version).to_bytes(8, "big")
    assert (await _get_schema(port, topic, 5)).error_code == pb.TopicNotFound

    await asyncio.to_thread(shared_cluster.broker.restart, hard=True)  # the registry is in ZooKeeper
    assert json.loads((await _get_schema(port, topic, 0)).schema.schema_data) == V0.schema()

    def produce_again() -> tuple[int, int]:
        client = _client(shared_cluster)
        try:
            consumer = client.subscribe(topic, "after", schema=AvroSchema(V1))
            client.create_producer(topic, schema=AvroSchema(V1)).send(V1(item="oat", count=1))
            m = consumer.receive(10_000)
            return _version(m), m.value().count
        finally:
            client.close()

    assert await asyncio.to_thread(produce_again) == (1, 1)  # the same schema again: version 1


async def test_an_incompatible_schema_is_refused_and_the_topic_keeps_serving_its_producer(
    shared_cluster,  # type: ignore[no-untyped-def]
) -> None:
    """The namespace leaves the strategy UNDEFINED: the broker's default, FULL. A Record
    whose new field has no default, or whose field changes type, is refused with
    pulsar-client's IncompatibleSchema and not stored; the producer with version 0 goes
    on sending; a field added with a default is FULL-compatible: version 1."""
    ns = await _namespace(shared_cluster)
    topic = f"persistent://{ns}/orders"
    changed = type("Order", (Record,), {"_avro_namespace": "acme", "item": Integer()})

    def run() -> tuple[list[str], list[str]]:
        client = _client(shared_cluster)
        try:
            consumer = client.subscribe(topic, "s", schema=AvroSchema(V0))
            producer = client.create_producer(topic, schema=AvroSchema(V0))
            producer.send(V0(item="first"))
            refused = [_refusal(client, topic, schema=AvroSchema(NO_DEFAULT)),
                       _refusal(client, topic, schema=AvroSchema(changed)),
                       _refusal(client, topic, schema=AvroSchema(V1))]  # fmt: skip
            producer.send(V0(item="after"))
            got = []
            for _ in range(2):
                m = consumer.receive(10_000)
                got.append(m.value().item)
            return refused, got
        finally:
            client.close()

    refused, got = await asyncio.to_thread(run)
    assert refused == ["IncompatibleSchema", "IncompatibleSchema", "created"]  # V1 is FULL-compatible
    assert got == ["first", "after"]
    port = shared_cluster.broker.protocol_port
    assert json.loads((await _get_schema(port, topic, 1)).schema.schema_data) == V1.schema()
    assert (await _get_schema(port, topic, 2)).error_code == pb.TopicNotFound  # nothing refused was stored


async def test_auto_update_off_takes_only_uploaded_versions_and_validation_enforced_refuses_bytes(
    shared_cluster,  # type: ignore[no-untyped-def]
) -> None:
    """With isAllowAutoUpdateSchema false, as in Pulsar, producers get only versions an
    admin uploaded (PostTopicSchema), even the first; with schemaValidationEnforced a
    producer without a schema (bytes) is refused on a topic with one."""
    from magnetar.proto.v1 import broker_pb2 as bpb

    ns = await _namespace(shared_cluster, is_allow_auto_update_schema=False, schema_validation_enforced=True)
    topic, plain = f"persistent://{ns}/orders", f"persistent://{ns}/plain"

    def run(*declared: Any) -> list[str]:
        client = _client(shared_cluster)
        try:
            return [_refusal(client, topic, schema=s) if s is not None else _refusal(client, topic) for s in declared]
        finally:
            client.close()

    assert await asyncio.to_thread(run, AvroSchema(V0)) == ["IncompatibleSchema"]  # nothing uploaded yet
    async with AdminClient(shared_cluster.broker.address, 10) as admin:
        info = bpb.SchemaInfo(type=pb.Schema.Avro, data=json.dumps(V0.schema()).encode())
        request = bpb.TopicSchemaRequest(topic=topic, schema=info)
        uploaded = await admin.call(lambda s: s.PostTopicSchema(request, timeout=10))
    assert uploaded.version == 0
    got = await asyncio.to_thread(run, AvroSchema(V0), AvroSchema(V1), None)
    assert got == ["created", "IncompatibleSchema", "IncompatibleSchema"]  # V0 uploaded; V1 new; bytes refused

    def bytes_elsewhere() -> str:
        client = _client(shared_cluster)
        try:
            return _refusal(client, plain)
        finally:
            client.close()

    assert await asyncio.to_thread(bytes_elsewhere) == "created"  # a topic without a schema takes bytes


async def test_get_or_create_schema_registers_refuses_and_rejects_a_definition_that_does_not_parse(
    shared_cluster,  # type: ignore[no-untyped-def]
) -> None:
    """GET_OR_CREATE_SCHEMA goes to the registry as a producer's schema: a new topic's
    first schema is version 0, the same definition written otherwise is still 0, a
    compatible one 1, a definition that is not Avro is refused with IncompatibleSchema
    saying so, and nothing refused is stored."""
    ns = await _namespace(shared_cluster)
    topic = f"persistent://{ns}/created"
    port = shared_cluster.broker.protocol_port

    async def get_or_create(data: bytes) -> pb.CommandGetOrCreateSchemaResponse:
        async with await RawPulsarConnection.open("127.0.0.1", port) as conn:
            await conn.handshake()
            schema = pb.Schema(name=topic, schema_data=data, type=pb.Schema.Avro)
            request = pb.CommandGetOrCreateSchema(request_id=3, topic=topic, schema=schema)
            await conn.send(pb.BaseCommand(type=pb.BaseCommand.GET_OR_CREATE_SCHEMA, getOrCreateSchema=request))
            return (await conn.receive()).command.getOrCreateSchemaResponse

    answers = [
        await get_or_create(json.dumps(V0.schema()).encode()),
        await get_or_create(json.dumps(V0.schema(), indent=4).encode()),
        await get_or_create(json.dumps(V1.schema()).encode()),
        await get_or_create(b'{"type": "record", "name": "Order"'),
    ]
    assert [a.schema_version for a in answers[:3]] == [i.to_bytes(8, "big") for i in (0, 0, 1)]
    assert answers[3].error_code == pb.IncompatibleSchema and "does not parse" in answers[3].error_message
    assert (await _get_schema(port, topic, 2)).error_code == pb.TopicNotFound
