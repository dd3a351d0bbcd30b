"""The gateway's schema admin routes (Pulsar's ``/admin/v2/schemas``) and the namespace
schema policies against a real broker: Pulsar's JSON and codes for each, the errors
changing nothing; and a schema uploaded here is the version a pulsar-client producer
with the same definition gets."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pulsar
import pytest
import pytest_asyncio
from gateway_support import GatewayCluster, unique
from pulsar.schema import AvroSchema, Integer, Record, String

import magnetar.asyncio as mg
from magnetar import schema as ms
from magnetar.testing.pulsarclient import pulsar_client

pytestmark = pytest.mark.integration
TENANT_INFO = {"adminRoles": [], "allowedClusters": ["standalone"]}


def _order(**fields: Any) -> type[Record]:
    return type("Order", (Record,), {"_avro_namespace": "acme", "item": String(), **fields})


V0 = _order()
V1 = _order(count=Integer(default=7, required_default=True))  # FULL-compatible: a field added with a default
NO_DEFAULT = _order(count=Integer(required=True))  # not FULL-compatible: V0's data has no count


def _payload(record: type[Record], **extra: Any) -> dict[str, Any]:
    """pulsar-admin's schema file for ``record``: the definition pulsar-client declares."""
    return {"type": "AVRO", "schema": json.dumps(record.schema()), "properties": {}, **extra}


def reason(r: httpx.Response) -> str:
    body = r.json()
    assert set(body) == {"reason"}, body
    return str(body["reason"])


@pytest_asyncio.fixture
async def namespace(http: httpx.AsyncClient) -> AsyncIterator[str]:
    tenant = unique("schema-tenant")
    assert (await http.put(f"/admin/v2/tenants/{tenant}", json=TENANT_INFO)).status_code == 204
    ns = f"{tenant}/{unique('ns')}"
    assert (await http.put(f"/admin/v2/namespaces/{ns}")).status_code == 204
    yield ns


async def test_upload_get_versions_compatibility_and_delete_with_pulsars_json(http: httpx.AsyncClient, namespace: str) -> None:
    base = f"/admin/v2/schemas/{namespace}/orders"
    r = await http.get(f"{base}/schema")
    assert r.status_code == 404, r.text
    assert (await http.get(f"{base}/schemas")).json() == {"getSchemaResponses": []}

    r = await http.post(f"{base}/schema", json=_payload(V0, properties={"owner": "shop"}))
    assert (r.status_code, r.json()) == (200, {"version": {"version": 0}}), r.text
    r = await http.post(f"{base}/schema", json=_payload(V1))
    assert (r.status_code, r.json()) == (200, {"version": {"version": 1}}), r.text
    again = await http.post(f"{base}/schema", json=_payload(V0))  # identical to a live version: that version
    assert again.json() == {"version": {"version": 0}}

    latest = (await http.get(f"{base}/schema")).json()
    assert set(latest) == {"version", "type", "timestamp", "data", "properties"}
    assert (latest["version"], latest["type"], json.loads(latest["data"])) == (1, "AVRO", V1.schema())
    first = (await http.get(f"{base}/schema/0")).json()
    assert (first["version"], json.loads(first["data"]), first["properties"]) == (0, V0.schema(), {"owner": "shop"})
    assert 0 < first["timestamp"] <= latest["timestamp"]
    listed = (await http.get(f"{base}/schemas")).json()["getSchemaResponses"]
    assert [s["version"] for s in listed] == [0, 1] and listed[0] == first and listed[1] == latest
    assert (await http.get(f"{base}/schema/5")).status_code == 404

    r = await http.post(f"{base}/version", json=_payload(V1))
    assert (r.status_code, r.json()) == (200, {"version": 1})
    r = await http.post(f"{base}/version", json=_payload(NO_DEFAULT))
    assert r.status_code == 404, r.text

    r = await http.post(f"{base}/compatibility", json=_payload(V1))
    assert (r.status_code, r.json()) == (202, {"compatibility": True, "schemaCompatibilityStrategy": "FULL"})
    r = await http.post(f"{base}/compatibility", json=_payload(NO_DEFAULT))
    assert (r.status_code, r.json()) == (202, {"compatibility": False, "schemaCompatibilityStrategy": "FULL"})

    r = await http.delete(f"{base}/schema")
    assert (r.status_code, r.json()) == (200, {"version": 2}), r.text
    assert (await http.get(f"{base}/schema")).status_code == 404
    assert (await http.get(f"{base}/schemas")).json() == {"getSchemaResponses": []}
    assert json.loads((await http.get(f"{base}/schema/0")).json()["data"]) == V0.schema()  # still readable by number
    assert (await http.delete(f"{base}/schema", params={"force": "true"})).json() == {"version": -1}  # nothing to delete
    # After a delete the next schema registers unchecked, with the next number.
    r = await http.post(f"{base}/schema", json=_payload(NO_DEFAULT))
    assert r.json() == {"version": {"version": 3}}


