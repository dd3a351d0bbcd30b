"""What the persistent-topic and subscription routes share: Pulsar's reasons for a
missing topic or subscription, and refusing calls Pulsar does not allow on a
partitioned topic."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from magnetar.common.errors import SubscriptionNotFound, TopicNotFound
from magnetar.common.names import TopicName
from magnetar.gateway.context import GatewayContext
from magnetar.gateway.errors import HttpError


@contextmanager
def pulsar_reasons(topic: str, subscription: str | None = None) -> Iterator[None]:
    """Answer a missing topic or subscription with Pulsar's 404 reasons."""
    try:
        yield
    except SubscriptionNotFound:
        raise HttpError(404, f"Subscription {subscription} not found for topic {topic}") from None
    except TopicNotFound:
        raise HttpError(404, f"Topic {topic} not found") from None


async def partition_count(ctx: GatewayContext, topic: str) -> int:
    """The topic's partition count (0: not partitioned, or a partition itself)."""
    if TopicName.parse(topic).is_partition:
        return 0
    return await ctx.admin.partitions(topic)


async def refuse_partitioned(ctx: GatewayContext, topic: str, status: int, reason: str) -> None:
    """Raises: HttpError(status, reason) when ``topic`` is a partitioned topic."""
    if await partition_count(ctx, topic):
        raise HttpError(status, reason)
