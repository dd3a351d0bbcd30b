"""Namespace bundles with stored boundaries and their split: the pure boundaries and
split algorithms (common/bundles.py), the broker's watched cache, its split of an owned
bundle and its lookup over boundaries a split has changed (broker/namespace_bundles.py,
BrokerService), over stand-ins for ZooKeeper's ownership and policies documents."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespace_bundles import BUNDLES_KEY
from magnetar.broker.service import BrokerService
from magnetar.common.bundles import (
    NamespaceBundles,
    SplitAlgorithm,
    bundle_of,
    bundle_ranges,
    bundles_of_names,
    split_positions,
    topic_hash,
)
from magnetar.common.errors import InvalidArgument, NamespaceNotFound, NotOwner, PreconditionFailed
from magnetar.common.names import NamespaceName

FULL = "0x00000000_0xffffffff"


# -- boundaries and bundle_of ---------------------------------------------------------------
def test_equal_bundles_are_pulsars_ranges_and_their_document_is_bundles_data() -> None:
    four = NamespaceBundles.equal(4)
    assert four.ranges == bundle_ranges(4)
    assert four.to_document() == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"], "numBundles": 4}
    assert NamespaceBundles.from_document(four.to_document(), 16) == four
    assert NamespaceBundles.from_document(None, 16) == NamespaceBundles.equal(16)  # stored before boundaries were


def test_bundle_of_follows_uneven_boundaries() -> None:
    bundles = NamespaceBundles.of([0, 0x10, 0x80000000, 0xFFFFFFFF])
    for i in range(300):
        topic = f"t/ns/topic-{i}"
        h = topic_hash(topic)
        low, high = (int(x, 16) for x in bundle_of(topic, bundles).split("_"))
        assert low <= h < high or (high == 0xFFFFFFFF and h == high)
    # Equal boundaries give what the count gives.
    equal = NamespaceBundles.equal(7)
    assert all(bundle_of(f"x-{i}", equal) == bundle_of(f"x-{i}", 7) for i in range(300))
    assert bundles_of_names(reversed(bundles.ranges)) == bundles


@pytest.mark.parametrize("bad", [
    [], [0], [1, 0xFFFFFFFF], [0, 0xFFFFFFFE], [0, 5, 5, 0xFFFFFFFF], [0, 9, 5, 0xFFFFFFFF],
    [0, -1, 0xFFFFFFFF], [0, 2**32], ["0x00000000", "zz", "0xffffffff"], [0, True, 0xFFFFFFFF],
])
def test_bad_boundaries_are_refused(bad: list[object]) -> None:
    with pytest.raises(InvalidArgument):
        NamespaceBundles.of(bad)


def test_split_inserts_positions_and_refuses_a_missing_bundle_or_outside_positions() -> None:
    four = NamespaceBundles.equal(4)
    split = four.split("0x40000000_0x80000000", [0x60000000])
    assert split.ranges == ["0x00000000_0x40000000", "0x40000000_0x60000000", "0x60000000_0x80000000",
                            "0x80000000_0xc0000000", "0xc0000000_0xffffffff"]
    with pytest.raises(PreconditionFailed, match="Invalid bundle range"):
        split.split("0x40000000_0x80000000", [0x50000000])  # split already
    with pytest.raises(PreconditionFailed, match="Invalid bundle range"):
        four.split("nonsense", [1])
    for outside in (0x40000000, 0x80000000, 0x10, 0x90000000):
        with pytest.raises(InvalidArgument, match="strictly inside"):
            four.split("0x40000000_0x80000000", [outside])


# -- the split algorithms ---------------------------------------------------------------
def test_range_equally_divide_splits_at_the_middle() -> None:
    four = NamespaceBundles.equal(4)
    assert split_positions(four, "0xc0000000_0xffffffff", SplitAlgorithm.RANGE_EQUALLY_DIVIDE) == [0xDFFFFFFF]
    tiny = NamespaceBundles.of([0, 1, 0xFFFFFFFF])
    with pytest.raises(PreconditionFailed, match="one hash"):
        split_positions(tiny, "0x00000000_0x00000001", SplitAlgorithm.RANGE_EQUALLY_DIVIDE)


def test_topic_count_equally_divide_puts_half_of_the_topics_on_each_side() -> None:
    one = NamespaceBundles.equal(1)
    topics = [f"persistent://t/ns/topic-{i}" for i in range(41)]
    [at] = split_positions(one, FULL, SplitAlgorithm.TOPIC_COUNT_EQUALLY_DIVIDE, topics)
    halves = Counter(bundle_of(t, one.split(FULL, [at])) for t in topics)
    assert sorted(halves.values()) == [20, 21]
    with pytest.raises(PreconditionFailed, match="two or more"):
        split_positions(one, FULL, SplitAlgorithm.TOPIC_COUNT_EQUALLY_DIVIDE, topics[:1])


def test_specified_positions_divide_takes_the_positions_given_and_only_there() -> None:
    four = NamespaceBundles.equal(4)
    assert split_positions(four, "0x00000000_0x40000000", SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE,
                           positions=["0x30000000", 0x10000000, 0x10000000]) == [0x10000000, 0x30000000]
    with pytest.raises(InvalidArgument, match="needs the split boundaries"):
        split_positions(four, "0x00000000_0x40000000", SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE)
    with pytest.raises(InvalidArgument, match="strictly inside"):
        split_positions(four, "0x00000000_0x40000000", SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE, positions=[0x50000000])
    with pytest.raises(InvalidArgument, match="only taken by"):
        split_positions(four, "0x00000000_0x40000000", SplitAlgorithm.RANGE_EQUALLY_DIVIDE, positions=[0x10])
    with pytest.raises(InvalidArgument, match="Unsupported split algorithm"):
        SplitAlgorithm.parse("flow_or_qps_equally_divide")
    assert SplitAlgorithm.parse("") is SplitAlgorithm.RANGE_EQUALLY_DIVIDE


# -- stand-ins for ZooKeeper ------------------------------------------------------------
class Ownership:
    """Bundle ownership znodes, shared by the brokers of a test."""

    def __init__(self) -> None:
        self.owners: dict[tuple[str, str, str], str] = {}
        self.fail_acquire: set[str] = set()

    async def owner(self, tenant: str, namespace: str, bundle: str) -> str | None:
        await asyncio.sleep(0)
        return self.owners.get((tenant, namespace, bundle))

    async def try_acquire(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> str:
        await asyncio.sleep(0)
        if bundle in self.fail_acquire:
            return self.owners.setdefault((tenant, namespace, bundle), "thief:9")
        return self.owners.setdefault((tenant, namespace, bundle), broker_id)

    async def still_owns(self, tenant: str, namespace: str, bundle: str, broker_id: str) -> bool:
        return self.owners.get((tenant, namespace, bundle)) == broker_id

    async def release(self, tenant: str, namespace: str, bundle: str) -> None:
        self.owners.pop((tenant, namespace, bundle), None)


class Namespaces:
    """Namespaces' policies documents with data watches and compare-and-set updates."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.watches: dict[str, list[Callable[[], None]]] = {}
        self.reads = 0
        self.writes = 0

    async def watch_policies(self, tenant: str, namespace: str, changed: Callable[[], None]) -> dict[str, Any]:
        self.reads += 1
        key = f"{tenant}/{namespace}"
        if key not in self.docs:
            raise NamespaceNotFound(f"namespace {key} does not exist")
        self.watches.setdefault(key, []).append(changed)
        doc = copy.deepcopy(self.docs[key])
        await asyncio.sleep(0)  # the answer travels back: a change may come first
        await asyncio.sleep(0)
        return doc

    async def get_policies(self, tenant: str, namespace: str) -> dict[str, Any]:
        key = f"{tenant}/{namespace}"
        if key not in self.docs:
            raise NamespaceNotFound(f"namespace {key} does not exist")
        return copy.deepcopy(self.docs[key])

    async def update_policies(
        self, tenant: str, namespace: str, fn: Callable[[dict[str, Any]], Mapping[str, Any]],
    ) -> dict[str, Any]:
        key = f"{tenant}/{namespace}"
        if key not in self.docs:
            raise NamespaceNotFound(f"namespace {key} does not exist")
        updated = dict(fn(copy.deepcopy(self.docs[key])))
        self.put(key, updated)
        return updated

    def put(self, key: str, doc: dict[str, Any]) -> None:
        self.writes += 1
        self.docs[key] = doc
        for fire in self.watches.pop(key, []):
            asyncio.get_running_loop().call_soon(fire)

    async def list_partitioned_topics(self, tenant: str, namespace: str) -> list[str]:
        return []


