"""Schemas in the SDK: what a producer or consumer declares (``OpenProducer.schema``,
``Subscribe.schema``), and decoding a received message with the schema version it was
written with.

A consumer's schema decodes every message's payload in :meth:`Message.value`. When its
decoding depends on the writer's definition (Avro: schema resolution), each schema
version its messages name is fetched once (GetSchema) and kept per client by topic
(a partitioned topic's partitions share their topic's schema) and version, before the
messages of that entry are queued: ``value()`` itself never waits on the network, so
it works the same in the blocking and the asyncio client.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from magnetar.common.errors import InvalidMessage, MagnetarError
from magnetar.common.names import TopicName
from magnetar.proto.v1 import broker_pb2 as pb
from magnetar.schema import BytesSchema, Schema, SchemaInfo, SchemaType


class Received(Protocol):
    """What decoding reads of a received message (:class:`.message.Message`)."""

    def data(self) -> bytes: ...

    def schema_version(self) -> bytes: ...

    def message_id(self) -> object: ...

    def topic_name(self) -> str: ...

log = logging.getLogger(__name__)

_VERSION = struct.Struct(">q")

FetchSchema = Callable[[str, int], Awaitable[pb.GetSchemaResponse | None]]


def check_schema(schema: object, option: str = "schema") -> Schema:
    """Raises: TypeError: ``schema`` is not a :class:`magnetar.schema.Schema`."""
    if not isinstance(schema, Schema):
        raise TypeError(f"{option} must be a magnetar.schema.Schema (e.g. StringSchema()), not {type(schema).__name__}")
    return schema


def declared(schema: Schema) -> pb.SchemaInfo | None:
    """What a producer or consumer with ``schema`` declares (None: nothing, for bytes)."""
    info = schema.schema_info()
    if info.schema_type() in (SchemaType.BYTES, SchemaType.NONE):
        return None
    return pb.SchemaInfo(type=int(info.schema_type()), data=info.data, properties=info.properties(), name=info.name())


def version_number(version: bytes) -> int | None:
    """A schema version as messages carry it (Pulsar's 8 bytes) as a number (None: none)."""
    if len(version) != _VERSION.size:
        return None
    return _VERSION.unpack(version)[0]


def schema_topic(topic: str) -> str:
    """The topic whose schema ``topic`` has (a partition: its partitioned topic)."""
    name = TopicName.parse(topic)
    return str(name.partitioned_topic_name if name.is_partition else name)


def _info(resp: pb.GetSchemaResponse) -> SchemaInfo:
    s = resp.schema
    try:
        kind = SchemaType(s.type)
    except ValueError:
        kind = SchemaType.NONE
    return SchemaInfo(kind, s.name, bytes(s.data), dict(s.properties))


class WriterSchemas:
    """The schema versions a client fetched, by topic and version (one fetch each)."""

    def __init__(self, fetch: FetchSchema) -> None:
        self._fetch = fetch
        self._known: dict[tuple[str, int], SchemaInfo | MagnetarError] = {}
        self._loading: dict[tuple[str, int], asyncio.Future[None]] = {}

    def get(self, topic: str, version: int) -> SchemaInfo | MagnetarError | None:
        """The version (or why it could not be fetched); None: not fetched."""
        return self._known.get((topic, version))

    async def load(self, topic: str, version: int) -> None:
        """Fetch ``topic``'s schema ``version`` unless known; a failure is kept (and
        raised by :meth:`MessageDecoder.value`) only when the broker answered."""
        key = (topic, version)
        if key in self._known:
            return
        loading = self._loading.get(key)
        if loading is not None:
            await asyncio.shield(loading)
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._loading[key] = done
        try:
            resp = await self._fetch(topic, version)
            self._known[key] = (
                _info(resp) if resp is not None else InvalidMessage(f"topic {topic} has no schema version {version}")
            )
        except MagnetarError as exc:
            if not exc.retriable:
                self._known[key] = exc
            log.warning("schema version %d of %s not fetched: %s", version, topic, exc.message)
        finally:
            del self._loading[key]
            done.set_result(None)


class MessageDecoder:
    """Decodes the messages a consumer of one topic (or partition) receives."""

    def __init__(self, schema: Schema, topic: str, writers: WriterSchemas) -> None:
        self.schema = schema
        self.topic = schema_topic(topic)
        self._writers = writers
        self._needs_writer = schema.needs_writer_schema()

    @classmethod
    def of(cls, schema: Schema, topic: str, writers: WriterSchemas) -> MessageDecoder | None:
        """None for bytes (``value()`` is the payload)."""
        return None if isinstance(schema, BytesSchema) else cls(schema, topic, writers)

    async def prepare(self, deliveries: Any) -> None:
        """Fetch the schema versions these deliveries' entries were written with.

        Each entry is parsed once more here for its version (about 16 µs for an entry
        of 1,000 small Avro records, against some 4 ms to decode their values)."""
        if not self._needs_writer:
            return
        for delivery in deliveries:
            try:
                version = version_number(pb.EntryBatch.FromString(delivery.entry).schema_version)
            except Exception:  # an undecodable entry: unpacking it says so
                continue
            if version is not None and self._writers.get(self.topic, version) is None:
                await self._writers.load(self.topic, version)

    def value(self, msg: Received) -> Any:
        """``msg``'s payload decoded.

        Raises:
            InvalidMessage: it does not decode with this schema (or the version it was
                written with could not be fetched).
        """
        writer: SchemaInfo | None = None
        version = version_number(msg.schema_version())
        if self._needs_writer and version is not None:
            known = self._writers.get(self.topic, version)
            if isinstance(known, MagnetarError):
                raise InvalidMessage(
                    f"message {msg.message_id()} on {msg.topic_name()}: its schema version {version} is not "
                    f"available ({known.message})"
                ) from known
            writer = known
        try:
            return self.schema.decode_with(msg.data(), writer)
        except Exception as exc:
            which = f"schema version {version}" if version is not None else "no schema version"
            raise InvalidMessage(
                f"message {msg.message_id()} on {msg.topic_name()} ({which}) does not decode with {self.schema}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
