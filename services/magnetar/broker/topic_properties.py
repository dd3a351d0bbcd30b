"""Topic properties (Pulsar's ``getProperties``, ``updateProperties``,
``removeProperties``): string pairs an operator attaches to a topic, kept in its managed
ledger's properties as Pulsar keeps them, so they survive restarts and hand-overs.

They are stored as one JSON object under :data:`TOPIC_PROPERTIES`, apart from the
broker's own ledger properties (epoch, termination, deduplication snapshot): a user key
can neither shadow nor remove those. An update merges keys in; a remove takes one out.
Of a partitioned topic each partition keeps its own copy (the admin clients send the
call to every partition).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Protocol

from magnetar.common.errors import InvalidArgument, MetadataVersionConflict, NotOwner
from magnetar.managedledger.ledger import ManagedLedger


class PersistentTopic(Protocol):
    """What the properties need of a topic (``magnetar.broker.topic.PersistentTopic``)."""

    name: str
    ml: ManagedLedger

TOPIC_PROPERTIES = "pulsar.topic.properties"


def check_topic_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """Raises: InvalidArgument: a key not a non-empty string, or a value not a string."""
    if not isinstance(properties, Mapping):
        raise InvalidArgument(f"topic properties are an object of strings, not {properties!r}")
    for k, v in properties.items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise InvalidArgument(f"topic properties map non-empty strings to strings, not {k!r}: {v!r}")
    return dict(properties)


def topic_properties(topic: PersistentTopic) -> dict[str, str]:
    """The topic's properties (a copy; {} without any)."""
    stored = topic.ml.properties.get(TOPIC_PROPERTIES)
    return dict(json.loads(stored)) if stored else {}


async def update_topic_properties(topic: PersistentTopic, properties: Mapping[str, str]) -> None:
    """Merge ``properties`` into the topic's and store them now.

    Raises:
        InvalidArgument: bad properties (nothing changed).
        NotOwner: another broker took the topic over (nothing changed).
        MetadataError: ZooKeeper trouble (nothing changed).
    """
    new = topic_properties(topic) | check_topic_properties(properties)
    await _store(topic, new)


async def remove_topic_property(topic: PersistentTopic, key: str) -> None:
    """Remove ``key`` from the topic's properties (a key it lacks: nothing to do).

    Raises:
        InvalidArgument: an empty key. NotOwner, MetadataError: as for an update.
    """
    if not isinstance(key, str) or not key:
        raise InvalidArgument("give the key of the topic property to remove")
    current = topic_properties(topic)
    if key in current:
        del current[key]
        await _store(topic, current)


async def _store(topic: PersistentTopic, properties: dict[str, str]) -> None:
    await store_ledger_property(topic, TOPIC_PROPERTIES, json.dumps(properties, sort_keys=True) if properties else None)


async def store_ledger_property(topic: PersistentTopic, key: str, value: str | None) -> None:
    """Store ``topic``'s ledger list with its property ``key`` set to ``value`` (None:
    removed); when that fails the property is as it was. Topic properties and the
    termination position are stored so.

    Raises: NotOwner: another broker took the topic over (the list moved on); what the
    store raised otherwise.
    """
    old = topic.ml.properties.get(key)
    topic.ml.put_property(key, value)
    try:
        await topic.ml.store_properties()
    except BaseException as exc:
        topic.ml.put_property(key, old)
        if isinstance(exc, MetadataVersionConflict):
            raise NotOwner(f"topic {topic.name} moved to another broker; look it up again") from exc
        raise
