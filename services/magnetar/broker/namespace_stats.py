"""The stats of a namespace's topics a broker has loaded, at once (the console's namespace
page: one call per broker, not one per topic; docs/console.md)."""

from __future__ import annotations

from collections.abc import Mapping

from magnetar.broker.stats import TopicStats
from magnetar.broker.topic import PersistentTopic
from magnetar.common.names import NamespaceName, TopicName


def loaded_topic_stats(topics: Mapping[str, PersistentTopic], namespace: str) -> list[TopicStats]:
    """Each loaded topic of ``namespace`` (partitions one by one), sorted by name.

    Raises:
        InvalidArgument: ``namespace`` is not ``tenant/namespace``.
    """
    ns = NamespaceName.parse(namespace)
    return [topic.stats() for name, topic in sorted(topics.items()) if TopicName.parse(name).namespace == ns]
