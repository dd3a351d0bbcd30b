"""What the data source asks the gateway (Pulsar's admin REST API, through the SDK's
:class:`magnetar.client.rest_admin.RestAdmin`): partitions, ledgers, last message ids,
subscriptions. Driver side only; a client is opened per call and closed after it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .positions import PartitionLayout

T = TypeVar("T")


def _topic(topic: str, *rest: str) -> str:
    from magnetar.client.rest_admin import topic_path
    from magnetar.common.names import TopicName

    return "/".join([f"/admin/v2/persistent/{topic_path(TopicName.parse(topic))}", *rest])


def call(admin_url: str, token: str | None, fn: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``fn(rest_admin)`` on a fresh event loop (the driver has none running)."""
    from magnetar.client.rest_admin import RestAdmin

    async def run() -> T:
        async with RestAdmin(admin_url, token=token) as admin:
            return await fn(admin)

    return asyncio.run(run())


async def partitions(admin: Any, topic: str) -> list[tuple[str, int]]:
    """(partition name, index) of ``topic``; ``[(topic, -1)]`` when not partitioned.

    Raises:
        TopicNotFound (NotFound): no such topic.
    """
    from magnetar.common.names import TopicName

    name = TopicName.parse(topic)
    count = (await admin.request("GET", _topic(str(name), "partitions"))).get("partitions", 0)
    if count:
        return [(str(name.partition(i)), i) for i in range(count)]
    await admin.request("GET", _topic(str(name), "internalStats"))  # 404 when it does not exist
    return [(str(name), -1)]


async def layout(admin: Any, topic: str, partition_topic: str, partition: int, subscription: str | None) -> PartitionLayout:
    from magnetar.common.errors import NotFound

    stats = await admin.request("GET", _topic(partition_topic, "internalStats"))
    last = await admin.request("GET", _topic(partition_topic, "lastMessageId"))
    ledgers = tuple((int(ld["ledgerId"]), int(ld.get("entries", 0))) for ld in stats.get("ledgers", []))
    mark_delete = None
    if subscription is not None:
        cursor = stats.get("cursors", {}).get(subscription)
        if cursor is None:
            raise NotFound(f"{partition_topic} has no subscription {subscription!r}")
        ledger, _, entry = str(cursor["markDeletePosition"]).partition(":")
        mark_delete = (int(ledger), int(entry))
    last_pos = (int(last["ledgerId"]), int(last["entryId"])) if last else None
    return PartitionLayout(topic, partition_topic, partition, ledgers, last_pos, mark_delete)


async def layouts(admin: Any, topics: Sequence[str], subscription: str | None) -> list[PartitionLayout]:
    from magnetar.common.names import TopicName

    out = []
    for topic in topics:
        full = str(TopicName.parse(topic))
        for partition_topic, index in await partitions(admin, full):
            out.append(await layout(admin, full, partition_topic, index, subscription))
    return out
