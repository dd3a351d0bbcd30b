"""The gateway's translation of the broker's topic stats to Pulsar's JSON (gateway/topic_stats.py):
each consumer's and subscription's redelivery and acknowledgement rates, and a partitioned
topic's subscription summed over its partitions."""

from __future__ import annotations

from magnetar.gateway.topic_stats import partitioned_stats, topic_stats
from magnetar.proto.v1 import broker_pb2 as pb


def _partition(name: str, redeliver: float, ack: float) -> pb.TopicStats:
    consumer = pb.ConsumerStats(consumer_name=f"c-{name}", msg_rate_redeliver=redeliver, message_ack_rate=ack)
    sub = pb.SubscriptionStats(name="s", type=pb.SHARED, consumers=1, consumer_stats=[consumer],
                               msg_rate_redeliver=redeliver, message_ack_rate=ack)  # fmt: skip
    return pb.TopicStats(topic=name, subscriptions=[sub])


def test_rates_of_consumers_and_subscriptions_in_pulsars_names():
    stats = topic_stats(_partition("t", 1.5, 40.0)).model_dump()
    sub = stats["subscriptions"]["s"]
    assert (sub["msgRateRedeliver"], sub["messageAckRate"]) == (1.5, 40.0)
    assert [(c["consumerName"], c["msgRateRedeliver"], c["messageAckRate"]) for c in sub["consumers"]] == [("c-t", 1.5, 40.0)]


def test_a_partitioned_topics_subscription_sums_the_rates_of_its_partitions():
    names = ["t-partition-0", "t-partition-1"]
    total = partitioned_stats(names, [_partition(names[0], 1.0, 10.0), _partition(names[1], 2.5, 5.0)], per_partition=False)
    sub = total.subscriptions["s"]
    assert (sub.msgRateRedeliver, sub.messageAckRate) == (3.5, 15.0)
    assert len(sub.consumers) == 2
