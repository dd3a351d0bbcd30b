"""A topic closing (unloaded, or its broker's lease lapsed) while a consumer subscribes:
the consumer is refused with a retriable error, so it subscribes again where the topic is
served, instead of being left on a subscription nobody closes or dispatches."""

from __future__ import annotations

import asyncio

import pytest
from test_dispatch import Sink

from magnetar.broker.consumer import BrokerConsumer
from magnetar.broker.subscription_type import InitialPosition, SubscriptionType
from magnetar.common.errors import ServiceClosed

pytestmark = pytest.mark.asyncio


async def test_a_subscribe_whose_cursor_is_stored_while_the_topic_closes_is_refused(persistent_topic, monkeypatch):
    topic = persistent_topic
    stored, go_on = asyncio.Event(), asyncio.Event()
    open_cursor = topic.ml.open_cursor

    async def slow_open_cursor(*args, **kwargs):
        cursor = await open_cursor(*args, **kwargs)
        stored.set()
        await go_on.wait()  # the ZooKeeper write's answer comes late
        return cursor

    monkeypatch.setattr(topic.ml, "open_cursor", slow_open_cursor)
    subscribing = asyncio.ensure_future(topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest))
    await stored.wait()
    closing = asyncio.ensure_future(topic.close())
    await asyncio.sleep(0.01)
    go_on.set()
    with pytest.raises(ServiceClosed) as refused:
        await subscribing
    assert refused.value.retriable
    await closing
    assert topic.subscriptions == {}


async def test_a_consumer_attaching_after_the_topic_started_closing_is_refused(persistent_topic):
    topic = persistent_topic
    sub = await topic.subscribe("s", SubscriptionType.Shared, InitialPosition.Earliest)
    before = Sink(sub, "before")
    ended: list[object] = []
    before.consumer.on_close = ended.append
    await topic.close()
    assert len(ended) == 1  # the consumer attached before is told
    late = BrokerConsumer("late", 0, lambda d: None)
    with pytest.raises(ServiceClosed):  # the Consume door awaited between subscribe and attach
        sub.add_consumer(late, SubscriptionType.Shared)
    assert sub.consumers == [before.consumer]
