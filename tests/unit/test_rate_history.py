"""The gateway's history of the cluster's rates (the console's overview charts)."""

from __future__ import annotations

from typing import Any

from magnetar.gateway.rate_history import ClusterRateHistory


class Brokers:
    """Load reports as brokers answer GetLiveLoadReport; None: no answer."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any] | None] = {}

    async def reports(self) -> dict[str, dict[str, Any] | None]:
        return dict(self.docs)


def report(broker: str, rate_in: float, rate_out: float) -> dict[str, Any]:
    return {"brokerId": broker, "msgRateIn": rate_in, "msgRateOut": rate_out, "msgThroughputIn": rate_in * 100,
            "msgThroughputOut": rate_out * 100, "numBundles": 4, "cpu": {"usage": 5.0, "limit": 100.0},
            "lastStats": {"huge": "not kept"}}


async def test_samples_sum_the_brokers_that_answered_and_keep_each_brokers_load():
    clock = [1_000.0]
    brokers = Brokers()
    history = ClusterRateHistory(brokers.reports, interval_s=10, clock=lambda: clock[0])
    brokers.docs = {"b1:1": report("b1:1", 10, 4), "b2:1": report("b2:1", 2.5, 1), "b3:1": None}
    sample = await history.sample()
    assert (sample.timestamp, sample.msgRateIn, sample.msgRateOut, sample.msgThroughputIn, sample.brokers) == (
        1_000_000, 12.5, 5, 1250, 2)
    doc = history.doc()
    assert doc["intervalSeconds"] == 10 and doc["windowSeconds"] == 900
    assert doc["samples"] == [{"timestamp": 1_000_000, "msgRateIn": 12.5, "msgRateOut": 5.0, "msgThroughputIn": 1250.0,
                               "msgThroughputOut": 500.0, "brokers": 2}]
    assert sorted(doc["brokers"]) == ["b1:1", "b2:1"]
    assert doc["brokers"]["b1:1"]["numBundles"] == 4 and "lastStats" not in doc["brokers"]["b1:1"]


async def test_only_the_last_15_minutes_are_kept():
    clock = [0.0]
    brokers = Brokers()
    brokers.docs = {"b1:1": report("b1:1", 1, 1)}
    history = ClusterRateHistory(brokers.reports, interval_s=60, clock=lambda: clock[0])
    for minute in range(30):
        clock[0] = minute * 60.0
        brokers.docs = {"b1:1": report("b1:1", minute, 0)}
        await history.sample()
    samples = history.doc()["samples"]
    assert [s["msgRateIn"] for s in samples] == [float(m) for m in range(14, 30)]
    assert samples[-1]["timestamp"] - samples[0]["timestamp"] == 15 * 60 * 1000


async def test_malformed_figures_count_as_zero():
    brokers = Brokers()
    brokers.docs = {"b1:1": {"msgRateIn": "many", "msgRateOut": True}}
    sample = await ClusterRateHistory(brokers.reports, interval_s=1, clock=lambda: 5.0).sample()
    assert (sample.msgRateIn, sample.msgRateOut, sample.brokers) == (0.0, 0.0, 1)
