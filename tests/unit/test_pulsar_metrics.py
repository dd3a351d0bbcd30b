"""Pulsar's Prometheus metrics from topic stats (broker/prometheus.py): names, labels and
the aggregation per topic or per namespace, as Pulsar's NamespaceStatsAggregator."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from magnetar.broker.prometheus import LeaseSample, TopicSample, pulsar_exposition
from magnetar.broker.stats import PublisherStats, SubscriptionStats, TopicStats
from magnetar.broker.subscription_type import SubscriptionType


def _sub(name: str, backlog: int, consumers: int = 1, unacked: int = 0, blocked: int = 0, out: int = 0) -> SubscriptionStats:
    return SubscriptionStats(
        name=name, type=SubscriptionType.Shared, backlog=backlog, consumers=consumers, unacked=unacked,
        mark_delete_position="1:0", durable=True, blocked_consumers=blocked, consumer_stats=[],
        msg_out_counter=out, bytes_out_counter=out * 10, msg_rate_out=out / 10, msg_throughput_out=out,
        backlog_size=backlog * 10, active_consumer="", dispatch_throttled_time_ms=0,
        dispatch_throttled_msg_events=0, dispatch_throttled_bytes_events=0,
        msg_rate_redeliver=out / 20, message_ack_rate=out / 40,
    )


def _topic(name: str, msgs_in: int, subs: list[SubscriptionStats], producers: int = 1, size: int = 1000) -> TopicStats:
    return TopicStats(
        topic=name, msg_in_counter=msgs_in, bytes_in_counter=msgs_in * 10,
        msg_out_counter=sum(s.msg_out_counter for s in subs), bytes_out_counter=sum(s.bytes_out_counter for s in subs),
        entries=msgs_in, storage_size=size, ledgers=1, msg_rate_in=msgs_in / 10, msg_throughput_in=msgs_in,
        msg_rate_out=sum(s.msg_rate_out for s in subs), msg_throughput_out=sum(s.msg_throughput_out for s in subs),
        backlog_size=max((s.backlog_size for s in subs), default=0),
        publishers=[PublisherStats(f"p{i}", 0, 0, 0, 0.0, 0.0, 0) for i in range(producers)], subscriptions=subs,
    )


SAMPLES = [
    TopicSample(_topic("persistent://t/a/one", 100, [_sub("s1", 40, out=60, unacked=5, blocked=1), _sub("s2", 100)]),
                write_quorum=2, delayed={"s1": 3}),
    TopicSample(_topic("persistent://t/a/two", 10, [_sub("s1", 10, consumers=2)], producers=2, size=500), write_quorum=2),
    TopicSample(_topic("persistent://t/b/three", 7, [], producers=0, size=70), write_quorum=3),
]


def _scrape(text: str) -> dict[tuple[str, frozenset], float]:
    """The exposition text as Prometheus parses it: {(name, labels): value}."""
    out = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name  # every Pulsar topic figure is a gauge, as in Pulsar
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _series(scraped, name):
    return {labels: v for (n, labels), v in scraped.items() if n == name}


def test_topic_level_series_carry_topic_and_subscription_labels():
    scraped = _scrape(pulsar_exposition("c1", SAMPLES, topic_level=True))
    one = frozenset({"cluster": "c1", "namespace": "t/a", "topic": "persistent://t/a/one"}.items())
    assert scraped[("pulsar_in_messages_total", one)] == 100
    assert scraped[("pulsar_msg_backlog", one)] == 140
    assert scraped[("pulsar_producers_count", one)] == 1
    assert scraped[("pulsar_consumers_count", one)] == 2
    assert scraped[("pulsar_subscriptions_count", one)] == 2
    assert scraped[("pulsar_storage_logical_size", one)] == 1000
    assert scraped[("pulsar_storage_size", one)] == 2000  # every copy in bookies
    s1 = one | {("subscription", "s1")}
    assert scraped[("pulsar_subscription_back_log", s1)] == 40
    assert scraped[("pulsar_subscription_delayed", s1)] == 3
    assert scraped[("pulsar_subscription_unacked_messages", s1)] == 5
    assert scraped[("pulsar_subscription_blocked_on_unacked_messages", s1)] == 1
    assert scraped[("pulsar_out_messages_total", s1)] == 60
    assert scraped[("pulsar_subscription_msg_rate_redeliver", s1)] == 3.0
    assert scraped[("pulsar_subscription_msg_ack_rate", s1)] == 1.5
    # Delivered counts are per subscription only (as Pulsar's), so sum() over a topic is right.
    assert sum(_series(scraped, "pulsar_out_messages_total").values()) == 60
    assert not any(n == "pulsar_out_messages_total" and "subscription" not in dict(lbl) for n, lbl in scraped)
    # The namespace has only its topic count at topic level.
    assert _series(scraped, "pulsar_topics_count") == {
        frozenset({"cluster": "c1", "namespace": "t/a"}.items()): 2,
        frozenset({"cluster": "c1", "namespace": "t/b"}.items()): 1,
    }
    assert len(_series(scraped, "pulsar_in_messages_total")) == 3


def test_namespace_level_sums_topics_and_has_no_topic_or_subscription_series():
    scraped = _scrape(pulsar_exposition("c1", SAMPLES, topic_level=False))
    assert not any("topic" in dict(labels) or "subscription" in dict(labels) for _, labels in scraped)
    ns_a = frozenset({"cluster": "c1", "namespace": "t/a"}.items())
    assert scraped[("pulsar_topics_count", ns_a)] == 2
    assert scraped[("pulsar_in_messages_total", ns_a)] == 110
    assert scraped[("pulsar_out_messages_total", ns_a)] == 60
    assert scraped[("pulsar_producers_count", ns_a)] == 3
    assert scraped[("pulsar_consumers_count", ns_a)] == 4
    assert scraped[("pulsar_subscription_delayed", ns_a)] == 3
    assert scraped[("pulsar_storage_size", ns_a)] == 3000
    # Pulsar labels the namespace backlog with the cluster it is kept for.
    assert scraped[("pulsar_msg_backlog", ns_a | {("remote_cluster", "local")})] == 150
    ns_b = frozenset({"cluster": "c1", "namespace": "t/b"}.items())
    assert scraped[("pulsar_storage_size", ns_b)] == 210


def test_broker_sums_and_lease_whatever_the_level():
    for level in (True, False):
        scraped = _scrape(pulsar_exposition("c1", SAMPLES, level, LeaseSample(valid=False, remaining_s=-1.5, lost=2)))
        c = frozenset({("cluster", "c1")})
        assert scraped[("pulsar_broker_topics_count", c)] == 3
        assert scraped[("pulsar_broker_msg_backlog", c)] == 150
        assert scraped[("pulsar_broker_producers_count", c)] == 3
        assert scraped[("pulsar_broker_storage_logical_size", c)] == 1570
        assert scraped[("pulsar_broker_lease_valid", c)] == 0
        assert scraped[("pulsar_broker_lease_remaining_seconds", c)] == -1.5
        assert scraped[("pulsar_broker_lease_lost_total", c)] == 2


def test_a_broker_without_topics_still_reports_zeros():
    scraped = _scrape(pulsar_exposition("c1", [], True, LeaseSample(True, 3.0, 0)))
    c = frozenset({("cluster", "c1")})
    assert scraped[("pulsar_broker_topics_count", c)] == 0
    assert scraped[("pulsar_broker_lease_valid", c)] == 1
    assert not _series(scraped, "pulsar_topics_count")


def test_label_values_are_escaped_and_special_values_written_as_the_text_format_wants():
    sample = TopicSample(_topic('persistent://t/a/we"ird\\name', 1, [_sub("s\nx", 1)]))
    scraped = _scrape(pulsar_exposition('c"1', [sample], True, LeaseSample(False, float("-inf"), 0)))
    t = frozenset({"cluster": 'c"1', "namespace": "t/a", "topic": 'persistent://t/a/we"ird\\name'}.items())
    assert scraped[("pulsar_in_messages_total", t)] == 1
    assert scraped[("pulsar_subscription_back_log", t | {("subscription", "s\nx")})] == 1
    assert scraped[("pulsar_broker_lease_remaining_seconds", frozenset({("cluster", 'c"1')}))] == float("-inf")
