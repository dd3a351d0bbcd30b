"""A namespace's topic list across both domains, as pattern consumers ask it (Pulsar's
GET_TOPICS_OF_NAMESPACE and its ``Mode``; the gRPC ``ListTopics`` with a ``mode``).

Persistent topics are known by their metadata in ZooKeeper; a non-persistent topic only
by the broker that has it loaded. So the non-persistent list of a namespace is asked of
every owner of one of its bundles (this broker answers for itself; the others through a
:class:`PeerTopicLister`, a network adapter the process gives the service), and the
partitions a partitioned non-persistent topic declares are listed whether loaded or not
(as a persistent topic's are). An owner that cannot be asked now is left out of this
answer and logged: a pattern consumer asks again at its next discovery.

Pure: no network here.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from magnetar.common.errors import MagnetarError
from magnetar.common.names import NON_PERSISTENT, PERSISTENT, TopicName

log = logging.getLogger(__name__)


class TopicsMode(enum.IntEnum):
    """Which domains a namespace's list takes (Pulsar's CommandGetTopicsOfNamespace.Mode)."""

    PERSISTENT = 0
    NON_PERSISTENT = 1
    ALL = 2

    @property
    def domains(self) -> tuple[str, ...]:
        return {0: (PERSISTENT,), 1: (NON_PERSISTENT,), 2: (PERSISTENT, NON_PERSISTENT)}[self.value]


class PeerTopicLister(Protocol):
    """Asks another broker which non-persistent topics of a namespace it serves."""

    async def non_persistent_topics(self, broker_id: str, namespace: str) -> list[str]: ...

    async def close(self) -> None: ...


async def non_persistent_topics(
    namespace: str,
    owners: Iterable[str],
    me: str,
    local: Callable[[str], list[str]],
    peer: PeerTopicLister | None,
) -> set[str]:
    """The non-persistent topics the ``owners`` of ``namespace``'s bundles serve: this
    broker's (``me``) from ``local``, the others' from ``peer`` (None: this broker's
    only), asked together."""

    async def ask(owner: str) -> list[str]:
        if owner == me:
            return local(namespace)
        if peer is None:
            return []
        try:
            return await peer.non_persistent_topics(owner, namespace)
        except MagnetarError as exc:
            log.warning("listing the non-persistent topics of %s: broker %s did not answer: %s", namespace, owner, exc.message)
            return []

    answers: list[list[str]] = await asyncio.gather(*(ask(o) for o in sorted(set(owners)) if o))
    return {t for names in answers for t in names}


def fold_partitions(loaded: Iterable[str], declared: dict[str, int], *, as_partitions: bool) -> set[str]:
    """Topic names for a list: a partitioned topic (``declared``: base name to count) as
    each of its partitions (``as_partitions``, GET_TOPICS_OF_NAMESPACE's form) or by its
    base name (the SDK's form); a loaded partition of a declared topic is not listed on
    its own; the other ``loaded`` topics as they are (a name that only looks like a
    partition's is a topic of its own)."""
    names: set[str] = set()
    for topic in loaded:
        name = TopicName.parse(topic)
        if name.is_partition and name.partition_index < declared.get(str(name.partitioned_topic_name), 0):
            continue
        names.add(str(name))
    for base, count in declared.items():
        if as_partitions:
            names.update(str(TopicName.parse(base).partition(i)) for i in range(count))
        else:
            names.add(base)
    return names