class Topics:
    """The managed ledgers of a namespace (what list_topic_partitions reads)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    async def list_topics(self, tenant: str, namespace: str) -> list[str]:
        return [n.rsplit("/", 1)[1] for n in self.names]


def broker(broker_id: str, ownership: Ownership, namespaces: Namespaces, topics: list[str] = (),  # type: ignore[assignment]
           **config: Any) -> BrokerService:
    svc = BrokerService(
        BrokerConfig(bundles_per_namespace=1, **config), broker_id, None,  # type: ignore[arg-type]
        ledgers=None, ml_store=Topics(list(topics)), tenants=namespaces, ownership=ownership,  # type: ignore[arg-type]
    )
    svc.lease.renewed(svc.lease.clock() + 3600)  # serving: ZooKeeper "answered"
    svc._lapsed = False
    return svc


NS = NamespaceName("t", "ns")


def stored(namespaces: Namespaces) -> NamespaceBundles:
    return NamespaceBundles.from_document(namespaces.docs[str(NS)].get(BUNDLES_KEY), 1)


# -- the watched cache ------------------------------------------------------------------
async def test_bundles_are_read_once_and_again_only_after_a_change() -> None:
    namespaces = Namespaces()
    namespaces.docs[str(NS)] = {}
    svc = broker("a:1", Ownership(), namespaces)
    got = await asyncio.gather(*(svc.bundles_of(str(NS)) for _ in range(50)))
    assert got == [[FULL]] * 50 and namespaces.reads == 1
    assert await svc.bundles_of(str(NS)) == [FULL] and namespaces.reads == 1
    namespaces.put(str(NS), {BUNDLES_KEY: NamespaceBundles.equal(2).to_document()})
    await asyncio.sleep(0)  # the watch fires on the loop
    assert await svc.bundles_of(str(NS)) == bundle_ranges(2) and namespaces.reads == 2
    await svc.bundles.close()


async def test_a_read_overtaken_by_a_change_is_not_kept() -> None:
    namespaces = Namespaces()
    namespaces.docs[str(NS)] = {}
    svc = broker("a:1", Ownership(), namespaces)
    reading = asyncio.ensure_future(svc.bundles_data(str(NS)))
    await asyncio.sleep(0)  # the read is under way (its watch set) ...
    await asyncio.sleep(0)
    assert namespaces.watches
    namespaces.put(str(NS), {BUNDLES_KEY: NamespaceBundles.equal(2).to_document()})  # ... and overtaken
    assert await reading == NamespaceBundles.equal(1)  # the answer it had
    assert svc.bundles.cached(NS) is None
    assert await svc.bundles_of(str(NS)) == bundle_ranges(2)
    await svc.bundles.close()


# -- split ------------------------------------------------------------------------------------
async def test_split_on_the_owner_owns_both_halves_writes_the_boundaries_and_keeps_its_topics() -> None:
    ownership, namespaces = Ownership(), Namespaces()
    namespaces.docs[str(NS)] = {"message_ttl_in_seconds": 5}
    topics = [f"persistent://t/ns/topic-{i}" for i in range(9)]
    a = broker("a:1", ownership, namespaces, topics)
    assert await a.lookup(topics[0]) == "a:1"
    a.topics.update({t: object() for t in topics})  # type: ignore[misc]  # served: must stay so
    halves = await a.split_bundle(str(NS), FULL, "topic_count_equally_divide")
    assert stored(namespaces).ranges == halves and len(halves) == 2
    assert namespaces.docs[str(NS)]["message_ttl_in_seconds"] == 5  # the other policies kept
    assert {b: o for (_, _, b), o in ownership.owners.items()} == {h: "a:1" for h in halves}  # the old one released
    assert sorted(Counter(bundle_of(t, stored(namespaces)) for t in topics).values()) == [4, 5]
    assert set(a.topics) == set(topics)
    assert {await a.lookup(t) for t in topics} == {"a:1"}  # owned: no ZooKeeper conversation
    await a.bundles.close()


async def test_another_broker_follows_the_split_through_its_watch_and_its_stale_lookup() -> None:
    ownership, namespaces = Ownership(), Namespaces()
    namespaces.docs[str(NS)] = {}
    topic = "persistent://t/ns/orders"
    a, b = broker("a:1", ownership, namespaces), broker("b:2", ownership, namespaces)
    assert await a.lookup(topic) == "a:1"
    assert await b.lookup(topic) == "a:1"
    assert await b.bundles_of(str(NS)) == [FULL]
    # b's boundaries are behind while a splits (its watch not yet heard) ...
    b.bundles.put(NS, NamespaceBundles.equal(1))
    await a.split_bundle(str(NS), FULL)
    b.bundles.put(NS, NamespaceBundles.equal(1))
    # ... the old bundle is unowned now: b takes it, sees it is gone, and asks again.
    assert await b.lookup(topic) == "a:1"
    assert (await b.bundles_data(str(NS))) == stored(namespaces)
    assert all(bundle != FULL for (_, _, bundle) in ownership.owners)
    # Through the watch: a second split on a is seen by b with no put.
    await a.split_bundle(str(NS), stored(namespaces).ranges[0])
    await asyncio.sleep(0)
    assert await b.bundles_of(str(NS)) == stored(namespaces).ranges and len(stored(namespaces).ranges) == 3
    await a.bundles.close()
    await b.bundles.close()


async def test_split_elsewhere_or_of_a_missing_bundle_or_past_the_limit_changes_nothing() -> None:
    ownership, namespaces = Ownership(), Namespaces()
    namespaces.docs[str(NS)] = {BUNDLES_KEY: NamespaceBundles.equal(2).to_document()}
    a = broker("a:1", ownership, namespaces, load_balancer_namespace_maximum_bundles=2)
    b = broker("b:2", ownership, namespaces)
    low, high = bundle_ranges(2)
    ownership.owners[("t", "ns", low)] = "a:1"
    a._owned.add(("t", "ns", low))
    before = (copy.deepcopy(namespaces.docs), dict(ownership.owners), namespaces.writes)
    with pytest.raises(NotOwner, match="owned by a:1"):
        await b.split_bundle(str(NS), low)
    with pytest.raises(PreconditionFailed, match="Invalid bundle range"):
        await a.split_bundle(str(NS), "0x00000000_0x00000010")
    with pytest.raises(PreconditionFailed, match="loadBalancerNamespaceMaximumBundles"):
        await a.split_bundle(str(NS), low)
    with pytest.raises(InvalidArgument, match="strictly inside"):
        await b.split_bundle(str(NS), high, "specified_positions_divide", boundaries=[0x10])
    with pytest.raises(NamespaceNotFound):
        await a.split_bundle("t/missing", FULL)
    ownership.owners.pop(("t", "ns", high))  # b took it to split it; give it back
    assert (namespaces.docs, ownership.owners, namespaces.writes) == before
    for svc in (a, b):
        await svc.bundles.close()


async def test_a_split_that_cannot_own_a_half_releases_what_it_took_and_writes_nothing() -> None:
    ownership, namespaces = Ownership(), Namespaces()
    namespaces.docs[str(NS)] = {}
    a = broker("a:1", ownership, namespaces)
    await a.lookup("persistent://t/ns/x")
    ownership.fail_acquire.add("0x7fffffff_0xffffffff")
    with pytest.raises(PreconditionFailed, match="owned by thief:9"):
        await a.split_bundle(str(NS), FULL)
    assert namespaces.writes == 0
    assert {b: o for (_, _, b), o in ownership.owners.items()} == {FULL: "a:1", "0x7fffffff_0xffffffff": "thief:9"}
    await a.bundles.close()


async def test_split_with_unload_releases_the_halves_and_closes_their_topics() -> None:
    ownership, namespaces = Ownership(), Namespaces()
    namespaces.docs[str(NS)] = {}
    a = broker("a:1", ownership, namespaces)
    await a.lookup("persistent://t/ns/x")
    halves = await a.split_bundle(str(NS), FULL, unload=True)
    assert len(halves) == 2 and ownership.owners == {} and not a._owned
    await a.bundles.close()


# -- create ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("count", "boundaries", "expected"), [
    (0, (), bundle_ranges(1)),  # bundles_per_namespace
    (128, (), bundle_ranges(128)),
    (0, ("0x00000000", "0x10000000", "0xffffffff"), ["0x00000000_0x10000000", "0x10000000_0xffffffff"]),
    (2, (0, 0x10000000, 0xFFFFFFFF), ["0x00000000_0x10000000", "0x10000000_0xffffffff"]),
])
def test_a_new_namespace_stores_its_bundles(count: int, boundaries: tuple[object, ...], expected: list[str]) -> None:
    svc = broker("a:1", Ownership(), Namespaces())
    assert svc._new_bundles(count, boundaries).ranges == expected


@pytest.mark.parametrize(("count", "boundaries"), [
    (129, ()), (-1, ()), (3, (0, 0x10000000, 0xFFFFFFFF)), (0, (0, 0x10000000)), (0, (0, 7, 7, 0xFFFFFFFF)),
])
def test_a_bad_bundles_count_or_boundaries_is_pulsars_412(count: int, boundaries: tuple[object, ...]) -> None:
    svc = broker("a:1", Ownership(), Namespaces())
    with pytest.raises(PreconditionFailed, match="Invalid number of bundles"):
        svc._new_bundles(count, boundaries)


def test_the_default_count_must_fit_under_the_maximum() -> None:
    with pytest.raises(ValueError, match="must not exceed load_balancer_namespace_maximum_bundles"):
        BrokerConfig(bundles_per_namespace=8, load_balancer_namespace_maximum_bundles=4)
    assert BrokerConfig(bundles_per_namespace=4, load_balancer_namespace_maximum_bundles=4).bundles_per_namespace == 4
