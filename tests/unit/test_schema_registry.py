"""The schema registry's decisions (broker/schema/registry.py) over an in-memory twin of
the ZooKeeper store: versions, identical schemas, compatibility refusals,
isAllowAutoUpdateSchema, schemaValidationEnforced, consumers, deletes, admin uploads and
tests, and two registrations racing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from magnetar.broker.schema.compatibility import SchemaCompatibilityStrategy, SchemaType
from magnetar.broker.schema.registry import SchemaRegistry, SchemaRules
from magnetar.common.errors import IncompatibleSchema, InvalidSchema, SchemaNotFound
from magnetar.metadata.schemas import SchemaHistory, SchemaInfo, history_document, read_history

T = TypeVar("T")
S = SchemaCompatibilityStrategy
TOPIC = "persistent://acme/orders/events"


class MemorySchemaStore:
    """The ZkSchemaStore's twin: a document per topic, compare-and-set updates (an
    update that finds the document changed since it read it decides again)."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.before_write: Callable[[], Any] | None = None

    async def history(self, topic: str) -> SchemaHistory:
        doc = self.docs.get(topic)
        return () if doc is None else read_history(doc, topic)

    async def update(self, topic: str, fn: Callable[[SchemaHistory], tuple[SchemaHistory, T]]) -> T:
        while True:
            seen = self.docs.get(topic)
            current = () if seen is None else read_history(seen, topic)
            updated, out = fn(current)
            if updated == current:
                return out
            if self.before_write is not None:
                hook, self.before_write = self.before_write, None
                await hook()
            if self.docs.get(topic) is not seen:
                continue  # lost the race: decide again on what the other wrote
            self.docs[topic] = history_document(updated)
            self.writes += 1
            return out

    async def delete(self, topic: str) -> None:
        self.docs.pop(topic, None)


def avro(*fields: tuple[str, Any] | tuple[str, Any, Any]) -> SchemaInfo:
    doc = {"type": "record", "name": "Order", "fields": [
        {"name": f[0], "type": f[1], **({"default": f[2]} if len(f) > 2 else {})} for f in fields
    ]}  # fmt: skip
    return SchemaInfo(int(SchemaType.AVRO), json.dumps(doc).encode(), {"__alwaysAllowNull": "true"})


V0 = avro(("id", "string"))
V1 = avro(("id", "string"), ("qty", "int", 0))
NO_DEFAULT = avro(("id", "string"), ("qty", "int"))


@pytest.fixture
def store() -> MemorySchemaStore:
    return MemorySchemaStore()


@pytest.fixture
def registry(store: MemorySchemaStore) -> SchemaRegistry:
    return SchemaRegistry(store, clock=lambda: 1700000000.5)


async def test_versions_count_from_zero_and_an_identical_schema_gets_its_version_back(
    registry: SchemaRegistry, store: MemorySchemaStore,
) -> None:
    rules = SchemaRules(S.BACKWARD)
    first = await registry.put(TOPIC, V0, rules)
    assert (first.version, first.timestamp_ms, first.schema) == (0, 1700000000500, V0)
    assert (await registry.put(TOPIC, V1, rules)).version == 1
    again = avro(("id", "string"))  # the same definition, other properties object
    assert (await registry.put(TOPIC, again, rules)).version == 0
    assert store.writes == 2
    assert (await registry.get(TOPIC)).schema == V1
    assert (await registry.get(TOPIC, 0)).schema == V0
    assert [s.version for s in await registry.versions(TOPIC)] == [0, 1]
    assert await registry.version_of(TOPIC, V1) == 1
    with pytest.raises(SchemaNotFound):
        await registry.get(TOPIC, 7)


async def test_an_incompatible_schema_is_refused_with_the_strategy_version_and_field(
    registry: SchemaRegistry, store: MemorySchemaStore,
) -> None:
    await registry.put(TOPIC, V0, SchemaRules(S.FULL))
    with pytest.raises(IncompatibleSchema) as refused:
        await registry.put(TOPIC, NO_DEFAULT, SchemaRules(S.FULL))
    message = refused.value.message
    assert "version 0" in message and "FULL" in message and "qty" in message
    assert [s.version for s in await registry.versions(TOPIC)] == [0] and store.writes == 1
    with pytest.raises(InvalidSchema):
        await registry.put(TOPIC, SchemaInfo(int(SchemaType.AVRO), b"{oops"), SchemaRules(S.ALWAYS_COMPATIBLE))
    assert store.writes == 1


async def test_auto_update_off_refuses_new_versions_to_producers_but_not_to_an_admin_upload(registry: SchemaRegistry) -> None:
    await registry.put(TOPIC, V0, SchemaRules(S.BACKWARD))
    closed = SchemaRules(S.BACKWARD, allow_auto_update=False)
    assert (await registry.put(TOPIC, V0, closed)).version == 0  # an existing version is fine
    with pytest.raises(IncompatibleSchema, match="isAllowAutoUpdateSchema is false"):
        await registry.put(TOPIC, V1, closed)
    assert (await registry.put(TOPIC, V1, closed, admin=True)).version == 1
    with pytest.raises(IncompatibleSchema):  # the admin upload still honours the strategy
        await registry.put(TOPIC, avro(("id", "long")), closed, admin=True)


async def test_validation_enforced_refuses_producers_without_a_schema_only_where_there_is_one(registry: SchemaRegistry) -> None:
    enforced = SchemaRules(validation_enforced=True)
    await registry.require_schema_for(TOPIC, enforced)  # no schema yet: fine
    await registry.put(TOPIC, V0, enforced)
    await registry.require_schema_for(TOPIC, SchemaRules())  # not enforced: fine
    with pytest.raises(IncompatibleSchema, match="schemaValidationEnforced"):
        await registry.require_schema_for(TOPIC, enforced)


