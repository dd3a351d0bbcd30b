"""magnetar.testing.promql: the metric names a PromQL expression reads, and the queries of
the dashboards and alert rules we ship (their names are checked against real scrapes in
tests/integration/test_prometheus_metrics.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from magnetar.testing.promql import dashboard_exprs, metric_names, rule_exprs

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (topic) (rate(pulsar_in_messages_total{cluster=~"$cluster",topic=~"a|b"}[1m]))',
         {"pulsar_in_messages_total"}),
        ("deriv(pulsar_msg_backlog[10m]) > 0 and pulsar_msg_backlog > 10000", {"pulsar_msg_backlog"}),
        ('histogram_quantile(0.99, sum by (le) (rate(x_seconds_bucket{job="a"}[5m])))', {"x_seconds_bucket"}),
        ("count(bookie_SERVER_STATUS == 0) or vector(0)", {"bookie_SERVER_STATUS"}),
        ("a / on (instance) group_left (cluster) b offset 5m", {"a", "b"}),
        ("1 - free_bytes / total_bytes * 1e3", {"free_bytes", "total_bytes"}),
        ('rate(m{l="has {braces} and \\"quotes\\""}[$__rate_interval])', {"m"}),
        ("label_values(pulsar_topics_count{cluster=~\"$cluster\"}, namespace)", {"pulsar_topics_count"}),
        ("max without (instance) (up:recorded:rule)", {"up:recorded:rule"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_dashboard_and_rule_has_queries() -> None:
    dashboards = sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))
    assert [d.name for d in dashboards] == ["auditor.json", "bookies.json", "cluster.json", "topics.json"]
    for path in dashboards:
        exprs = dashboard_exprs(json.loads(path.read_text()))
        assert len(exprs) >= 8, path.name
        assert all(metric_names(e) for e in exprs), path.name
    rules = rule_exprs(yaml.safe_load((REPO / "deploy" / "prometheus" / "magnetar-alerts.yaml").read_text()))
    assert [sorted(metric_names(e)) for e in rules] == [
        ["pulsar_msg_backlog"], ["magnetar_auditor_under_replicated_ledgers"], ["bookie_SERVER_STATUS"],
        ["pulsar_broker_lease_valid"],
    ]
