"""The schema each topic keeps: the first one a producer or consumer declared for it.

One znode per topic (a partitioned topic's partitions share their topic's):
``<root>/schemas/<tenant>/<namespace>/<topic>``, JSON ``{"type": <Pulsar's schema type
number>, "data": <base64>, "properties": {…}, "version": 0}``. Created once and never
changed here (a registry with versions and compatibility checks comes later), so two
brokers racing to keep a schema for one topic agree on the one created first.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field

from magnetar.common.errors import NotFound
from magnetar.common.names import TopicName
from magnetar.metadata.codec import decode, encode
from magnetar.metadata.errors import CorruptMetadata, NodeExists
from magnetar.metadata.paths import ZkPaths
from magnetar.metadata.session import ZkSession


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """A schema as clients declare it: Pulsar's type number, its definition, properties."""

    type: int
    data: bytes = b""
    properties: Mapping[str, str] = field(default_factory=dict)

    def same_as(self, other: SchemaInfo) -> bool:
        """The same schema (type and definition; properties do not make another one)."""
        return self.type == other.type and self.data == other.data


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """The schema a topic keeps and its version (0: the first)."""

    schema: SchemaInfo
    version: int = 0


class ZkSchemaStore:
    """Each topic's schema in ZooKeeper."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    @property
    def _paths(self) -> ZkPaths:
        return self._session.paths

    def _path(self, topic: str) -> str:
        name = TopicName.parse(topic)
        if name.is_partition:
            name = name.partitioned_topic_name
        return self._paths.schema(name.tenant, name.namespace_part, name.local_name)

    async def get(self, topic: str) -> StoredSchema | None:
        """The schema ``topic`` (or its partitioned topic) keeps; None: none."""
        path = self._path(topic)
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return None
        return _read(decode(data, path), path)

    async def get_or_create(self, topic: str, schema: SchemaInfo) -> StoredSchema:
        """The schema ``topic`` keeps, ``schema`` (version 0) when it kept none before."""
        path = self._path(topic)
        stored = StoredSchema(schema)
        try:
            await self._session.create(path, encode(_doc(stored)), makepath=True)
            return stored
        except NodeExists:
            kept = await self.get(topic)
            if kept is None:  # deleted meanwhile: keep this one
                return await self.get_or_create(topic, schema)
            return kept

    async def delete(self, topic: str) -> None:
        """Forget ``topic``'s schema (nothing when it has none)."""
        try:
            await self._session.delete(self._path(topic))
        except NotFound:
            pass


def _doc(stored: StoredSchema) -> dict[str, object]:
    s = stored.schema
    return {
        "type": s.type, "data": base64.b64encode(s.data).decode(), "properties": dict(s.properties),
        "version": stored.version,
    }  # fmt: skip


def _read(doc: Mapping[str, object], path: str) -> StoredSchema:
    kind, data, props, version = doc.get("type"), doc.get("data"), doc.get("properties", {}), doc.get("version", 0)
    if (
        isinstance(kind, bool) or not isinstance(kind, int) or not isinstance(data, str)
        or isinstance(version, bool) or not isinstance(version, int) or version < 0
        or not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
    ):  # fmt: skip
        raise CorruptMetadata(f"znode {path} holds no valid schema: {dict(doc)!r}")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error as exc:
        raise CorruptMetadata(f"znode {path}: the schema's data is not base64 ({exc})") from None
    return StoredSchema(SchemaInfo(kind, raw, props), version)
