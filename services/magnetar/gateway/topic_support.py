"""What the persistent-topic and subscription routes share: Pulsar's reasons for a
missing topic or subscription, and refusing calls Pulsar does not allow on a
partitioned topic."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from magnetar.common.errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidTopicName,
    SubscriptionNotFound,
    TopicNotFound,
)
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


async def create_partitioned(ctx: GatewayContext, topic: str, partitions: int) -> None:
    """Pulsar's createPartitionedTopic (either domain): 406 for a count under 1 or over the
    most a topic may have, 409 when the topic exists."""
    if partitions <= 0:
        raise HttpError(406, "Number of partitions should be more than 0")
    try:
        await ctx.admin.create_topic(topic, partitions)
    except AlreadyExists:
        raise HttpError(409, "This topic already exists") from None
    except InvalidTopicName:
        raise
    except InvalidArgument as exc:  # above the most partitions a topic may have
        raise HttpError(406, exc.message) from None


async def grow_partitioned(ctx: GatewayContext, topic: str, partitions: int) -> None:
    """Pulsar's updatePartitionedTopic (either domain): the same count changes nothing; 409
    for a topic that is not partitioned, 422 for fewer partitions or over the most."""
    current = await partition_count(ctx, topic)
    if current == 0:
        raise HttpError(409, f"Topic {topic} is not the partitioned topic.")
    if partitions < current:
        raise HttpError(422, f"Expect partitions {partitions} can't less than current partitions {current}.")
    if partitions > current:
        try:
            await ctx.admin.update_partitions(topic, partitions)
        except InvalidTopicName:
            raise
        except InvalidArgument as exc:  # above the most partitions a topic may have
            raise HttpError(422, exc.message) from None
