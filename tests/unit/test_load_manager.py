"""The load manager's decisions over given reports (docs/load-balancing.md): where an
unowned bundle goes, which bundles an overloaded broker sheds, which bundles are hot, when
a report is written; and a broker's lookup placing a bundle through its peers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.loadbalance.manager import LoadManager
from magnetar.broker.loadbalance.placement import (
    message_rate_score,
    resource_usage_score,
    select_broker,
)
from magnetar.broker.loadbalance.report import (
    BundleStats,
    LoadReport,
    ResourceUsage,
    ResourceWeights,
)
from magnetar.broker.loadbalance.shedder import (
    OverloadShedder,
    ShedderInput,
    ShedderSettings,
    ThresholdShedder,
    Unload,
)
from magnetar.broker.loadbalance.splitter import SplitLimits, hot_bundles
from magnetar.broker.service import BrokerService
from magnetar.common.errors import NotConnected

MB = 1024 * 1024


def bundle(rate: float = 0.0, mbytes: float = 0.0, topics: int = 1, sessions: int = 0) -> BundleStats:
    return BundleStats(rate / 2, rate / 2, mbytes * MB / 2, mbytes * MB / 2, topics, sessions, 0)


def report(broker: str, cpu: float = 0.0, bundles: dict[str, BundleStats] | None = None, at: int = 1) -> LoadReport:
    return LoadReport(broker, cpu=ResourceUsage(cpu, 100.0), bundles=bundles or {}, last_update_ms=at)


# -- placement ----------------------------------------------------------------------------
def test_placement_takes_the_broker_with_the_lowest_message_rate() -> None:
    reports = {
        "a:1": report("a:1", bundles={"t/n/x": bundle(500)}),
        "b:1": report("b:1", bundles={"t/n/y": bundle(20)}),
        "c:1": report("c:1", bundles={"t/n/z": bundle(300)}),
    }
    chosen = select_broker(reports, reports, preferred="a:1", score=message_rate_score, overloaded_percent=85)
    assert chosen == "b:1"


def test_placement_ties_go_to_the_broker_asked_and_a_broker_without_report_counts_as_idle() -> None:
    reports = {"a:1": report("a:1"), "b:1": report("b:1")}
    assert select_broker(["a:1", "b:1"], reports, preferred="b:1", score=message_rate_score, overloaded_percent=85) == "b:1"
    busy = {"a:1": report("a:1", bundles={"t/n/x": bundle(10)})}
    assert select_broker(["a:1", "new:1"], busy, preferred="a:1", score=message_rate_score, overloaded_percent=85) == "new:1"


def test_placement_avoids_an_overloaded_broker_unless_all_are() -> None:
    reports = {"a:1": report("a:1", cpu=90), "b:1": report("b:1", cpu=10, bundles={"t/n/x": bundle(1000)})}
    assert select_broker(reports, reports, preferred="a:1", score=message_rate_score, overloaded_percent=85) == "b:1"
    hot = {"a:1": report("a:1", cpu=90), "b:1": report("b:1", cpu=95, bundles={"t/n/x": bundle(1000)})}
    assert select_broker(hot, hot, preferred="b:1", score=message_rate_score, overloaded_percent=85) == "a:1"


def test_placement_counts_bundles_placed_since_the_last_report() -> None:
    reports = {"a:1": report("a:1", bundles={"t/n/x": bundle(100)}), "b:1": report("b:1")}
    placed = {"b:1": [bundle(150)]}
    chosen = select_broker(reports, reports, preferred="b:1", score=message_rate_score, overloaded_percent=85, placed=placed)
    assert chosen == "a:1"


def test_least_resource_usage_placement() -> None:
    reports = {"a:1": report("a:1", cpu=30), "b:1": report("b:1", cpu=60)}
    score = resource_usage_score(ResourceWeights())
    assert select_broker(reports, reports, preferred="b:1", score=score, overloaded_percent=85) == "a:1"


# -- shedding ------------------------------------------------------------------------------
SKEWED = {
    "a:1": report("a:1", cpu=70, bundles={"t/n/1": bundle(mbytes=40), "t/n/2": bundle(mbytes=30), "t/n/3": bundle(mbytes=5)}),
    "b:1": report("b:1", cpu=10, bundles={"t/n/4": bundle(mbytes=1)}),
    "c:1": report("c:1", cpu=10),
}


def settings(**kw: Any) -> ShedderSettings:
    return ShedderSettings(**{"history_fraction": 0.0, "min_throughput_bytes": 0.0, **kw})


def test_threshold_shedder_sheds_the_busiest_bundles_of_a_broker_over_the_average() -> None:
    # average 30; a:1 is 40 points over it: shed (70 - 30 - 10 + 5)% = 35% of its 75 MB/s, busiest first.
    unloads = ThresholdShedder(settings()).find(ShedderInput(SKEWED))
    assert unloads == [Unload("a:1", "t/n/1")]


def test_threshold_shedder_leaves_alone_a_bundle_in_its_grace_period_and_an_unsettled_broker() -> None:
    assert ThresholdShedder(settings()).find(ShedderInput(SKEWED, recently_unloaded={"t/n/1"})) == [Unload("a:1", "t/n/2")]
    assert ThresholdShedder(settings()).find(ShedderInput(SKEWED, unsettled={"a:1"})) == []


def test_threshold_shedder_keeps_a_brokers_only_bundle_and_small_offloads() -> None:
    alone = {"a:1": report("a:1", cpu=90, bundles={"t/n/1": bundle(mbytes=50)}), "b:1": report("b:1", cpu=0)}
    assert ThresholdShedder(settings()).find(ShedderInput(alone)) == []
    assert ThresholdShedder(settings(min_throughput_bytes=100 * MB)).find(ShedderInput(SKEWED)) == []


def test_threshold_shedder_within_the_threshold_sheds_nothing() -> None:
    even = {b: report(b, cpu=c, bundles={f"t/n/{b}{i}": bundle(mbytes=1) for i in range(2)})
            for b, c in (("a:1", 35), ("b:1", 30), ("c:1", 25))}
    assert ThresholdShedder(settings()).find(ShedderInput(even)) == []


def test_threshold_shedder_smooths_usage_over_rounds() -> None:
    shedder = ThresholdShedder(settings(history_fraction=0.9))
    calm = {"a:1": report("a:1", cpu=20, bundles={"t/n/1": bundle(mbytes=1), "t/n/2": bundle(mbytes=1)}),
            "b:1": report("b:1", cpu=20)}
    assert shedder.find(ShedderInput(calm)) == []
    spike = {"a:1": report("a:1", cpu=80, bundles=calm["a:1"].bundles), "b:1": calm["b:1"]}
    # 0.9 × 20 + 0.1 × 80 = 26: 3 points over the average of 23, within the threshold.
    assert shedder.find(ShedderInput(spike)) == []
    assert shedder.usage["a:1"] == pytest.approx(26.0)


def test_overload_shedder_sheds_one_bundle_of_a_broker_over_the_threshold() -> None:
    reports = {**SKEWED, "a:1": LoadReport("a:1", cpu=ResourceUsage(90, 100), bundles=SKEWED["a:1"].bundles)}
    assert OverloadShedder(settings()).find(ShedderInput(reports)) == [Unload("a:1", "t/n/1")]
    assert OverloadShedder(settings()).find(ShedderInput(SKEWED)) == []  # 70% is not overloaded


# -- hot bundles --------------------------------------------------------------------------
def test_hot_bundles_by_topics_sessions_rate_and_bandwidth() -> None:
    reports = [
        report("a:1", bundles={
            "t/n/0x0_0x1": bundle(topics=1001), "t/n/0x1_0x2": bundle(topics=5, sessions=1001),
            "t/n/0x2_0x3": bundle(rate=30001, topics=2), "t/n/0x3_0x4": bundle(mbytes=101, topics=2),
            "t/n/0x4_0x5": bundle(rate=99999, topics=1),  # one topic: cannot be split
            "t/n/0x5_0x6": bundle(rate=10, topics=900),
        }),
    ]
    assert hot_bundles(reports, SplitLimits()) == [("t/n", "0x0_0x1"), ("t/n", "0x1_0x2"), ("t/n", "0x2_0x3"), ("t/n", "0x3_0x4")]
    # At most max_bundles per namespace: 6 bundles now, room for 2 more.
    assert hot_bundles(reports, SplitLimits(max_bundles=8)) == [("t/n", "0x0_0x1"), ("t/n", "0x1_0x2")]


# -- reports ------------------------------------------------------------------------------
def test_report_document_round_trip_in_pulsars_shape() -> None:
    r = LoadReport("a:1", ResourceUsage(50, 200), ResourceUsage(100, 1000), ResourceUsage(10, 100), ResourceUsage(5, 100),
                   {"t/n/x": BundleStats(1, 2, 3, 4, 5, 6, 7)}, "pulsar://a:6650", 1234)
    doc = r.doc()
    assert doc["msgRateIn"] == 1 and doc["numTopics"] == 5 and doc["numProducers"] == 6 and doc["numConsumers"] == 7
    assert doc["bundles"] == ["t/n/x"] and doc["cpu"] == {"usage": 50, "limit": 200}
    assert doc["maxResourceUsage"] == pytest.approx(0.25)
    assert LoadReport.of("a:1", doc) == r
    assert LoadReport.of("a:1", {"cpu": "junk", "lastStats": []}) == LoadReport("a:1")


class FakeStore:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    async def write(self, broker_id: str, doc: dict[str, Any]) -> None:
        self.written.append(doc)


def manager(measure: Any, clock: Any = None, **config: Any) -> LoadManager:
    lm = LoadManager(BrokerConfig(**config), "me:1", None, measure=measure,  # type: ignore[arg-type]
                     unload_local=None, clock=clock or (lambda: 0.0))  # type: ignore[arg-type]
    lm.store = FakeStore()  # type: ignore[assignment]
    return lm


def test_report_written_when_changed_over_the_threshold_or_too_old() -> None:
    now = [0.0]
    current = [report("me:1", cpu=10)]
    lm = manager(lambda: current[0], lambda: now[0], load_balancer_report_update_max_interval_s=100)

    async def main() -> list[bool]:
        out = [await lm.write_report()]  # first: always
        current[0] = report("me:1", cpu=15)  # 5 points: under 10
        out.append(await lm.write_report())
        current[0] = report("me:1", cpu=25)  # 15 points over the last written
        out.append(await lm.write_report())
        current[0] = report("me:1", cpu=25, bundles={"t/n/x": bundle(100)})  # a rate from 0
        out.append(await lm.write_report())
        now[0] = 100.0  # unchanged, but old
        out.append(await lm.write_report())
        return out

    assert asyncio.run(main()) == [True, False, True, True, True]
    assert [d["cpu"]["usage"] for d in lm.store.written] == [10, 25, 25, 25]  # type: ignore[attr-defined]


class FakePeers:
    def __init__(self, fail: bool = False) -> None:
        self.taken: list[tuple[str, str]] = []
        self.unloaded: list[tuple[str, str, str]] = []
        self.fail = fail

    async def take_bundle(self, broker_id: str, topic: str) -> str:
        if self.fail:
            raise NotConnected(f"broker {broker_id} does not answer")
        self.taken.append((broker_id, topic))
        return broker_id

    async def unload_bundle(self, broker_id: str, namespace: str, bundle: str) -> None:
        self.unloaded.append((broker_id, namespace, bundle))

    async def close(self) -> None:
        pass


def test_shed_round_asks_the_owner_and_keeps_the_bundle_in_its_grace_period() -> None:
    now = [0.0]
    lm = manager(lambda: report("me:1"), lambda: now[0], load_balancer_history_resource_percentage=0.0,
                 load_balancer_bundle_unload_min_throughput_threshold=0.0, load_balancer_shedding_grace_period_s=60)
    peers = FakePeers()
    lm.peers = peers
    lm.reports = dict(SKEWED)

    async def main() -> None:
        assert await lm.shed_once() == [Unload("a:1", "t/n/1")]
        # a:1 has not reported since: nothing more from it, whatever its old report says.
        assert await lm.shed_once() == []
        lm.reports["a:1"] = report("a:1", cpu=70, bundles=SKEWED["a:1"].bundles, at=2**62)  # reported anew
        now[0] = 30.0
        assert await lm.shed_once() == [Unload("a:1", "t/n/2")]  # t/n/1 still in its grace period

    asyncio.run(main())
    assert peers.unloaded == [("a:1", "t/n", "1"), ("a:1", "t/n", "2")]


# -- a broker's lookup places the bundle --------------------------------------------------
class Ownership:
    def __init__(self) -> None:
        self.owners: dict[tuple[str, str, str], str] = {}

    async def owner(self, tenant: str, namespace: str, bundle: str) -> str | None:
        return self.owners.get((tenant, namespace, bundle))

    async def try_acquire(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> str:
        return self.owners.setdefault((tenant, namespace, bundle), broker_id)

    async def still_owns(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> bool:
        return self.owners.get((tenant, namespace, bundle)) == broker_id


class Namespaces:
    """Policies documents storing no bundles (bundles_per_namespace applies)."""

    async def watch_policies(self, tenant: str, namespace: str, changed: object) -> dict[str, object]:
        return {}


def service(peers: FakePeers) -> BrokerService:
    svc = BrokerService(
        BrokerConfig(bundles_per_namespace=1), "me:1", None,  # type: ignore[arg-type]
        ledgers=None, ml_store=None, tenants=Namespaces(), ownership=Ownership(), load_peers=peers,  # type: ignore[arg-type]
    )
    svc.lease.renewed(svc.lease.clock() + 3600)
    svc._lapsed = False
    assert svc.load_manager is not None
    svc.load_manager.reports = {
        "me:1": report("me:1", bundles={"public/busy/0x00000000_0xffffffff": bundle(900)}),
        "idle:1": report("idle:1"),
    }
    return svc


TOPIC = "persistent://public/default/t"


def test_lookup_of_an_unowned_bundle_places_it_on_the_least_loaded_broker() -> None:
    peers = FakePeers()
    svc = service(peers)
    assert asyncio.run(svc.lookup(TOPIC)) == "idle:1"
    assert peers.taken == [("idle:1", TOPIC)]


def test_authoritative_lookup_takes_the_bundle_here() -> None:
    peers = FakePeers()
    svc = service(peers)
    assert asyncio.run(svc.lookup(TOPIC, authoritative=True)) == "me:1"
    assert peers.taken == []


def test_a_chosen_broker_that_does_not_answer_leaves_the_bundle_here() -> None:
    svc = service(FakePeers(fail=True))
    assert asyncio.run(svc.lookup(TOPIC)) == "me:1"
    assert svc.load_manager is not None and "idle:1" not in svc.load_manager.reports


class FakeSplitter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    async def split_bundle(self, namespace: str, bundle: str, algorithm: str) -> None:
        if bundle == "0xbad_0xbad":
            raise NotConnected("the owner does not answer")
        self.calls.append((namespace, bundle, algorithm))


def test_leader_has_the_hot_bundles_split_with_the_configured_algorithm() -> None:
    lm = manager(lambda: report("me:1"), load_balancer_namespace_bundle_max_topics=10,
                 default_namespace_bundle_split_algorithm="topic_count_equally_divide")
    splitter = FakeSplitter()
    lm.splitter = splitter
    lm.reports = {
        "a:1": report("a:1", bundles={"t/n/0x0_0x8": bundle(topics=11), "t/n/0x8_0xf": bundle(topics=10)}),
        "b:1": report("b:1", bundles={"t/m/0xbad_0xbad": bundle(topics=50), "t/m/0x1_0x2": bundle(topics=12)}),
    }
    done = asyncio.run(lm.split_once())
    assert done == [("t/n", "0x0_0x8"), ("t/m", "0x1_0x2")]  # the one that failed is left for the next round
    assert splitter.calls == [("t/n", "0x0_0x8", "topic_count_equally_divide"), ("t/m", "0x1_0x2", "topic_count_equally_divide")]
    assert lm.splits == 2
