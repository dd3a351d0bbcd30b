"""Many admin creates of non-partitioned persistent topics of one namespace at once
(the gateway gathers concurrent REST creates into one call: docs/gateway.md, "Creating a
topic"). Each is the create of one topic (:meth:`BrokerService.create_topic`: its managed
ledger's list, written in one ZooKeeper multi-operation); they run together, so their
ZooKeeper requests are in flight together, and each has its own outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from magnetar.common.errors import InvalidArgument, MagnetarError
from magnetar.common.names import NamespaceName, TopicName

MAX_TOPICS_PER_CALL = 1000
"""Most topics one call creates (its answer stays small, its ZooKeeper burst bounded)."""


def check_batch(namespace: str, topics: Sequence[str]) -> list[TopicName]:
    """The topics' names, each a non-partitioned persistent topic of ``namespace``.

    Raises:
        InvalidArgument / InvalidTopicName: a bad or foreign name, or too many topics
            (nothing is created then).
    """
    ns = NamespaceName.parse(namespace)
    if len(topics) > MAX_TOPICS_PER_CALL:
        raise InvalidArgument(f"at most {MAX_TOPICS_PER_CALL:,} topics per call, got {len(topics):,}")
    names = [TopicName.parse(t) for t in topics]
    for name in names:
        if name.namespace != ns or not name.is_persistent or name.is_partition:
            raise InvalidArgument(
                f"{name} is not a non-partitioned persistent topic of {ns}: each topic of one call must be")
    return names


async def create_topics(
    namespace: str, topics: Sequence[str], create: Callable[[str], Awaitable[None]]
) -> list[MagnetarError | None]:
    """Run ``create`` for every topic at once; returns each one's error (None: created).

    Raises:
        InvalidArgument / InvalidTopicName: see :func:`check_batch`.
    """
    names = check_batch(namespace, topics)
    outcomes = await asyncio.gather(*(create(str(n)) for n in names), return_exceptions=True)
    errors: list[MagnetarError | None] = []
    for outcome in outcomes:
        if isinstance(outcome, MagnetarError):
            errors.append(outcome)
        elif isinstance(outcome, BaseException):
            raise outcome  # a bug, not an outcome: the call fails (INTERNAL)
        else:
            errors.append(None)
    return errors
