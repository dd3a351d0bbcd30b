"""Pulsar's ``NonPersistentTopicStats`` JSON: a topic's stats (``TopicStats``) with the
messages dropped, per subscription and summed (``msgDropRate``), as Pulsar's
non-persistent topics report them."""

from __future__ import annotations

from pydantic import Field

from magnetar.gateway import topic_models as m
from magnetar.gateway.topic_stats import subscription_stats, topic_stats
from magnetar.proto.v1 import broker_pb2 as pb


class NonPersistentSubscriptionStats(m.SubscriptionStats):
    msgDropRate: float = Field(default=0.0, description="messages dropped per second: no consumer had permits")
    msgDropCounter: int = Field(default=0, description="Magnetar: messages dropped since the topic was loaded")


class NonPersistentPublisherStats(m.PublisherStats):
    msgDropRate: float = 0.0


class NonPersistentTopicStats(m.TopicStats):
    msgDropRate: float = Field(default=0.0, description="the subscriptions' drops per second, summed")
    msgDropCounter: int = Field(default=0, description="Magnetar: the subscriptions' drops since the topic was loaded")
    publishers: list[NonPersistentPublisherStats] = Field(default_factory=list)  # type: ignore[assignment]
    subscriptions: dict[str, NonPersistentSubscriptionStats] = Field(default_factory=dict)  # type: ignore[assignment]


def non_persistent_stats(t: pb.TopicStats) -> NonPersistentTopicStats:
    base = topic_stats(t).model_dump()
    base["publishers"] = [NonPersistentPublisherStats(**p) for p in base["publishers"]]
    by_name = {s.name: s for s in t.subscriptions}
    base["subscriptions"] = {
        name: NonPersistentSubscriptionStats(
            **subscription_stats(by_name[name]).model_dump(),
            msgDropRate=by_name[name].msg_drop_rate, msgDropCounter=by_name[name].msg_drop_counter,
        )
        for name in base["subscriptions"]
    }
    return NonPersistentTopicStats(**base, msgDropRate=t.msg_drop_rate, msgDropCounter=t.msg_drop_counter)
