"""``/admin/v2/namespaces/{tenant}/{namespace}/topicStats``: a summary of the stats of
every loaded topic of a namespace in one call (not Pulsar's: Pulsar has no per-namespace
stats; the console's namespace page lists 1,000 topics with one listing call and this
one, docs/console.md).

The gateway asks each live broker once for the topics it has loaded
(``GetNamespaceTopicStats``, with the caller's credentials: lookup on the namespace, as
listing its topics); a topic no broker has loaded is absent (it has no rates, and its
stats load it: ``/persistent/.../stats`` gives them). A broker that does not answer is
named in ``unreachable``; its topics are absent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from fastapi import APIRouter
from pydantic import Field

from magnetar.common.errors import NotConnected
from magnetar.gateway.deps import Context, Namespace
from magnetar.gateway.errors import responses
from magnetar.gateway.models import PulsarModel
from magnetar.proto.v1 import broker_pb2 as pb

router = APIRouter(prefix="/admin/v2/namespaces", tags=["namespaces"])


class TopicStatsSummary(PulsarModel):
    """One topic's figures, named as in Pulsar's TopicStats (backlog and consumers summed
    over its subscriptions)."""

    msgRateIn: float = 0.0
    msgRateOut: float = 0.0
    msgThroughputIn: float = 0.0
    msgThroughputOut: float = 0.0
    storageSize: int = 0
    backlogSize: int = 0
    msgBacklog: int = 0
    producerCount: int = 0
    subscriptionCount: int = 0
    consumerCount: int = 0


class NamespaceTopicStats(PulsarModel):
    namespace: str
    topics: dict[str, TopicStatsSummary] = Field(description="loaded topics by full name, sorted")
    brokers: list[str] = Field(description="the live brokers asked")
    unreachable: list[str] = Field(default_factory=list, description="brokers that did not answer")


def summary(t: pb.TopicStats) -> TopicStatsSummary:
    return TopicStatsSummary(
        msgRateIn=t.msg_rate_in, msgRateOut=t.msg_rate_out, msgThroughputIn=t.msg_throughput_in,
        msgThroughputOut=t.msg_throughput_out, storageSize=t.storage_size, backlogSize=t.backlog_size,
        msgBacklog=sum(s.backlog for s in t.subscriptions), producerCount=len(t.publishers),
        subscriptionCount=len(t.subscriptions), consumerCount=sum(s.consumers for s in t.subscriptions),
    )


@router.get("/{tenant}/{namespace}/topicStats",
            summary="Stats of every loaded topic of a namespace in one call (Magnetar's; the console's namespace page)",
            operation_id="Magnetar_getNamespaceTopicStats", responses=responses(404, 412))
async def get_namespace_topic_stats(namespace: Namespace, ctx: Context) -> NamespaceTopicStats:
    brokers = await ctx.refresh_brokers()
    # Listing its topics: 404 for a namespace that does not exist (brokers answer for any name).
    _, answers = await asyncio.gather(
        ctx.admin.topics(namespace),
        asyncio.gather(*(_answer(ctx.admin.namespace_topic_stats(namespace, b)) for b in brokers)),
    )
    topics: dict[str, TopicStatsSummary] = {}
    unreachable = []
    for broker, answer in zip(brokers, answers, strict=True):
        if answer is None:
            unreachable.append(broker)
        else:
            topics.update((t.topic, summary(t)) for t in answer)
    return NamespaceTopicStats(namespace=namespace, topics=dict(sorted(topics.items())), brokers=brokers,
                               unreachable=unreachable)


async def _answer(call: Awaitable[list[pb.TopicStats]]) -> list[pb.TopicStats] | None:
    """A broker's answer; None when it cannot be reached (other errors propagate)."""
    try:
        return await call
    except (NotConnected, TimeoutError):
        return None
