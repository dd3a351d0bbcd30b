"""A topic's policies, as Pulsar's topic-level policies: the namespace policies of
:mod:`magnetar.broker.namespace_policies` that Pulsar serves at a topic's level (the
catalogue's entries with a ``topic`` level, :mod:`magnetar.common.policies`), kept per
topic (:mod:`magnetar.metadata.topic_policies`), checked by the same rules.

A topic's policy overrides its namespace's, which overrides the broker's default
(:func:`~magnetar.broker.namespace_policies.overlay`). A partition's policies are its
partitioned topic's: they are read and written under the base name.

As Pulsar's ``PersistentTopicsBase.preValidation``, an admin's get, set or remove of a
topic that does not exist (no managed ledger, and no partitioned metadata for a
partitioned topic) answers TopicNotFound ("Topic ... not found", 404) and writes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from magnetar.broker.namespace_policies import (
    NamespacePolicies,
    PolicyKind,
    QuotaType,
    from_document,
    merged,
    overlay,
    with_policy,
    without_policy,
)
from magnetar.common.errors import InvalidArgument, TopicNotFound
from magnetar.common.names import NamespaceName, TopicName
from magnetar.common.policies import CATALOGUE

TOPIC_KINDS = frozenset(PolicyKind[spec.kind] for spec in CATALOGUE if spec.topic is not None)
"""The policies a topic may set (Pulsar has a topic level for them)."""


class TopicDocuments(Protocol):
    """Where the documents are (``ZkTopicPolicyStore``)."""

    async def get(self, topic: TopicName) -> dict[str, Any]: ...

    async def update(self, topic: TopicName, fn: Callable[[dict[str, Any]], Mapping[str, Any]]) -> dict[str, Any]: ...

    async def delete(self, topic: TopicName) -> None: ...

    async def topics_with_documents(self, tenant: str, namespace: str) -> set[str]: ...


class NamespaceSource(Protocol):
    async def get(self, namespace: str) -> NamespacePolicies: ...


def policy_owner(topic: str | TopicName) -> TopicName:
    """The name a topic's policies are kept under (a partition's: its partitioned topic's).

    Raises: InvalidArgument (a bad name).
    """
    name = topic if isinstance(topic, TopicName) else TopicName.parse(topic)
    return name.partitioned_topic_name if name.is_partition else name


class TopicPolicyAdmin:
    """Read, set and remove a topic's policies; ``on_change(owner)`` hears of every change
    made here (with the name the policies are kept under)."""

    def __init__(
        self, store: TopicDocuments, namespaces: NamespaceSource,
        on_change: Callable[[TopicName], Any] | None = None,
        exists: Callable[[TopicName], Awaitable[bool]] | None = None,
    ) -> None:
        """Args:
        exists: whether a topic exists (a partitioned topic: its partitioned metadata);
            the admin's get, set and remove refuse a missing one. None: no check.
        """
        self._store = store
        self._namespaces = namespaces
        self.on_change = on_change
        self._exists = exists

    async def level(self, topic: str) -> NamespacePolicies:
        """What the topic sets, without the existence check (the broker reads it for the
        topics it serves). Raises: InvalidArgument (a bad name), CorruptMetadata."""
        owner = policy_owner(topic)
        return from_document(await self._store.get(owner), str(owner))

    async def setters(self, namespace: str) -> set[str]:
        """Names (``persistent://…``) of the namespace's topics that may set policies: those
        with a document; every other topic sets nothing. Raises: InvalidArgument."""
        ns = NamespaceName.parse(namespace)
        return {str(ns.topic(local)) for local in await self._store.topics_with_documents(ns.tenant, ns.namespace)}

    async def get(self, topic: str) -> NamespacePolicies:
        """What the topic sets.

        Raises: InvalidArgument (a bad name), TopicNotFound, CorruptMetadata.
        """
        await self._existing(policy_owner(topic))
        return await self.level(topic)

    async def applied(self, topic: str) -> NamespacePolicies:
        """What applies to the topic: its policies over its namespace's.

        Raises: NamespaceNotFound, TopicNotFound, CorruptMetadata.
        """
        owner = policy_owner(topic)
        namespace = await self._namespaces.get(str(owner.namespace))
        return overlay(await self.get(str(owner)), namespace)

    async def set(
        self, topic: str, kind: PolicyKind, value: object, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
    ) -> NamespacePolicies:
        """Set one policy at the topic's level (checked as a namespace's); returns the
        topic's policies as written.

        Raises:
            InvalidArgument: a bad value, or a policy Pulsar has no topic level for.
            PreconditionFailed: as :func:`~magnetar.broker.namespace_policies.with_policy`.
            NamespaceNotFound: the topic's namespace does not exist.
            TopicNotFound: the topic does not exist.
        """
        return await self._change(topic, kind, lambda p: with_policy(p, kind, value, quota_type))

    async def remove(
        self, topic: str, kind: PolicyKind, quota_type: QuotaType = QuotaType.DESTINATION_STORAGE,
    ) -> NamespacePolicies:
        """Remove one policy from the topic (its namespace's applies again)."""
        return await self._change(topic, kind, lambda p: without_policy(p, kind, quota_type))

    async def delete(self, topic: str) -> None:
        """Forget the topic's policies (the topic is deleted)."""
        await self._store.delete(policy_owner(topic))

    async def _change(
        self, topic: str, kind: PolicyKind, fn: Callable[[NamespacePolicies], NamespacePolicies],
    ) -> NamespacePolicies:
        owner = policy_owner(topic)
        if kind not in TOPIC_KINDS:
            raise InvalidArgument(f"the {kind.value} policy has no topic level (set it on the namespace)")
        await self._namespaces.get(str(owner.namespace))  # NamespaceNotFound before anything is written
        await self._existing(owner)
        result: list[NamespacePolicies] = []

        def update(doc: dict[str, Any]) -> dict[str, Any]:
            result[:] = [fn(from_document(doc, str(owner)))]
            return merged(doc, result[0])

        await self._store.update(owner, update)
        if self.on_change is not None:
            self.on_change(owner)
        return result[0]

    async def _existing(self, owner: TopicName) -> None:
        if self._exists is not None and not await self._exists(owner):
            raise TopicNotFound(f"Topic {owner} not found")
