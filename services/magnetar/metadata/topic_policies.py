"""Topic policies in ZooKeeper: one JSON document per topic (the keys of a namespace's
policies document, :mod:`magnetar.broker.namespace_policies`), changed by compare-and-set.

A partitioned topic's policies are kept once, under its base name, and apply to every
partition (as Pulsar's); the caller names the topic it keeps them under. The document is
deleted with the topic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from magnetar.common.errors import NotFound
from magnetar.common.names import TopicName
from magnetar.metadata.codec import decode
from magnetar.metadata.session import ZkSession
from magnetar.metadata.versioned import Document, read_modify_write


class ZkTopicPolicyStore:
    """``/topic-policies/{tenant}/{namespace}/{topic}``: what a topic sets."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    def _path(self, topic: TopicName) -> str:
        return self._session.paths.topic_policies(topic.tenant, topic.namespace_part, topic.local_name)

    async def get(self, topic: TopicName) -> Document:
        """The topic's document ({}: it sets nothing)."""
        path = self._path(topic)
        try:
            data, _ = await self._session.get(path)
        except NotFound:
            return {}
        return decode(data, path)

    async def topics_with_documents(self, tenant: str, namespace: str) -> set[str]:
        """Local names of the namespace's topics that have a document, in one read (the
        broker's policy round reads only their documents)."""
        try:
            return set(await self._session.children(self._session.paths.namespace_topic_policies(tenant, namespace)))
        except NotFound:
            return set()

    async def update(self, topic: TopicName, fn: Callable[[Document], Mapping[str, Any]]) -> Document:
        """Replace the document by ``fn(document)`` ({} when there is none) with
        compare-and-set, retried on conflict; an exception from ``fn`` writes nothing.
        Returns the document as written."""
        written, _ = await read_modify_write(self._session, self._path(topic), lambda doc: dict(fn(doc or {})))
        return written

    async def delete(self, topic: TopicName) -> None:
        """Forget the topic's policies (none: nothing to do)."""
        try:
            await self._session.delete(self._path(topic))
        except NotFound:
            pass