async def test_refused_uploads_answer_pulsars_codes_and_store_nothing(http: httpx.AsyncClient, namespace: str) -> None:
    base = f"/admin/v2/schemas/{namespace}/refusals"
    assert (await http.post(f"{base}/schema", json=_payload(V0))).status_code == 200

    r = await http.post(f"{base}/schema", json=_payload(NO_DEFAULT))
    assert r.status_code == 409, r.text
    assert "incompatible" in reason(r) and "FULL" in reason(r) and "count" in reason(r)
    r = await http.post(f"{base}/schema", json={"type": "AVRO", "schema": "{not avro"})
    assert r.status_code == 422, r.text
    r = await http.post(f"{base}/schema", json={"type": "NO_SUCH_TYPE", "schema": ""})
    assert r.status_code == 400 and "NO_SUCH_TYPE" in reason(r)
    r = await http.post(f"{base}/schema", json={"type": "BYTES", "schema": ""})
    assert r.status_code == 400, r.text
    r = await http.post(f"{base}/schema", json={"schema": "{}"})
    assert r.status_code == 400 and "type" in reason(r)
    r = await http.post(f"{base}/compatibility", json={"type": "AVRO", "schema": "[1, 2"})
    assert r.status_code == 422, r.text
    r = await http.get(f"{base}/schema/not-a-number")
    assert r.status_code == 400, r.text
    r = await http.get("/admin/v2/schemas/bad!tenant/ns/t/schema")
    assert r.status_code == 412, r.text

    listed = (await http.get(f"{base}/schemas")).json()["getSchemaResponses"]
    assert [(s["version"], json.loads(s["data"])) for s in listed] == [(0, V0.schema())]


async def test_key_value_schema_round_trips_as_pulsars_key_and_value_json(http: httpx.AsyncClient, namespace: str) -> None:
    base = f"/admin/v2/schemas/{namespace}/kv"
    definition = {"key": "", "value": V0.schema()}
    props = {"key.schema.type": "STRING", "value.schema.type": "AVRO", "kv.encoding.type": "SEPARATED"}
    r = await http.post(f"{base}/schema", json={"type": "KEY_VALUE", "schema": json.dumps(definition), "properties": props})
    assert r.json() == {"version": {"version": 0}}, r.text
    got = (await http.get(f"{base}/schema")).json()
    assert (got["type"], json.loads(got["data"]), got["properties"]) == ("KEY_VALUE", definition, props)
    r = await http.post(f"{base}/schema", json={"type": "KEY_VALUE", "schema": "{}", "properties": props})
    assert r.status_code == 422, r.text


async def test_namespace_schema_policies(http: httpx.AsyncClient, namespace: str) -> None:
    base = f"/admin/v2/namespaces/{namespace}"
    assert (await http.get(f"{base}/schemaCompatibilityStrategy")).json() == "UNDEFINED"
    assert (await http.get(f"{base}/isAllowAutoUpdateSchema")).json() is True
    assert (await http.get(f"{base}/schemaValidationEnforced")).json() is False

    assert (await http.put(f"{base}/schemaCompatibilityStrategy", json="BACKWARD_TRANSITIVE")).status_code == 204
    assert (await http.post(f"{base}/isAllowAutoUpdateSchema", json=False)).status_code == 204
    assert (await http.post(f"{base}/schemaValidationEnforced", json=True)).status_code == 204
    assert (await http.get(f"{base}/schemaCompatibilityStrategy")).json() == "BACKWARD_TRANSITIVE"
    assert (await http.get(f"{base}/isAllowAutoUpdateSchema")).json() is False
    assert (await http.get(f"{base}/schemaValidationEnforced", params={"applied": "true"})).json() is True

    # The registry applies the namespace's strategy to an upload and names it.
    topic = f"/admin/v2/schemas/{namespace}/policy"
    assert (await http.post(f"{topic}/schema", json=_payload(V0))).status_code == 200
    r = await http.post(f"{topic}/compatibility", json=_payload(V1))
    assert r.json() == {"compatibility": True, "schemaCompatibilityStrategy": "BACKWARD_TRANSITIVE"}

    for path, method, body in (("schemaCompatibilityStrategy", "PUT", "SIDEWAYS"),
                               ("isAllowAutoUpdateSchema", "POST", "yes"),
                               ("schemaValidationEnforced", "POST", 1)):
        r = await http.request(method, f"{base}/{path}", json=body)
        assert r.status_code == 400, (path, r.text)
    assert (await http.get(f"{base}/schemaCompatibilityStrategy")).json() == "BACKWARD_TRANSITIVE"
    assert (await http.get(f"{base}/isAllowAutoUpdateSchema")).json() is False
    missing = f"{namespace.split('/')[0]}/{unique('absent')}"
    assert (await http.get(f"/admin/v2/namespaces/{missing}/isAllowAutoUpdateSchema")).status_code == 404
    assert (await http.post(f"/admin/v2/namespaces/{missing}/schemaValidationEnforced", json=True)).status_code == 404


