"""The broker's ``/metrics``: Pulsar's metrics (:mod:`magnetar.broker.prometheus`) made
from the served topics' stats when Prometheus scrapes.

The scrape is served on a thread of its own (``common/metrics.py``), while the topics
live on the broker's event loop; their stats are read on the loop (a few hundred topics
per loop turn, so a scrape of 10,000 topics never holds the loop for long) and written
as text on the scrape's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import TYPE_CHECKING, Any

from magnetar.broker.prometheus import LeaseSample, TopicSample, pulsar_exposition

if TYPE_CHECKING:
    from magnetar.broker.service import BrokerService

log = logging.getLogger(__name__)

TOPICS_PER_TURN = 200
"""Topics whose stats are read in one turn of the event loop."""

SCRAPE_TIMEOUT_S = 10.0


def sample_topic(topic: Any) -> TopicSample:
    """One served topic's sample (call on the event loop)."""
    delayed = {}
    for name, sub in topic.subscriptions.items():
        index = getattr(sub.dispatcher, "delayed", None)
        if index:
            delayed[name] = len(index)
    ml = getattr(topic, "ml", None)
    quorum = ml.config.write_quorum if ml is not None else 1  # non-persistent: nothing stored
    return TopicSample(topic.stats(), quorum, delayed)


async def sample_service(service: BrokerService) -> tuple[list[TopicSample], LeaseSample]:
    """Every served topic's sample and the lease, read on the loop a few topics at a time."""
    topics = [*service.topics.values(), *service.nonpersistent.values()]
    samples = []
    for i, topic in enumerate(topics):
        if i and i % TOPICS_PER_TURN == 0:
            await asyncio.sleep(0)
        try:
            samples.append(sample_topic(topic))
        except Exception:  # a bug in one topic's stats must not fail every scrape
            log.exception("the stats of %s for /metrics failed", getattr(topic, "name", topic))
    lease = LeaseSample(valid=service.lease_held, remaining_s=service.lease.remaining_s(), lost=service.lease_lapses)
    return samples, lease


class BrokerMetrics:
    """The text the broker's ``/metrics`` adds to the process's registry."""

    def __init__(self, service: BrokerService, loop: asyncio.AbstractEventLoop, topic_level: bool) -> None:
        self.service = service
        self.loop = loop
        self.topic_level = topic_level

    def exposition(self) -> str:
        """Pulsar's metrics now (call from any thread but the loop's); "" when the loop
        does not answer."""
        coro = sample_service(self.service)
        try:
            try:
                future = asyncio.run_coroutine_threadsafe(coro, self.loop)
            except RuntimeError:  # the loop is closed
                coro.close()
                raise
            try:
                topics, lease = future.result(SCRAPE_TIMEOUT_S)
            finally:
                future.cancel()  # no-op when done; stops one that timed out
        except (RuntimeError, concurrent.futures.TimeoutError, concurrent.futures.CancelledError) as exc:
            # Stopping, or a loop too busy to answer: this scrape has no topic figures.
            log.warning("no topic metrics for this scrape: %r", exc)
            return ""
        return pulsar_exposition(self.service.config.cluster_name, topics, self.topic_level, lease)
