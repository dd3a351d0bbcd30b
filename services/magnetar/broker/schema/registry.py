"""Pulsar's schema registry: what a producer, a consumer or an admin gets when it
declares, uploads, deletes or tests a schema, over a topic's stored history.

The decisions are pure functions of the history (:data:`SchemaHistory`, oldest first);
:class:`SchemaRegistry` applies them through a store's compare-and-set update, so two
brokers deciding at once on one topic each decide on what the other wrote.

As Pulsar's brokers decide:

- The *live* versions are those after the last delete. A schema identical to a live
  version (type and definition; an Avro definition however written) gets that version
  back, whatever the strategy.
- Otherwise a producer's new schema is added as the next version (one above the last,
  a delete included) when ``isAllowAutoUpdateSchema`` and it is compatible with the
  latest live version (every live version, newest first, for a ``_TRANSITIVE``
  strategy); with no live version it is added unchecked. An admin upload is the same,
  except that ``isAllowAutoUpdateSchema`` does not apply.
- A consumer's (or reader's) schema is added as a producer's would be when the topic
  has no schema and is idle (no producers, no consumers, no data); otherwise it must
  have a schema and be readable as Pulsar checks consumers: against the latest version
  with BACKWARD for BACKWARD, FORWARD, FORWARD_TRANSITIVE and FULL, against every live
  version with the strategy for the others.
- A delete is a version of its own: the latest is "not found" afterwards, the next
  schema starts the history again without a check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from magnetar.broker.schema.compatibility import (
    SchemaCompatibilityStrategy,
    SchemaType,
    first_incompatibility,
    same_schema,
    validate,
)
from magnetar.common.errors import IncompatibleSchema, SchemaNotFound
from magnetar.metadata.schemas import SchemaHistory, SchemaInfo, StoredSchema

T = TypeVar("T")
S = SchemaCompatibilityStrategy


class SchemaStore(Protocol):
    """Where histories are kept (``ZkSchemaStore``; a dict in tests)."""

    async def history(self, topic: str) -> SchemaHistory: ...

    async def update(self, topic: str, fn: Callable[[SchemaHistory], tuple[SchemaHistory, T]]) -> T: ...

    async def delete(self, topic: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SchemaRules:
    """What a topic's namespace (or the broker's default) sets."""

    strategy: SchemaCompatibilityStrategy = S.FULL
    """Resolved: never UNDEFINED."""
    allow_auto_update: bool = True
    """``isAllowAutoUpdateSchema``."""
    validation_enforced: bool = False
    """``schemaValidationEnforced``."""


@dataclass(frozen=True, slots=True)
class Compatibility:
    """The answer of a compatibility test."""

    compatible: bool
    strategy: SchemaCompatibilityStrategy
    reason: str = ""


# -- the decisions ------------------------------------------------------------------------
def live(history: SchemaHistory) -> SchemaHistory:
    """The versions after the last delete."""
    for i in range(len(history) - 1, -1, -1):
        if history[i].deleted:
            return history[i + 1:]
    return history


def latest(history: SchemaHistory) -> StoredSchema | None:
    """The latest version, None when there is none or it is a delete."""
    return history[-1] if history and not history[-1].deleted else None


def find(history: SchemaHistory, version: int) -> StoredSchema | None:
    """Version ``version`` (any before a delete too), None when none or a delete."""
    for stored in history:
        if stored.version == version:
            return None if stored.deleted else stored
    return None


def identical(history: SchemaHistory, schema: SchemaInfo) -> StoredSchema | None:
    """The live version identical to ``schema`` (the newest such), None: none."""
    for stored in reversed(live(history)):
        if same_schema(stored.schema, schema):
            return stored
    return None


def next_version(history: SchemaHistory) -> int:
    return history[-1].version + 1 if history else 0


def refusal(history: SchemaHistory, schema: SchemaInfo, strategy: SchemaCompatibilityStrategy) -> str | None:
    """Why ``schema`` may not be the next version under ``strategy`` (None: it may)."""
    versions = [(s.version, s.schema) for s in live(history)]
    found = first_incompatibility(versions, schema, strategy)
    if found is None:
        return None
    version, why = found
    return f"incompatible with version {version} under {strategy.value}: {why}"


def added(history: SchemaHistory, schema: SchemaInfo, rules: SchemaRules, now_ms: int, *, admin: bool = False,
          topic: str = "") -> tuple[SchemaHistory, StoredSchema]:
    """``history`` with ``schema`` registered (as a producer declares it, or ``admin``
    uploads it) and the version it gets.

    Raises:
        InvalidSchema: its definition does not parse.
        IncompatibleSchema: refused (by the strategy, or as a new version while
            ``isAllowAutoUpdateSchema`` is off).
    """
    same = identical(history, schema)
    if same is not None:
        return history, same
    validate(schema)
    where = f"topic {topic}" if topic else "the topic"
    if not admin and not rules.allow_auto_update:
        raise IncompatibleSchema(
            f"{where} has no schema version identical to this {SchemaType.name_of(schema.type)} schema "
            f"and isAllowAutoUpdateSchema is false: no new version is registered by producers"
        )
    why = refusal(history, schema, rules.strategy)
    if why is not None:
        raise IncompatibleSchema(f"{where}: the {SchemaType.name_of(schema.type)} schema is {why}")
    stored = StoredSchema(schema, next_version(history), now_ms)
    return (*history, stored), stored


def consumer_refusal(history: SchemaHistory, schema: SchemaInfo, strategy: SchemaCompatibilityStrategy) -> str | None:
    """Why a consumer with ``schema`` may not read a topic that is not idle (None: it may)."""
    if strategy is S.ALWAYS_COMPATIBLE:
        return None
    if latest(history) is None:
        return "the topic has no schema to check the consumer's against (and is not idle)"
    versions = [(s.version, s.schema) for s in live(history)]
    if strategy in (S.BACKWARD, S.FORWARD, S.FORWARD_TRANSITIVE, S.FULL):
        found = first_incompatibility(versions, schema, S.BACKWARD)
    else:
        found = first_incompatibility(versions, schema, strategy, every=True)
    if found is None:
        return None
    return f"the consumer's schema is incompatible with version {found[0]}: {found[1]}"


def deleted(history: SchemaHistory, now_ms: int) -> tuple[SchemaHistory, int | None]:
    """``history`` with a delete appended and the delete's version (None and nothing
    appended when the latest is already gone)."""
    if latest(history) is None:
        return history, None
    marker = StoredSchema(SchemaInfo(history[-1].schema.type), next_version(history), now_ms, deleted=True)
    return (*history, marker), marker.version


# -- over a store -------------------------------------------------------------------------
class SchemaRegistry:
    """The registry's operations over a :class:`SchemaStore` (topics are full names; a
    partition is its partitioned topic: the store maps it)."""

    def __init__(self, store: SchemaStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def get(self, topic: str, version: int | None = None) -> StoredSchema:
        """The latest version, or ``version``.

        Raises: SchemaNotFound: none, deleted, or no such version.
        """
        history = await self.store.history(topic)
        stored = latest(history) if version is None else find(history, version)
        if stored is None:
            what = "schema" if version is None else f"schema version {version}"
            raise SchemaNotFound(f"topic {topic} has no {what}" + (" (deleted)" if history and version is None else ""))
        return stored

    async def versions(self, topic: str) -> SchemaHistory:
        """Every live version, oldest first (empty: none)."""
        return live(await self.store.history(topic))

    async def put(self, topic: str, schema: SchemaInfo, rules: SchemaRules, *, admin: bool = False) -> StoredSchema:
        """Register ``schema`` (see :func:`added`); the version it has."""
        now = self._now_ms()
        return await self.store.update(topic, lambda h: added(h, schema, rules, now, admin=admin, topic=topic))

    async def consume(self, topic: str, schema: SchemaInfo, rules: SchemaRules, *, idle: bool) -> StoredSchema | None:
        """A consumer (or reader) of ``topic`` declares ``schema``: registered as a
        producer's would be when the topic has no schema and is ``idle``, else checked.
        The version registered or identical to it (None: compatible, not registered).

        Raises: IncompatibleSchema; InvalidSchema.
        """
        history = await self.store.history(topic)
        if latest(history) is None and idle:
            return await self.put(topic, schema, rules)
        validate(schema)
        why = consumer_refusal(history, schema, rules.strategy)
        if why is not None:
            raise IncompatibleSchema(f"topic {topic}: {why} (strategy {rules.strategy.value})")
        return identical(history, schema)

    async def require_schema_for(self, topic: str, rules: SchemaRules) -> None:
        """A producer declaring no schema (bytes).

        Raises: IncompatibleSchema: ``schemaValidationEnforced`` and the topic has one.
        """
        if rules.validation_enforced and latest(await self.store.history(topic)) is not None:
            raise IncompatibleSchema(
                f"topic {topic} has a schema and schemaValidationEnforced is true: producers must declare one"
            )

    async def delete(self, topic: str) -> int | None:
        """Delete the schema (a version of its own; the history is kept); the delete's
        version, None when there was no schema to delete."""
        now = self._now_ms()
        return await self.store.update(topic, lambda h: deleted(h, now))

    async def drop(self, topic: str) -> None:
        """Forget every version (the topic itself is deleted)."""
        await self.store.delete(topic)

    async def test(self, topic: str, schema: SchemaInfo, strategy: SchemaCompatibilityStrategy) -> Compatibility:
        """Would ``schema`` be accepted as the next version under ``strategy``? Stores nothing.

        Raises: InvalidSchema.
        """
        history = await self.store.history(topic)
        if identical(history, schema) is None:
            validate(schema)
        why = refusal(history, schema, strategy)
        return Compatibility(why is None, strategy, why or "")

    async def version_of(self, topic: str, schema: SchemaInfo) -> int:
        """The live version identical to ``schema``.

        Raises: SchemaNotFound.
        """
        stored = identical(await self.store.history(topic), schema)
        if stored is None:
            raise SchemaNotFound(f"topic {topic} has no schema version identical to the one given")
        return stored.version