async def test_an_uploaded_schema_is_the_version_a_pulsar_client_producer_gets(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster,
) -> None:
    """With auto-update off a producer may use only uploaded versions: a pulsar-client
    producer declaring V1's Record writes with version 1, the one the admin API gave."""
    assert (await http.post(f"/admin/v2/namespaces/{namespace}/isAllowAutoUpdateSchema", json=False)).status_code == 204
    base = f"/admin/v2/schemas/{namespace}/uploaded"
    for version, record in enumerate((V0, V1)):
        assert (await http.post(f"{base}/schema", json=_payload(record))).json() == {"version": {"version": version}}
    topic = f"persistent://{namespace}/uploaded"

    def produce_and_read() -> tuple[int, str, int, str]:
        client = pulsar_client(gateway_cluster.broker.pulsar_url, operation_timeout_seconds=15, connection_timeout_ms=5000)
        try:
            consumer = client.subscribe(topic, "s", schema=AvroSchema(V1))
            client.create_producer(topic, schema=AvroSchema(V1)).send(V1(item="tea", count=3))
            message = consumer.receive(timeout_millis=10_000)
            value = message.value()
            try:  # a schema nobody uploaded is refused while auto-update is off
                client.create_producer(topic, schema=AvroSchema(_order(note=String(default="x")))).close()
                refusal = "created"
            except pulsar.PulsarException as exc:
                refusal = type(exc).__name__
            return int.from_bytes(message.schema_version().encode("latin-1"), "big"), value.item, value.count, refusal
        finally:
            client.close()

    version, item, count, refusal = await asyncio.to_thread(produce_and_read)
    assert (version, item, count, refusal) == (1, "tea", 3, "IncompatibleSchema")
    assert [s["version"] for s in (await http.get(f"{base}/schemas")).json()["getSchemaResponses"]] == [0, 1]


def _value_schema(kind: str, definition: str = "") -> str:
    """Pulsar's REST producer valueSchema: a JSON SchemaInfo, its definition base64."""
    return json.dumps({"name": "", "schema": base64.b64encode(definition.encode()).decode(), "type": kind, "properties": {}})


def _read(cluster: GatewayCluster, topic: str, schema: Any, count: int) -> list[tuple[Any, int]]:
    """``count`` values from the start of ``topic`` through pulsar-client, each with its schema version."""
    client = pulsar_client(cluster.broker.pulsar_url, operation_timeout_seconds=15, connection_timeout_ms=5000)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest, schema=schema)
        out = []
        for _ in range(count):
            message = reader.read_next(timeout_millis=10_000)
            out.append((message.value(), int.from_bytes(message.schema_version().encode("latin-1"), "big")))
        return out
    finally:
        client.close()


async def test_the_rest_producer_encodes_payloads_with_a_value_schema_or_a_registered_version(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster,
) -> None:
    local = unique("rest-avro")
    path, topic = f"/topics/persistent/{namespace}/{local}", f"persistent://{namespace}/{local}"
    body = {"valueSchema": _value_schema("AVRO", json.dumps(V0.schema())), "producerName": unique("rest"),
            "messages": [{"payload": json.dumps({"item": {"string": "tea"}})}, {"payload": json.dumps({"item": None})}]}
    r = await http.post(path, json=body)
    assert r.status_code == 200, r.text
    acks = r.json()
    assert acks["schemaVersion"] == 0 and [a["errorCode"] for a in acks["messagePublishResults"]] == [0, 0]
    # Version 1 uploaded by an admin; the REST producer writes with it by number.
    assert (await http.post(f"/admin/v2/schemas/{namespace}/{local}/schema", json=_payload(V1))).status_code == 200
    by_version = {"schemaVersion": 1, "messages": [{"payload": json.dumps({"item": {"string": "jam"}, "count": {"int": 2}})}]}
    r = await http.post(path, json=by_version)
    assert r.status_code == 200 and r.json()["schemaVersion"] == 1, r.text

    read = await asyncio.to_thread(_read, gateway_cluster, topic, AvroSchema(V1), 3)
    assert [(v.item, v.count, version) for v, version in read] == [("tea", 7, 0), (None, 7, 0), ("jam", 2, 1)]

    text_local = unique("rest-string")
    r = await http.post(f"/topics/persistent/{namespace}/{text_local}",
                        json={"valueSchema": _value_schema("STRING"), "messages": [{"payload": "héllo"}]})
    assert r.status_code == 200 and r.json()["messagePublishResults"][0]["errorCode"] == 0, r.text
    read = await asyncio.to_thread(_read, gateway_cluster, f"persistent://{namespace}/{text_local}",
                                   pulsar.schema.StringSchema(), 1)
    assert read == [("héllo", 0)]


