"""Each topic's schema history in ZooKeeper: the registry's storage (its decisions are
:mod:`magnetar.broker.schema.registry`'s).

One znode per topic (a partitioned topic's partitions share their topic's):
``<root>/schemas/<tenant>/<namespace>/<topic>``, JSON ``{"versions": [{"version": n,
"type": <Pulsar's schema type number>, "data": <base64>, "properties": {…},
"timestamp": <ms>, "deleted": <bool>}, …]}``, oldest first. A delete is a version of its
own (``deleted``, no data), so version numbers keep growing after it. Every change is a
compare-and-set of the znode's version, so two brokers registering at once never lose
one another's version (the loser reads again and decides again). The single-schema
document older brokers wrote (``{"type", "data", "properties", "version"}``) is read as
a history of that one version.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from magnetar.common.errors import NotFound
from magnetar.common.names import TopicName
from magnetar.metadata.codec import decode
from magnetar.metadata.errors import CorruptMetadata
from magnetar.metadata.paths import ZkPaths
from magnetar.metadata.session import ZkSession
from magnetar.metadata.versioned import read_modify_write

T = TypeVar("T")
_KEY_VALUE = 15
_KEY_VALUE_TYPES = ("key.schema.type", "value.schema.type")


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """A schema as clients declare it: Pulsar's type number, its definition, properties."""

    type: int
    data: bytes = b""
    properties: Mapping[str, str] = field(default_factory=dict)

    def same_as(self, other: SchemaInfo) -> bool:
        """The same schema: type and definition (other properties do not make another
        one), and for KEY_VALUE the types of its key and value, which only its properties
        name."""
        if self.type != other.type or self.data != other.data:
            return False
        if self.type != _KEY_VALUE:
            return True
        return all(self.properties.get(k) == other.properties.get(k) for k in _KEY_VALUE_TYPES)


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """One version of a topic's schema history: the schema, its version (0: the first),
    when it was registered, and whether it is a delete (then ``schema`` is empty)."""

    schema: SchemaInfo
    version: int = 0
    timestamp_ms: int = 0
    deleted: bool = False


SchemaHistory = tuple[StoredSchema, ...]
"""A topic's versions, oldest first (empty: it never had a schema)."""


class ZkSchemaStore:
    """Each topic's schema history in ZooKeeper."""

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

    async def history(self, topic: str) -> SchemaHistory:
        """``topic``'s (or its partitioned topic's) versions, oldest first.

        Raises: CorruptMetadata.
        """
        path = self._path(topic)
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return ()
        return read_history(decode(data, path), path)

    async def update(self, topic: str, fn: Callable[[SchemaHistory], tuple[SchemaHistory, T]]) -> T:
        """Apply ``fn`` (pure: it may run again after a lost race) to ``topic``'s history
        and store the history it returns (nothing when unchanged); ``fn``'s other result.
        An exception from ``fn`` aborts with nothing written.

        Raises: as ``fn``; CorruptMetadata; MetadataVersionConflict (still racing after
        the retries of :func:`read_modify_write`).
        """
        path = self._path(topic)
        result: list[T] = []

        def apply(doc: dict[str, Any] | None) -> dict[str, Any]:
            current = () if doc is None else read_history(doc, path)
            updated, out = fn(current)
            result[:] = [out]
            if doc is not None and updated == current:
                return doc  # nothing written (an old single-schema document stays as it is)
            return history_document(updated)

        await read_modify_write(self._session, path, apply)
        return result[0]

    async def delete(self, topic: str) -> None:
        """Forget ``topic``'s whole history (its topic is deleted; nothing when none)."""
        try:
            await self._session.delete(self._path(topic))
        except NotFound:
            pass


def history_document(history: Sequence[StoredSchema]) -> dict[str, Any]:
    return {"versions": [
        {
            "version": s.version, "type": s.schema.type, "data": base64.b64encode(s.schema.data).decode(),
            "properties": dict(s.schema.properties), "timestamp": s.timestamp_ms, "deleted": s.deleted,
        }
        for s in history
    ]}  # fmt: skip


def read_history(doc: Mapping[str, Any], path: str) -> SchemaHistory:
    """The history a znode's document holds (either format).

    Raises: CorruptMetadata: not a schema history.
    """
    if "versions" not in doc:  # the single-schema document: version 0 (or the one it names)
        return (_read(doc, path),)
    versions = doc["versions"]
    if not isinstance(versions, list):
        raise CorruptMetadata(f"znode {path} holds no list of schema versions")
    out = tuple(_read(v, path) for v in versions)
    if any(b.version <= a.version for a, b in zip(out, out[1:], strict=False)):
        raise CorruptMetadata(f"znode {path}: schema versions out of order")
    return out


def _read(doc: object, path: str) -> StoredSchema:
    if not isinstance(doc, Mapping):
        raise CorruptMetadata(f"znode {path} holds no valid schema: {doc!r}")
    kind, data, props = doc.get("type"), doc.get("data"), doc.get("properties", {})
    version, timestamp, deleted = doc.get("version", 0), doc.get("timestamp", 0), doc.get("deleted", False)
    if (
        isinstance(kind, bool) or not isinstance(kind, int) or not isinstance(data, str)
        or isinstance(version, bool) or not isinstance(version, int) or version < 0
        or isinstance(timestamp, bool) or not isinstance(timestamp, int) or not isinstance(deleted, bool)
        or not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
    ):  # fmt: skip
        raise CorruptMetadata(f"znode {path} holds no valid schema: {dict(doc)!r}")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error as exc:
        raise CorruptMetadata(f"znode {path}: the schema's data is not base64 ({exc})") from None
    return StoredSchema(SchemaInfo(kind, raw, props), version, timestamp, deleted)