async def test_a_delete_is_a_version_then_not_found_and_the_next_schema_starts_unchecked(
    registry: SchemaRegistry,
) -> None:
    assert await registry.delete(TOPIC) is None  # nothing to delete
    rules = SchemaRules(S.ALWAYS_INCOMPATIBLE)
    await registry.put(TOPIC, V0, rules)
    await registry.put(TOPIC, V0, rules)
    assert await registry.delete(TOPIC) == 1
    assert await registry.delete(TOPIC) is None
    with pytest.raises(SchemaNotFound, match="deleted"):
        await registry.get(TOPIC)
    with pytest.raises(SchemaNotFound):
        await registry.get(TOPIC, 1)  # the delete itself is no schema
    assert (await registry.get(TOPIC, 0)).schema == V0  # versions before it stay readable
    assert await registry.versions(TOPIC) == ()
    again = await registry.put(TOPIC, avro(("other", "long")), rules)  # unchecked, even under ALWAYS_INCOMPATIBLE
    assert again.version == 2
    with pytest.raises(IncompatibleSchema):
        await registry.put(TOPIC, V0, rules)  # V0 is not live any more: a change


async def test_consumers_register_on_idle_topics_and_are_checked_otherwise(registry: SchemaRegistry) -> None:
    rules = SchemaRules(S.FULL)
    with pytest.raises(IncompatibleSchema, match="no schema to check"):
        await registry.consume(TOPIC, V0, rules, idle=False)
    registered = await registry.consume(TOPIC, V0, rules, idle=True)
    assert registered is not None and registered.version == 0
    assert await registry.consume(TOPIC, V1, rules, idle=False) is None  # V1 reads V0's data: not registered
    assert [s.version for s in await registry.versions(TOPIC)] == [0]
    with pytest.raises(IncompatibleSchema, match="qty"):
        await registry.consume(TOPIC, NO_DEFAULT, rules, idle=False)  # cannot read V0's data
    # FORWARD still checks consumers as readers (BACKWARD, Pulsar's rule).
    with pytest.raises(IncompatibleSchema):
        await registry.consume(TOPIC, NO_DEFAULT, SchemaRules(S.FORWARD), idle=False)
    assert await registry.consume(TOPIC, NO_DEFAULT, SchemaRules(S.ALWAYS_COMPATIBLE), idle=False) is None


async def test_the_compatibility_test_answers_without_storing(registry: SchemaRegistry, store: MemorySchemaStore) -> None:
    answer = await registry.test(TOPIC, NO_DEFAULT, S.FULL)
    assert answer.compatible and answer.strategy is S.FULL  # no schema yet: anything goes
    await registry.put(TOPIC, V0, SchemaRules(S.FULL))
    writes = store.writes
    answer = await registry.test(TOPIC, NO_DEFAULT, S.FULL)
    assert not answer.compatible and "qty" in answer.reason
    assert (await registry.test(TOPIC, V1, S.FULL)).compatible
    assert store.writes == writes


async def test_two_registrations_racing_both_keep_their_version(registry: SchemaRegistry, store: MemorySchemaStore) -> None:
    """The first writer's update finds the document changed under it (the second wrote
    meanwhile) and decides again: both versions are kept, numbered 0 and 1."""
    rules = SchemaRules(S.BACKWARD)
    other = asyncio.Event()

    async def meanwhile() -> None:
        await registry.put(TOPIC, V0, rules)
        other.set()

    store.before_write = meanwhile
    late = await registry.put(TOPIC, V1, rules)
    assert other.is_set()
    assert late.version == 1
    assert [(s.version, s.schema) for s in await registry.versions(TOPIC)] == [(0, V0), (1, V1)]


def test_the_single_schema_document_of_older_brokers_reads_as_version_0() -> None:
    history = read_history({"type": 4, "data": "e30=", "properties": {"a": "b"}, "version": 0}, "/x")
    assert len(history) == 1 and history[0].version == 0 and history[0].schema.data == b"{}"
    assert not history[0].deleted


async def test_a_producer_sending_an_uploaded_avro_definition_written_otherwise_gets_its_version(
    registry: SchemaRegistry,
) -> None:
    uploaded = await registry.put(TOPIC, V0, SchemaRules(allow_auto_update=False), admin=True)
    spaced = SchemaInfo(V0.type, json.dumps(json.loads(V0.data), indent=True).encode())
    assert (await registry.put(TOPIC, spaced, SchemaRules(allow_auto_update=False))).version == uploaded.version == 0


def test_the_schema_admin_rpcs_ask_lookup_to_read_and_a_tenant_admin_to_change() -> None:
    from magnetar.broker.authorization import Action
    from magnetar.broker.rpc.authorization import SERVICE, request_of
    from magnetar.proto.v1 import broker_pb2 as pb

    reads = {"GetTopicSchema": pb.GetTopicSchemaRequest(topic=TOPIC), "GetAllTopicSchemas": pb.GetAllTopicSchemasRequest(topic=TOPIC),
             "GetSchemaVersion": pb.TopicSchemaRequest(topic=TOPIC), "TestSchemaCompatibility": pb.TopicSchemaRequest(topic=TOPIC)}
    writes = {"PostTopicSchema": pb.TopicSchemaRequest(topic=TOPIC), "DeleteTopicSchema": pb.DeleteTopicSchemaRequest(topic=TOPIC)}
    for method, message in reads.items():
        asked = request_of(SERVICE + method, message)
        assert (asked.action, asked.topic) == (Action.LOOKUP, TOPIC), method
    for method, message in writes.items():
        assert request_of(SERVICE + method, message).action is Action.ADMIN_TOPIC, method