async def test_the_rest_producer_refuses_bad_schemas_and_payloads_storing_nothing(
    http: httpx.AsyncClient, namespace: str,
) -> None:
    local = unique("rest-refused")
    path = f"/topics/persistent/{namespace}/{local}"
    assert (await http.post(f"/admin/v2/schemas/{namespace}/{local}/schema", json=_payload(V1))).status_code == 200
    avro = _value_schema("AVRO", json.dumps(V1.schema()))
    good = json.dumps({"item": {"string": "a"}, "count": {"int": 1}})
    cases = [
        ({"valueSchema": avro, "messages": [{"payload": good}, {"payload": json.dumps({"item": "not a union"})}]},
         400, "messages[1].payload"),
        ({"valueSchema": avro, "messages": [{"payload": "{"}]}, 400, "messages[0].payload"),
        ({"valueSchema": _value_schema("AVRO", json.dumps(NO_DEFAULT.schema())),
          "messages": [{"payload": json.dumps({"item": {"string": "a"}, "count": 1})}]}, 409, "incompatible"),
        ({"valueSchema": _value_schema("AVRO", "{not avro"), "messages": [{"payload": good}]}, 422, ""),
        ({"valueSchema": "not json", "messages": [{"payload": good}]}, 400, "valueSchema"),
        ({"valueSchema": _value_schema("PROTOBUF_NATIVE", "{}"), "messages": [{"payload": good}]}, 400, "PROTOBUF_NATIVE"),
        ({"keySchema": _value_schema("STRING"), "valueSchema": avro, "messages": [{"payload": good}]}, 400, "keySchema"),
        ({"schemaVersion": 9, "messages": [{"payload": good}]}, 404, ""),
        ({"valueSchema": _value_schema("INT32"), "messages": [{"payload": "12"}, {"payload": "twelve"}]}, 400, "INT32"),
    ]
    for body, status, words in cases:
        r = await http.post(path, json=body)
        assert r.status_code == status and words in reason(r), (body, r.status_code, r.text)
    stats = (await http.get(f"/admin/v2/persistent/{namespace}/{local}/stats")).json()
    assert stats["msgInCounter"] == 0
    listed = (await http.get(f"/admin/v2/schemas/{namespace}/{local}/schemas")).json()["getSchemaResponses"]
    assert [s["version"] for s in listed] == [0]


async def test_an_uploaded_schema_is_the_version_an_sdk_producer_with_the_same_record_gets(
    http: httpx.AsyncClient, namespace: str, gateway_cluster: GatewayCluster,
) -> None:
    """Our SDK's Record declares pulsar-client's definition: with auto-update off, an SDK
    producer of V1's fields writes with the version the admin API gave V1."""
    sdk_v1 = type("Order", (ms.Record,), {"_avro_namespace": "acme", "item": ms.String(),
                                          "count": ms.Integer(default=7, required_default=True)})
    assert sdk_v1.schema() == V1.schema()
    assert (await http.post(f"/admin/v2/namespaces/{namespace}/isAllowAutoUpdateSchema", json=False)).status_code == 204
    local = unique("sdk")
    for version, record in enumerate((V0, V1)):
        r = await http.post(f"/admin/v2/schemas/{namespace}/{local}/schema", json=_payload(record))
        assert r.json() == {"version": {"version": version}}
    topic = f"persistent://{namespace}/{local}"
    async with mg.Client(gateway_cluster.service_url) as client:
        producer = await client.create_producer(topic, schema=ms.AvroSchema(sdk_v1))
        sent = await producer.send(sdk_v1(item="oat", count=4))
        reader = await client.create_reader(topic, sent, schema=ms.AvroSchema(sdk_v1), start_message_id_inclusive=True)
        message = await reader.read_next()
    assert (message.value().item, message.value().count) == ("oat", 4)
    assert int.from_bytes(message.schema_version(), "big") == 1
