"""The SDK's schema plumbing without a broker: what producers and consumers declare, the
writer schema versions a client fetches (once per topic and version, a partitioned
topic's partitions sharing them), and decoding a message with the version it was written
with (a fake GetSchema holds two versions: the registry's evolution is not needed)."""

from __future__ import annotations

import asyncio
import struct
import subprocess
import sys

import pytest

import magnetar.schema as ms
from magnetar.client.message import unpack_entry
from magnetar.client.schemas import MessageDecoder, WriterSchemas, declared, version_number
from magnetar.common.errors import InvalidMessage, NotConnected, TopicNotFound
from magnetar.proto.v1 import broker_pb2 as pb

TOPIC = "persistent://t/ns/readings"


class V1(ms.Record):
    sensor = ms.String(required=True)


class V2(ms.Record):
    sensor = ms.String(required=True)
    unit = ms.String(default="C", required_default=True)


class FakeRegistry:
    """GetSchema over versions 0 (V1) and 1 (V2) of TOPIC; counts the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.versions = {0: ms.AvroSchema(V1).schema_info(), 1: ms.AvroSchema(V2).schema_info()}
        self.fail_with: Exception | None = None

    async def fetch(self, topic: str, version: int) -> pb.GetSchemaResponse | None:
        self.calls.append((topic, version))
        await asyncio.sleep(0)
        if self.fail_with is not None:
            raise self.fail_with
        info = self.versions.get(version) if topic == TOPIC else None
        if info is None:
            return None
        return pb.GetSchemaResponse(
            schema=pb.SchemaInfo(type=int(info.schema_type()), data=info.data, name=topic), version=version,
        )


def _delivery(payloads: list[bytes], version: int | None, entry_id: int = 1) -> pb.Delivery:
    batch = pb.EntryBatch(producer_name="p", batched=True, messages=[pb.SingleMessage(payload=p) for p in payloads])
    if version is not None:
        batch.schema_version = struct.pack(">q", version)
    return pb.Delivery(message_id=pb.MessageIdData(ledger_id=7, entry_id=entry_id), entry=batch.SerializeToString())


def test_bytes_declares_nothing_and_the_others_what_pulsar_client_declares() -> None:
    assert declared(ms.BytesSchema()) is None
    info = declared(ms.AvroSchema(V1))
    assert (info.type, info.data, info.name) == (4, ms.AvroSchema(V1).schema_info().data, "AVRO")
    kv = declared(ms.KeyValueSchema(ms.StringSchema(), ms.StringSchema()))
    assert kv.type == 15 and kv.properties["kv.encoding.type"] == "INLINE"
    assert version_number(struct.pack(">q", 3)) == 3 and version_number(b"") is None


async def test_each_version_is_fetched_once_and_partitions_share_it() -> None:
    registry = FakeRegistry()
    writers = WriterSchemas(registry.fetch)
    p0 = MessageDecoder(ms.AvroSchema(V2), f"{TOPIC}-partition-0", writers)
    p1 = MessageDecoder(ms.AvroSchema(V2), f"{TOPIC}-partition-1", writers)
    old = ms.AvroSchema(V1).encode(V1(sensor="old"))
    new = ms.AvroSchema(V2).encode(V2(sensor="new", unit="K"))
    deliveries = [_delivery([old], 0, 1), _delivery([new], 1, 2), _delivery([old, old], 0, 3)]
    await asyncio.gather(p0.prepare(deliveries), p1.prepare(deliveries))
    assert sorted(registry.calls) == [(TOPIC, 0), (TOPIC, 1)]  # once each, for both partitions

    values = []
    for d in deliveries:
        messages, _ = unpack_entry(f"{TOPIC}-partition-1", 1, d, p1)
        values += [(m.value().sensor, m.value().unit) for m in messages]
    # Written with V1 (no unit): read with V2, the default fills it, as Avro resolves.
    assert values == [("old", "C"), ("new", "K"), ("old", "C"), ("old", "C")]


async def test_a_payload_that_does_not_decode_is_an_invalid_message_and_the_rest_decode() -> None:
    writers = WriterSchemas(FakeRegistry().fetch)
    decoder = MessageDecoder(ms.AvroSchema(V1), TOPIC, writers)
    good = ms.AvroSchema(V1).encode(V1(sensor="fine"))
    d = _delivery([b"\xff\xff\xff", good], 0)
    await decoder.prepare([d])
    bad, fine = unpack_entry(TOPIC, -1, d, decoder)[0]
    with pytest.raises(InvalidMessage, match="does not decode with AvroSchema"):
        bad.value()
    assert bad.data() == b"\xff\xff\xff" and fine.value().sensor == "fine"
    strings = MessageDecoder(ms.StringSchema(), TOPIC, writers)
    (latin,), _ = unpack_entry(TOPIC, -1, _delivery([b"\xe9"], None), strings)
    with pytest.raises(InvalidMessage, match="no schema version"):
        latin.value()
    assert MessageDecoder.of(ms.BytesSchema(), TOPIC, writers) is None  # bytes: value() is data()
    (raw,), _ = unpack_entry(TOPIC, -1, _delivery([b"\xe9"], None), None)
    assert raw.value() == b"\xe9"


async def test_a_version_the_broker_refuses_is_kept_as_the_error_a_lost_broker_is_not() -> None:
    registry = FakeRegistry()
    writers = WriterSchemas(registry.fetch)
    decoder = MessageDecoder(ms.AvroSchema(V1), TOPIC, writers)
    written = ms.AvroSchema(V1).encode(V1(sensor="x"))

    registry.fail_with = NotConnected("no broker")  # retriable: tried again with the next entry
    await decoder.prepare([_delivery([written], 0)])
    assert writers.get(TOPIC, 0) is None
    registry.fail_with = None
    await decoder.prepare([_delivery([written], 0)])
    assert isinstance(writers.get(TOPIC, 0), ms.SchemaInfo)

    await decoder.prepare([_delivery([written], 5)])  # the broker has no version 5
    (msg,), _ = unpack_entry(TOPIC, -1, _delivery([written], 5), decoder)
    with pytest.raises(InvalidMessage, match="schema version 5 is not available"):
        msg.value()
    registry.fail_with = TopicNotFound("gone")
    await decoder.prepare([_delivery([written], 6)])
    assert isinstance(writers.get(TOPIC, 6), TopicNotFound)
    assert registry.calls.count((TOPIC, 5)) == 1


def test_a_value_the_producers_schema_cannot_encode_raises_before_anything_is_queued() -> None:
    from magnetar.client.producer import encode_value
    from magnetar.common.errors import InvalidArgument

    with pytest.raises(TypeError, match="expected type"):
        encode_value(ms.StringSchema(), b"bytes")
    with pytest.raises(TypeError, match="must be string"):  # fastavro's: a required field missing
        encode_value(ms.AvroSchema(None, V1.schema()), {"sensor": None})
    with pytest.raises(ValueError, match="dict"):
        encode_value(ms.AvroSchema(None, V1.schema()), ["not", "a", "dict"])

    class Broken(ms.Schema):
        def __init__(self) -> None:
            super().__init__(int, ms.SchemaType.INT32, None, "INT32")

        def encode(self, obj: int) -> bytes:
            raise OverflowError("too big")

        def decode(self, data: bytes) -> int:
            return 0

    with pytest.raises(InvalidArgument, match="cannot encode int 7: too big"):
        encode_value(Broken(), 7)


def test_import_magnetar_reaches_its_schemas_as_import_pulsar_does() -> None:
    code = "import magnetar, sys; assert 'magnetar.schema' not in sys.modules; print(magnetar.schema.AvroSchema.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "magnetar.schema.avro"
